"""Log lines for the edge rooms, with structlog imported and configured on the first kept line.

Importing structlog costs more than most verbs' own work (it pulls in
``structlog.dev``, ``rich`` when installed, and asyncio), and most runs
log nothing at the default level, so the level check comes first and
structlog is configured only for a line that passes it (ADR 0031).  Lines
go to stderr: a console rendering on a terminal, JSON lines otherwise.
Imports nothing of pwf.
"""

from __future__ import annotations

import sys
from typing import Any, Final

__all__ = ["debug", "info", "set_verbosity", "warning"]

_DEBUG: Final = 10
_INFO: Final = 20
_WARNING: Final = 30
"""The standard library's level numbers, which structlog uses too."""

_state: dict[str, Any] = {"level": _WARNING, "logger": None}


def set_verbosity(verbose: int) -> None:
    """Keep warnings only, or info with ``-v``, or debug with ``-vv`` and more.

    structlog is configured again on the next kept line, so it writes to the
    ``sys.stderr`` of that moment; when structlog is already imported (a
    module of the verb logs through it directly) it is configured now.
    """
    _state["level"] = {0: _WARNING, 1: _INFO}.get(verbose, _DEBUG)
    _state["logger"] = None
    if "structlog" in sys.modules:
        _logger()


def debug(event: str, **fields: object) -> None:
    """Log ``event`` at debug level."""
    if _state["level"] <= _DEBUG:
        _logger().debug(event, **fields)


def info(event: str, **fields: object) -> None:
    """Log ``event`` at info level."""
    if _state["level"] <= _INFO:
        _logger().info(event, **fields)


def warning(event: str, **fields: object) -> None:
    """Log ``event`` at warning level."""
    if _state["level"] <= _WARNING:
        _logger().warning(event, **fields)


def _logger() -> Any:  # noqa: ANN401 - structlog's bound loggers are untyped proxies
    """structlog, configured once per :func:`set_verbosity`, and a logger from it."""
    logger = _state["logger"]
    if logger is None:
        import structlog  # noqa: PLC0415 - imported only for a line that is kept

        renderer: structlog.types.Processor = (
            structlog.dev.ConsoleRenderer(colors=False)
            if sys.stderr.isatty()
            else structlog.processors.JSONRenderer(sort_keys=True)
        )
        structlog.configure(
            processors=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                renderer,
            ],
            wrapper_class=structlog.make_filtering_bound_logger(_state["level"]),
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=False,
        )
        logger = _state["logger"] = structlog.get_logger()
    return logger
