"""Options shared by several commands, and opening the store they name.

``--store postgresql://…`` (or ``$PWF_STORE``) puts the log in PostgreSQL;
``--db`` then names this host's local projection file, caught up from the
shared log when it is opened (unless ``--no-catch-up``) and inside every
write (ADR 0038).  The choice is kept in the click context, so every verb
that opens its store through :func:`open_store` runs on either.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import click

from pwf import canonical
from pwf.cli import verdict
from pwf.config import Settings
from pwf.errors import ConfigError
from pwf.store.opening import open_file

if TYPE_CHECKING:
    from pwf.readmodel import ReadModel
    from pwf.store import EventStore
    from pwf.store.postgres import PostgresStore

F = TypeVar("F", bound=Callable[..., Any])

STORE_KEY: Final = "pwf.store"
CATCH_UP_KEY: Final = "pwf.no_catch_up"
DATABASE: Final = "pwf.database"
"""The root context's key for the database file a verb opened (an error's hint reads it)."""


def _remember(key: str) -> Callable[[click.Context, click.Parameter, object], object]:
    def callback(ctx: click.Context, _: click.Parameter, value: object) -> object:
        if value is not None:
            ctx.meta[key] = value
        return value

    return callback


_db = click.option(
    "--db",
    "db",
    metavar="PATH",
    default=None,
    help="State database (default: $PWF_DB, else ./.pwf/state.db; pwf --help lists the"
    " other settings: PWF_SYNCHRONOUS, PWF_BUSY_TIMEOUT_MS); with --store, this host's"
    " local projection file.",
)
_store = click.option(
    "--store",
    metavar="URL",
    default=None,
    expose_value=False,
    callback=_remember(STORE_KEY),
    help="Keep the log in PostgreSQL (postgresql://…; default: $PWF_STORE).",
)
_no_catch_up = click.option(
    "--no-catch-up",
    is_flag=True,
    default=None,
    expose_value=False,
    callback=_remember(CATCH_UP_KEY),
    help="With --store: read the local projections as they are, without catching up first.",
)


def db_option(function: F) -> F:
    """``--db``, ``--store`` and ``--no-catch-up``; only ``db`` reaches the command."""
    return _db(_store(_no_catch_up(function)))


def file_option(
    flag: str, name: str, help_text: str, *, required: bool = False, metavar: str | None = None
) -> Callable[[F], F]:
    """An option that names one file, never a directory (None when not given)."""
    return click.option(
        flag,
        name,
        type=click.Path(dir_okay=False),
        required=required,
        metavar=metavar,
        help=help_text,
    )


json_flag = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
"""``--json`` alone, for the listing verbs, whose ``-o/--output`` offers more forms."""

_OUTPUT_KEY: Final = "pwf.output.table-or-json"


def json_option(command: F) -> F:
    """``--json``, and ``-o/--output table|json`` saying the same (ADR 0079).

    The listing verbs' ``-o`` also offers nl, csv and tsv; every other verb
    that prints JSON takes ``-o json`` as a synonym of its ``--json``.
    ``-o table --json`` asks for two forms and is a usage error.
    """

    @functools.wraps(command)
    def chosen(*args: object, **kwargs: object) -> object:
        output = click.get_current_context().meta.get(_OUTPUT_KEY)
        if output is not None:
            if output == "table" and kwargs.get("as_json"):
                raise click.UsageError("-o table and --json ask for two output forms")
            kwargs["as_json"] = output == "json"
        return command(*args, **kwargs)

    flagged = json_flag(cast("F", chosen))
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["table", "json"]),
        default=None,
        expose_value=False,
        callback=_remember(_OUTPUT_KEY),
        help="Output form: table (the default) or json; --json says the same.",
    )(flagged)


def echo_json(value: object) -> None:
    """Print ``value`` as ``--json`` prints it: canonical JSON on one line."""
    click.echo(canonical.encode(value).decode())


def judged(
    ok: bool, as_json: bool, data: Callable[[], object], lines: Callable[[], Iterable[str]]
) -> None:
    """Declare the verdict, print the report, and exit 1 unless ``ok``.

    ``--json`` prints ``data()``, else each of ``lines()``.  The verdict
    comes first, so a reader that closes stdout early keeps it
    (:func:`pwf.cli.verdict`, ADR 0079).
    """
    verdict(0 if ok else 1)
    if as_json:
        echo_json(data())
    else:
        for line in lines():
            click.echo(printable(line))
    if not ok:
        sys.exit(1)


def store_url() -> str | None:
    """The shared log's URL: ``--store``, else ``$PWF_STORE``, else None (SQLite only).

    Raises:
        ConfigError: the value is not a PostgreSQL URL.
    """
    context = click.get_current_context(silent=True)
    given = context.meta.get(STORE_KEY) if context is not None else None
    url = given or os.environ.get("PWF_STORE") or None
    if url is not None and not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"invalid setting store: {url!r} is not a postgresql:// URL")
    return url


def open_log(
    url: str, *, create: bool = False, formats: tuple[str, ...] | None = None
) -> PostgresStore:
    """Connect to the shared log at ``url`` (``formats``: see ``open_shared_log``).

    Raises:
        ConfigError: psycopg (the ``postgres`` extra) is not installed.
    """
    from pwf.store.opening import open_shared_log  # noqa: PLC0415 - loads psycopg when called

    busy = Settings.load().busy_timeout_ms
    try:
        return open_shared_log(url, create=create, formats=formats, busy_timeout_ms=busy)
    except ImportError:
        from pwf.extras import missing_extra  # noqa: PLC0415 - only on this error

        hint = missing_extra("--store needs psycopg", "postgres")
        raise ConfigError(f"{hint} (or psycopg[binary])") from None


def open_store(
    db: str | None, *, create: bool = False, read_only: bool = False, deciding: bool = False
) -> EventStore:
    """Open the store named by ``--db`` / ``$PWF_DB`` (and ``--store``) with the read model.

    A read-only SQLite store appends nothing, so it gets no projection hooks
    and the read model's modules are not even imported (ADR 0064).
    ``deciding``: the process decides commands one transaction each (``pwf
    request``, ``pwf worker``), so a SQLite log keeps its savepoint journals
    in memory (ADR 0061).
    """
    settings = Settings.load(db=db)
    url = store_url()
    context = click.get_current_context(silent=True)
    if context is not None and url is None:  # named in an error's hint (pwf.cli.PwfGroup)
        context.find_root().meta[DATABASE] = settings.db
    if url is None and read_only and not create:
        return open_file(
            settings.db,
            synchronous=settings.synchronous,
            busy_timeout_ms=settings.busy_timeout_ms,
            read_only=True,
        )
    from pwf.readmodel import ReadModel  # noqa: PLC0415 - only stores that append need it
    from pwf.sqlviews import install_views  # noqa: PLC0415 - as ReadModel

    read_model = ReadModel()
    if url is not None:
        return _open_mirror(settings, read_model, open_log(url, create=create))
    store = open_file(
        settings.db,
        create=create,
        synchronous=settings.synchronous,
        busy_timeout_ms=settings.busy_timeout_ms,
        hooks=[read_model],
        deciding=deciding,
    )
    if create:
        store.install(read_model.install, install_views)
    elif not read_only:
        try:
            upgrade_views(store)
        except BaseException:
            store.close()
            raise
    return store


def upgrade_views(store: EventStore) -> None:
    """Give a database made before its readable views or indexes the current ones.

    Only reads while they are current, so an up-to-date database is not
    written; otherwise they are made under the write lock, checked again
    there, in a transaction that appends nothing (ADR 0049; the projections'
    indexes added later the same way, ADR 0077).  The store has already
    proven the file is pwf's, so no other program's file is touched.
    """
    from pwf.readmodel import indexes_current, install_indexes  # noqa: PLC0415 - writers only
    from pwf.sqlviews import install_views, views_current  # noqa: PLC0415 - writers only

    store.projections_file.upgrade(indexes_current, install_indexes)
    store.projections_file.upgrade(views_current, install_views)


def refold(store: EventStore) -> None:
    """Fold a host's blobs again from its copy of the shared log after a prune (ADR 0107)."""
    from pwf.fold.rebuild import refold_blobs  # noqa: PLC0415 - only after a prune

    refold_blobs(store)


