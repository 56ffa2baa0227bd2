"""pwf: an event-sourced host state for agent workflows."""

from typing import Final

__version__ = "0.1.0"
"""The package version; the build reads it from here (``pwf --version`` prints it)."""

DISTRIBUTION: Final = "pwf-host"
"""The name pwf is installed under (ADR 0073); ``pwf`` on the package index is another project.

The import package and the command stay ``pwf``; install hints name this.
"""
