"""``pwf serve --metrics``: Prometheus metrics and a health endpoint (ADR 0076).

An edge room of the served host: imports the standard library's HTTP
server and sqlite3; ``prometheus_client`` (the ``metrics`` extra) is imported
only when the endpoint starts, so a host without ``--metrics`` never loads it.

The host's event loop and writer thread only count: each request, commit
and push adds to a plain dict or list here (:class:`Recorder`), with no lock
and no call into the library.  Everything else is read when a scrape comes,
on the endpoint's own thread: connections, subscriptions and workers from the
objects the host already keeps (copied whole, which the interpreter lock makes
atomic), the log's head and the host claim from a read-only connection to the
database, the files' sizes from the file system.  So a scrape never waits for
the event loop or the writer, and a stuck writer still shows on ``/healthz``.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from pwf.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from http.server import ThreadingHTTPServer

    from prometheus_client.registry import Collector

    from pwf.protocol.client import ClientRequest, ClientResponse
    from pwf.server._connections import Connection
    from pwf.server._subscriptions import Views
    from pwf.server._writer import Writer
    from pwf.server.supervision import Supervisor

__all__ = [
    "COMMIT_SECONDS",
    "DEFAULT_HOST",
    "GROUP_SIZES",
    "MOST_SCRAPES",
    "REQUEST_SECONDS",
    "SCRAPE_SECONDS",
    "Endpoint",
    "Histogram",
    "Recorder",
    "Served",
    "parse_address",
]

log = logging.getLogger("pwf.server")

DEFAULT_HOST: Final = "127.0.0.1"
MOST_SCRAPES: Final = 16
"""Connections the endpoint serves at once; one past it is closed (ADR 0110)."""
SCRAPE_SECONDS: Final = 5.0
"""How long the endpoint waits for a request's bytes before it closes the connection."""
"""``--metrics PORT`` listens here: the endpoint has no authentication."""
REQUEST_SECONDS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
"""``pwf_request_duration_seconds`` buckets: a lone request takes about a millisecond."""
COMMIT_SECONDS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
)  # fmt: skip
"""``pwf_commit_duration_seconds`` buckets."""
GROUP_SIZES: Final = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)
"""``pwf_commit_group_size`` buckets, up to the writer's largest group."""
WORKER_STATES: Final = ("starting", "running", "stopping")
SUBSCRIPTION_KINDS: Final = ("runs", "run", "session")
MISSING_EXTRA: Final = "pwf serve --metrics needs the metrics extra"


class Histogram:
    """Counts per bucket and a sum, kept by one thread and copied by the scraping one."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        """No observations yet; ``bounds`` are the buckets' upper bounds, ascending."""
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose bound is at least it (``le``)."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> tuple[list[tuple[str, int]], float]:
        """``(le, count)`` pairs ending with ``+Inf``, and the sum, as the exposition wants."""
        counts, total = self.counts[:], self.total
        pairs: list[tuple[str, int]] = []
        running = 0
        for bound, count in zip((*map(repr, self.bounds), "+Inf"), counts, strict=True):
            running += count
            pairs.append((bound, running))
        return pairs, total