def _open_mirror(settings: Settings, read_model: ReadModel, log: PostgresStore) -> EventStore:
    from pwf.store.opening import open_mirror  # noqa: PLC0415 - an optional extra

    store = open_mirror(
        settings.db,
        log,
        synchronous=settings.synchronous if os.environ.get("PWF_SYNCHRONOUS") else "NORMAL",
        busy_timeout_ms=settings.busy_timeout_ms,
        hooks=[read_model],
        install=read_model.install,
    )
    store.refold = refold
    context = click.get_current_context(silent=True)
    if context is None or not context.meta.get(CATCH_UP_KEY):
        try:
            store.catch_up()
        except BaseException:
            store.close()
            raise
    return store


def code_units(_context: object, _parameter: object, value: str | None) -> str | None:
    """An id given on the command line, with a lone surrogate as the id holds it (ADR 0071).

    Python hands over argument bytes that are not UTF-8 as ``surrogateescape``
    halves; WTF-8 bytes (``ED A0 80`` for U+D800, what a JavaScript string's
    lone surrogate is in a byte string) become that surrogate, so the bytes
    ``run-`` ``ED A0 80`` name run ``run-`` U+D800.  Any other argument is kept
    as it is.
    """
    if value is None:
        return None
    try:
        return os.fsencode(value).decode("utf-8", "surrogatepass")
    except UnicodeError:  # not bytes from argv (a lone surrogate already), or not WTF-8
        return value


def printable(text: str) -> str:
    """Text fit for a terminal: a lone surrogate shows as U+FFFD, as Node prints it."""
    return canonical.utf8(text).decode()
