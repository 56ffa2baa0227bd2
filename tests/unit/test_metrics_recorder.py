"""The served host's metric counts: buckets as Prometheus reads them, requests per outcome."""

from __future__ import annotations

from pwf.protocol.client import ClientResponse
from pwf.server.metrics import REQUEST_SECONDS, Histogram, Recorder


class _Request:
    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.request_id = f"r-{operation}"


def test_a_value_on_a_bound_counts_in_that_bucket_and_the_buckets_are_cumulative() -> None:
    histogram = Histogram((1.0, 2.0))
    for value in (0.5, 1.0, 1.5, 2.0, 3.0):
        histogram.observe(value)
    assert histogram.cumulative() == ([("1.0", 2), ("2.0", 4), ("+Inf", 5)], 8.0)


def test_requests_are_counted_per_outcome_and_timed_per_operation() -> None:
    recorder = Recorder()
    answers = [("run.start", "accepted"), ("run.start", "accepted"), ("run.start", "conflict")]
    answers.append(("host.status", "accepted"))
    for operation, outcome in answers:
        request = _Request(operation)
        recorder.received(request)  # type: ignore[arg-type]
        recorder.answered(request, ClientResponse(request_id="r", outcome=outcome))  # type: ignore[arg-type]
    counts, latencies = recorder.requests()
    assert counts == {
        ("host.status", "accepted"): 1,
        ("run.start", "accepted"): 2,
        ("run.start", "conflict"): 1,
    }
    assert sorted(latencies) == ["host.status", "run.start"]
    buckets, total = latencies["run.start"].cumulative()
    assert buckets[-1] == ("+Inf", 3)
    assert len(buckets) == len(REQUEST_SECONDS) + 1
    assert 0 <= total < 1
    assert not recorder._received  # nothing is kept once answered