class Recorder:
    """What the loop and the writer count as they go: plain dicts and lists, no locks.

    The loop alone writes the request counts and latencies, the writer alone
    the commit histograms; the scraping thread only copies them.
    """

    def __init__(self) -> None:
        """Nothing counted yet."""
        self._received: dict[int, float] = {}
        self.latency: dict[tuple[str, str], Histogram] = {}
        """Per (operation, outcome): its counts are ``pwf_requests_total`` as well."""
        self.group_sizes = Histogram(GROUP_SIZES)
        self.commit_seconds = Histogram(COMMIT_SECONDS)

    def received(self, request: ClientRequest) -> None:
        """A request line was read and handed on (the loop)."""
        self._received[id(request)] = time.perf_counter()

    def answered(self, request: ClientRequest, response: ClientResponse) -> None:
        """Its answer was written, or dropped with its closed connection (the loop).

        Every request is :meth:`received` first (the recorder exists before the
        socket listens); one that was not would count as answered at once.
        The observation is inlined: this runs per request.
        """
        began = self._received.pop(id(request), None)
        seconds = 0.0 if began is None else time.perf_counter() - began
        key = (request.operation, response.outcome)
        histogram = self.latency.get(key)
        if histogram is None:
            histogram = self.latency[key] = Histogram(REQUEST_SECONDS)
        histogram.counts[bisect.bisect_left(histogram.bounds, seconds)] += 1
        histogram.total += seconds

    def requests(self) -> tuple[dict[tuple[str, str], int], dict[str, Histogram]]:
        """Requests per (operation, outcome), and one latency histogram per operation (a copy)."""
        counts: dict[tuple[str, str], int] = {}
        merged: dict[str, Histogram] = {}
        for (operation, outcome), histogram in sorted(dict(self.latency).items()):
            observed, total = histogram.counts[:], histogram.total
            counts[operation, outcome] = sum(observed)
            into = merged.get(operation)
            if into is None:
                into = merged[operation] = Histogram(REQUEST_SECONDS)
            into.counts = [a + b for a, b in zip(into.counts, observed, strict=True)]
            into.total += total
        return counts, merged

    def committed(self, size: int, seconds: float) -> None:
        """A group of ``size`` decisions committed, flush included, in ``seconds`` (the writer)."""
        self.group_sizes.observe(size)
        self.commit_seconds.observe(seconds)


class Served(Protocol):
    """What the endpoint reads of the host (:class:`pwf.server.Server`)."""

    connections: set[Connection]
    stopping: bool
    writer: Writer | None
    views: Views | None
    supervisor: Supervisor | None

    @property
    def refused_connections(self) -> int:
        """Connections closed before their hello since the host started (ADR 0110)."""


