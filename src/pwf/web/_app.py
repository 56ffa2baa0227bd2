"""The Starlette application: routes, query parameters, templates and safe responses."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from pwf.errors import InputError, PwfError
from pwf.isotime import duration, iso_utc, written_times
from pwf.web._data import interaction_page, log_page, overview_page, run_page, runs_page
from pwf.web._source import Database
from pwf.web._svg import events_picture, model_time_picture

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from starlette.requests import Request

    from pwf.web._source import View

__all__ = ["HEADERS", "PAGES", "create_app", "html_bytes"]

HEADERS: Final = {
    # No script may run in a page, whatever a stored value holds: the pages need none.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:;"
        " form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _when(ms: object) -> str:
    """Epoch milliseconds as UTC ISO 8601 (``-`` for none)."""
    return iso_utc(ms) if isinstance(ms, int) else "-"


def _timed(found: object) -> str:
    """A finding's or timeline item's summary with the times it wrote as UTC ISO 8601."""
    return written_times(str(getattr(found, "summary", "")), getattr(found, "times", ()), iso_utc)


def _duration(ms: object) -> str:
    """Milliseconds as ``pwf status`` writes a span (``2d 3h``, ``4m 10s``), else ``-``."""
    return duration(ms) if isinstance(ms, int) else "-"


def html_bytes(text: str) -> bytes:
    """A rendered page as UTF-8; a lone surrogate, which UTF-8 cannot carry, as its escape."""
    return text.encode("utf-8", "backslashreplace")


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("pwf.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["when"] = _when
    environment.filters["duration"] = _duration
    environment.filters["timed"] = _timed
    return environment


class _Page:
    """One request's rendering: its ``at``, its link builder and the template environment."""

    def __init__(self, environment: Environment, request: Request, at: int | None) -> None:
        self.environment = environment
        self.request = request
        self.at = at

    def link(self, path: str, /, **params: object) -> str:
        """A URL within the view, keeping the seq the page is viewed at."""
        if self.at is not None and "at" not in params:
            params["at"] = self.at
        query = {name: str(value) for name, value in params.items() if value not in (None, "")}
        encoded = urlencode(query, encoding="utf-8", errors="surrogatepass")
        return path + ("?" + encoded if query else "")

    def render(self, template: str, code: int = 200, **values: Any) -> Response:  # noqa: ANN401
        params = {name: v for name, v in query_params(self.request).items() if name != "at"}
        text = self.environment.get_template(template).render(
            link=self.link,
            at=self.at,
            path=self.request.url.path,
            page_params=params,
            request_params=list(params.items()),
            **values,
        )
        return Response(html_bytes(text), code, HEADERS, media_type="text/html; charset=utf-8")


def query_params(request: Request) -> dict[str, str]:
    """The query's parameters; a lone surrogate in an id comes back as the link wrote it.

    Links encode ids as UTF-8 with ``surrogatepass`` (a lone surrogate has no
    UTF-8 form), so the query is decoded the same way rather than with
    replacement characters.
    """
    query = request.scope["query_string"].decode("latin-1")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, encoding="utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        pairs = parse_qsl(query, keep_blank_values=True, encoding="utf-8", errors="replace")
    return dict(pairs)


def _number(request: Request, name: str, default: int | None = None) -> int | None:
    text = query_params(request).get(name, "")
    if text == "":
        return default
    if not text.isdigit() or len(text) > 18 or int(text) < 1:
        raise InputError(f"{name} must be a whole number of at least 1, not {text[:40]!r}")
    return int(text)


def _required(request: Request, name: str) -> str:
    value = query_params(request).get(name, "")
    if not value:
        raise InputError(f"the page needs ?{name}=")
    return value


Handler = Callable[["Request", "View", "_Page", Database], Response]


def _overview(request: Request, view: View, out: _Page, _database: Database) -> Response:
    found = overview_page(view, _number(request, "now"))
    return out.render("overview.html", view=view, **found)


def _runs(request: Request, view: View, out: _Page, _database: Database) -> Response:
    params = query_params(request)
    number = _number(request, "page", 1) or 1
    found = runs_page(view, params.get("status"), params.get("session"), number)
    return out.render("runs.html", view=view, **found)


def _run(request: Request, view: View, out: _Page, _database: Database) -> Response:
    found = run_page(view, _required(request, "id"))
    picture = events_picture(found["explanation"].timeline)
    return out.render("run.html", view=view, picture=picture, **found)


def _interaction(request: Request, view: View, out: _Page, _database: Database) -> Response:
    found = interaction_page(view, _required(request, "id"))
    explanation = found["explanation"]
    attempt = found["attempt"]
    created = found["request"]["created_at"]
    model_time = model_time_picture(
        start=_attempt_start(found),
        now=explanation.now,
        deadline=None if attempt is None else attempt["deadline_at"],
        turns=explanation.state["turns"],
        pauses=[pause for pause in found["pauses"] if pause.start >= created],
        shifts=found["shifts"],
    )
    picture = events_picture(explanation.timeline)
    return out.render(
        "interaction.html", view=view, picture=picture, model_time=model_time, **found
    )


def _log(request: Request, view: View, out: _Page, database: Database) -> Response:
    params = query_params(request)
    filters = {name: params.get(name, "") for name in ("type", "run", "session", "request")}
    found = log_page(view, filters, _number(request, "from"), _number(request, "to"))
    return out.render("log.html", view=view, chain=database.chain(view), **found)


def _endpoint(
    handler: Handler, database: Database, environment: Environment
) -> Callable[[Request], Response]:
    """A Starlette endpoint: the view at ``?at=``, the handler, and errors as one-line pages."""

    def endpoint(request: Request) -> Response:
        at: int | None = None
        try:
            at = _number(request, "at")
            out = _Page(environment, request, at)
            with database.view(at) as view:
                return handler(request, view, out, database)
        except InputError as error:
            code = 404 if str(error).startswith("no ") else 400
            return _Page(environment, request, at).render("error.html", code, error=str(error))
        except (PwfError, sqlite3.Error) as error:
            text = " ".join(str(error).split())
            return _Page(environment, request, at).render("error.html", 503, error=text)

    return endpoint


PAGES: Final[dict[str, Handler]] = {
    "/": _overview,
    "/runs": _runs,
    "/run": _run,
    "/interaction": _interaction,
    "/log": _log,
}


def create_app(path: Path, busy_timeout_ms: int = 5_000) -> Starlette:
    """The web view over the pwf database at ``path``, opened for reading only.

    Raises:
        InputError: there is no database at ``path``.
        StoreError: it is not a pwf database.
    """
    database = Database(path, busy_timeout_ms)
    environment = _environment()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            database.close()

    routes = [
        Route(route, _endpoint(handler, database, environment)) for route, handler in PAGES.items()
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.database = database
    return app


def _attempt_start(found: dict[str, Any]) -> int:
    """Where the model-time axis starts: the request's creation or the attempt's first start.

    The attempt's ``started_at`` moves with every shift; the first shift holds its first value.
    """
    shifts = found["shifts"]
    attempt = found["attempt"]
    candidates = [int(found["request"]["created_at"])]
    if shifts and shifts[0].event.from_started_at is not None:
        candidates.append(shifts[0].event.from_started_at)
    elif attempt is not None and attempt["started_at"] is not None:
        candidates.append(int(attempt["started_at"]))
    return min(candidates)
