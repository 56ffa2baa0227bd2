"""``pwf completion bash|zsh|fish``: the shell completion script for pwf."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

__all__ = ["completion"]

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL; load it from your shell's start-up file.

    \b
    bash:  eval "$(pwf completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(pwf completion zsh)"    (in ~/.zshrc)
    fish:  pwf completion fish > ~/.config/fish/completions/pwf.fish

    Verbs, options and choices (--status, --type, --time-format) complete.
    """  # noqa: D301 - click's \b keeps the lines below as they are
    from pwf.cli import cli  # noqa: PLC0415 - the group imports this module lazily

    found = get_completion_class(shell)
    assert found is not None  # every choice has a class in click
    click.echo(found(cli, {}, "pwf", "_PWF_COMPLETE").source())