def parse_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` as (host, port); ``PORT`` alone is loopback.

    Raises:
        InputError: not such an address, or a port outside 0-65535.
    """
    host, _, port = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or int(port) > 65535 or (":" in host and not text.startswith("[")):
        raise InputError(
            f"--metrics {text!r}: expected PORT, HOST:PORT or [V6]:PORT, e.g. 127.0.0.1:9464"
        )
    return host or DEFAULT_HOST, int(port)


def _claim_row(db: Path) -> tuple[int | None, tuple[object, ...] | None]:
    """The log's head seq and the host row, read on a read-only connection of their own."""
    connection = sqlite3.connect(f"{db.absolute().as_uri()}?mode=ro", uri=True, timeout=1.0)
    try:
        head = connection.execute("SELECT seq FROM _pwf_head").fetchone()
        try:
            row = connection.execute(
                "SELECT epoch, host_id, expires_at FROM host_state WHERE id = 1"
            ).fetchone()
        except sqlite3.OperationalError:  # a database never served has no host_state
            row = None
    finally:
        connection.close()
    return (0 if head is None else int(head[0])), row


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _Collector:
    """The ``pwf_*`` metrics, computed at each scrape, one group of families after another."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def collect(self) -> Iterator[object]:
        endpoint = self.endpoint
        yield from _request_families(endpoint.recorder)
        facts = endpoint.facts()
        yield from _log_families(facts)
        yield from _connection_families(
            list(endpoint.server.connections), endpoint.server.refused_connections
        )
        yield from _subscription_families(endpoint.server.views)
        yield from _worker_families(endpoint.server.supervisor)
        yield from _claim_families(facts)


def _request_families(recorder: Recorder) -> Iterator[object]:
    """Requests by operation and outcome, their latency, and the writer's groups and commits."""
    from prometheus_client.core import (  # noqa: PLC0415 - the metrics extra
        CounterMetricFamily,
        HistogramMetricFamily,
    )

    requests = CounterMetricFamily(
        "pwf_requests",
        "Client requests answered, by operation and outcome.",
        labels=("operation", "outcome"),
    )
    counts, latencies = recorder.requests()
    for (operation, outcome), count in counts.items():
        requests.add_metric((operation, outcome), count)
    yield requests
    duration = HistogramMetricFamily(
        "pwf_request_duration_seconds",
        "From a request line's receipt to its answer written, by operation.",
        labels=("operation",),
    )
    for operation, histogram in latencies.items():
        buckets, total = histogram.cumulative()
        duration.add_metric((operation,), buckets, total)
    yield duration
    for name, text, histogram in (
        ("pwf_commit_group_size", "Decisions per committed group.", recorder.group_sizes),
        (
            "pwf_commit_duration_seconds",
            (
                "A group's write transaction, from its first decision to its commit's return"
                " (the flush included)."
            ),
            recorder.commit_seconds,
        ),
    ):
        buckets, total = histogram.cumulative()
        family = HistogramMetricFamily(name, text)
        family.add_metric((), buckets, total)
        yield family


def _log_families(facts: _Facts) -> Iterator[object]:
    """The log's head and the database files' size."""
    from prometheus_client.core import GaugeMetricFamily  # noqa: PLC0415 - the metrics extra

    if facts.head is not None:
        yield GaugeMetricFamily("pwf_log_head_seq", "The log's head seq.", value=facts.head)
    yield GaugeMetricFamily(
        "pwf_log_bytes",
        "Bytes of the database file and its write-ahead log.",
        value=facts.log_bytes,
    )


def _connection_families(connections: list[Connection], refused: int) -> Iterator[object]:
    """Connections open and refused, and the most requests any one of them has unanswered."""
    from prometheus_client.core import (  # noqa: PLC0415 - the metrics extra
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    yield GaugeMetricFamily("pwf_connections", "Client connections open.", value=len(connections))
    yield CounterMetricFamily(
        "pwf_connections_refused",
        "Connections closed before their hello: the host's or one process's bound was reached.",
        value=refused,
    )
    yield GaugeMetricFamily(
        "pwf_connection_unanswered_requests",
        "The most requests read and not yet answered on any one connection.",
        value=max((connection.inflight for connection in connections), default=0),
    )


def _labelled(
    kind: Literal["counter", "gauge"],
    name: str,
    text: str,
    label: str,
    counts: Iterable[tuple[str, float]],
) -> object:
    """A family of one label, with a sample for each ``(value, count)`` in ``counts``."""
    from prometheus_client.core import (  # noqa: PLC0415 - the metrics extra
        CounterMetricFamily,
        GaugeMetricFamily,
    )

    family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
        name, text, labels=(label,)
    )
    for value, count in counts:
        family.add_metric((value,), count)
    return family


def _subscription_families(views: Views | None) -> Iterator[object]:
    """Subscriptions open and pushes sent, by kind, and the time spent computing them."""
    from prometheus_client.core import CounterMetricFamily  # noqa: PLC0415 - the metrics extra

    kinds = dict.fromkeys(SUBSCRIPTION_KINDS, 0)
    pushed = dict.fromkeys(SUBSCRIPTION_KINDS, 0)
    recompute = 0.0
    if views is not None:
        for held in list(views.subscriptions.values()):
            for kind in held.kinds():
                kinds[kind] = kinds.get(kind, 0) + 1
        pushed.update(dict(views.pushes))
        recompute = views.recompute_seconds
    yield _labelled(
        "gauge", "pwf_subscriptions", "Subscriptions open, by kind.", "kind", kinds.items()
    )
    yield _labelled(
        "counter",
        "pwf_subscription_pushes",
        "Subscription events sent, by kind.",
        "kind",
        pushed.items(),
    )
    yield CounterMetricFamily(
        "pwf_subscription_recompute_seconds",
        "Writer-thread time spent computing subscription payloads.",
        value=recompute,
    )


def _worker_families(supervisor: Supervisor | None) -> Iterator[object]:
    """Worker processes by state, and those ended by outcome."""
    states = dict.fromkeys(WORKER_STATES, 0)
    exits: list[tuple[str, int]] = []
    if supervisor is not None:
        for active in list(supervisor.active.values()):
            state = active.process.state
            if active.exiting or state.exiting or state.stop_outcome is not None:
                states["stopping"] += 1
            elif state.ready:
                states["running"] += 1
            else:
                states["starting"] += 1
        exits = sorted(dict(supervisor.exits).items())
    yield _labelled(
        "gauge", "pwf_workers", "Worker processes of this host, by state.", "state", states.items()
    )
    yield _labelled(
        "counter", "pwf_worker_exits", "Worker processes ended, by outcome.", "outcome", exits
    )


def _claim_families(facts: _Facts) -> Iterator[object]:
    """The host claim's lease left and its epoch."""
    from prometheus_client.core import GaugeMetricFamily  # noqa: PLC0415 - the metrics extra

    if facts.lease_seconds is not None:
        yield GaugeMetricFamily(
            "pwf_host_lease_remaining_seconds",
            "Time left on the host claim's lease; negative once it ran out.",
            value=facts.lease_seconds,
        )
    if facts.epoch is not None:
        yield GaugeMetricFamily(
            "pwf_host_epoch", "The epoch of the host claim this host holds.", value=facts.epoch
        )


class _Facts:
    """What a scrape or a health check reads of the database and the host, once."""

    __slots__ = ("epoch", "head", "lease_seconds", "log_bytes", "problem")

    def __init__(self) -> None:
        self.head: int | None = None
        self.log_bytes = 0
        self.epoch: int | None = None
        self.lease_seconds: float | None = None
        self.problem: str | None = None
        """Why the host is not healthy, or None."""


class Endpoint:
    """The HTTP endpoint: ``/metrics`` and ``/healthz`` on a thread of their own."""

    def __init__(
        self,
        server: Served,
        db: Path,
        recorder: Recorder,
        *,
        clock: Callable[[], int],
    ) -> None:
        """Bind the host, its database file and its recorder; nothing listens yet."""
        self.server = server
        self.db = Path(db)
        self.recorder = recorder
        self.clock = clock
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def facts(self) -> _Facts:
        """Read the head, the files' sizes and the claim now; say what is wrong, if anything."""
        facts = _Facts()
        facts.log_bytes = _size(self.db) + _size(self.db.with_name(self.db.name + "-wal"))
        server, writer = self.server, self.server.writer
        host = None if writer is None else writer.host
        claim = None if host is None else host.claim
        row: tuple[object, ...] | None = None
        try:
            facts.head, row = _claim_row(self.db)
        except sqlite3.Error as error:
            facts.problem = f"cannot read the database: {error}"
        if claim is not None:
            facts.epoch = claim.epoch
        if (
            row is not None
            and claim is not None
            and row[0] == claim.epoch
            and row[1] == claim.host_id
        ):
            expires_at = row[2]
            assert isinstance(expires_at, int)
            facts.lease_seconds = (expires_at - self.clock()) / 1000
        if facts.problem is not None:
            return facts
        if writer is None or not writer.alive:
            facts.problem = "the writer thread is not running"
        elif server.stopping:
            facts.problem = "the host is stopping"
        elif claim is None:
            facts.problem = "the host holds no claim"
        elif facts.lease_seconds is None:
            holder = "nobody" if row is None else f"host {row[1]} at epoch {row[0]}"
            facts.problem = f"the host claim was lost: the database names {holder}"
        elif facts.lease_seconds <= 0:
            facts.problem = (
                f"the host claim was lost: its lease ran out {-facts.lease_seconds:.1f} s ago"
            )
        return facts

    def health(self) -> tuple[int, str]:
        """200 and a line while the claim is held and the writer runs; else 503 and why."""
        facts = self.facts()
        if facts.problem is not None:
            return 503, f"unhealthy: {facts.problem}"
        return 200, f"ok: epoch {facts.epoch}, lease {facts.lease_seconds:.1f} s left"

    def start(self, host: str, port: int) -> str:
        """Listen on ``host:port`` (port 0: any free one); the ``/metrics`` URL.

        Raises:
            InputError: the metrics extra is not installed, or the address cannot be bound.
        """
        try:
            from prometheus_client import (  # noqa: PLC0415 - the metrics extra
                CollectorRegistry,
                ProcessCollector,
            )
        except ImportError:
            from pwf.extras import missing_extra  # noqa: PLC0415 - only on this error

            raise InputError(missing_extra(MISSING_EXTRA, "metrics")) from None
        registry = CollectorRegistry(auto_describe=False)
        collector: Collector = _Collector(self)  # type: ignore[assignment]
        registry.register(collector)
        ProcessCollector(registry=registry)
        handler = _handler(self, registry)
        from http.server import ThreadingHTTPServer  # noqa: PLC0415 - only with --metrics

        server_class = _bounded(ThreadingHTTPServer, _family(host))
        try:
            http = server_class((host, port), handler)
        except OSError as error:
            raise InputError(f"--metrics {host}:{port}: cannot listen: {error}") from None
        http.daemon_threads = True
        self._http = http
        bound = http.server_address[1]
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{bound}/metrics"
        self._thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.5}, name="pwf-metrics"
        )
        self._thread.daemon = True
        self._thread.start()
        return self.url

    def close(self) -> None:
        """Stop listening and wait for the thread."""
        http, self._http = self._http, None
        if http is None:
            return
        http.shutdown()
        http.server_close()
        if self._thread is not None:
            self._thread.join()


def _bounded(base: type[ThreadingHTTPServer], family: int) -> type[ThreadingHTTPServer]:
    """``base`` listening on ``family``, serving at most :data:`MOST_SCRAPES` connections at once.

    The server runs a thread per connection in the host's own process, so
    idle connections would hold the host's threads and file descriptors
    (ADR 0110): one past the bound is closed at once, and a handler waits at
    most :data:`SCRAPE_SECONDS` for a request's bytes.
    """
    import threading  # noqa: PLC0415 - only with --metrics

    class MetricsServer(base):  # type: ignore[valid-type,misc]
        address_family = family

        def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: ANN401 - the base's
            super().__init__(*args, **kwargs)
            self.slots = threading.BoundedSemaphore(MOST_SCRAPES)

        def process_request(self, request: Any, client_address: Any) -> None:  # noqa: ANN401
            if not self.slots.acquire(blocking=False):
                self.shutdown_request(request)
                return
            try:
                super().process_request(request, client_address)
            except BaseException:
                self.slots.release()
                raise

        def process_request_thread(self, request: Any, client_address: Any) -> None:  # noqa: ANN401
            try:
                super().process_request_thread(request, client_address)
            finally:
                self.slots.release()

    return MetricsServer


def _family(host: str) -> int:
    import socket  # noqa: PLC0415 - only with --metrics

    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _handler(endpoint: Endpoint, registry: object) -> type:
    from http.server import BaseHTTPRequestHandler  # noqa: PLC0415 - only with --metrics

    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest  # noqa: PLC0415

    class Handler(BaseHTTPRequestHandler):
        timeout = SCRAPE_SECONDS

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                try:
                    body = generate_latest(registry)  # type: ignore[arg-type]
                except Exception as error:  # noqa: BLE001 - one line, the scrape fails
                    self._send(500, "text/plain; charset=utf-8", f"{error}\n".encode())
                    return
                self._send(200, CONTENT_TYPE_LATEST, body)
            elif path == "/healthz":
                status, line = endpoint.health()
                self._send(status, "text/plain; charset=utf-8", f"{line}\n".encode())
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found: try /metrics\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's
            """Scrapes are not logged."""

    return Handler
