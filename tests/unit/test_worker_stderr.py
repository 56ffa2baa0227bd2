"""A worker's stderr reaches the host's log whole-lined, cut and within a budget (ADR 0122)."""

from __future__ import annotations

from pwf.server.supervision.stderr import (
    LINE_CHARS,
    LOG_BURST,
    LOG_BYTES_PER_SECOND,
    READ_BURST,
    READ_BYTES_PER_SECOND,
    Forwarding,
)


def test_a_line_read_in_pieces_is_logged_once_whole() -> None:
    forwarding = Forwarding(0.0)
    assert forwarding.feed(b"Trace", 0.0) == []
    assert forwarding.feed(b"back (most\nrecent", 0.0) == ["Traceback (most"]
    assert forwarding.flush(0.0) == ["recent"]  # the last line, without its newline


def test_a_long_line_is_cut_and_what_was_cut_counted() -> None:
    forwarding = Forwarding(0.0)
    assert forwarding.feed(b"y" * (LINE_CHARS + 500), 0.0) == []
    assert forwarding.feed(b"y" * 100 + b"\nnext\n", 0.0) == [
        "y" * LINE_CHARS + " [600 more bytes]",
        "next",
    ]
    assert forwarding.flush(0.0) == []


def test_bytes_that_are_no_text_are_logged_replaced() -> None:
    assert Forwarding(0.0).feed(b"\xff\xfeok\n", 0.0) == ["\ufffd\ufffdok"]


def test_past_its_burst_a_worker_is_logged_at_the_rate_and_the_rest_counted() -> None:
    forwarding = Forwarding(0.0)
    line = b"x" * 79 + b"\n"  # 80 bytes a line with its newline
    burst = LOG_BURST // 80
    logged = forwarding.feed(line * (burst + 100), 0.0)
    assert logged[:burst] == ["x" * 79] * burst
    assert logged[burst:] == [
        f"100 lines of stderr not logged (over {LOG_BYTES_PER_SECOND // 1024} KiB a second)"
    ]
    one_second = forwarding.feed(line * 1_000, 1.0)
    assert len(one_second) == LOG_BYTES_PER_SECOND // 80  # the rate; the count waits 10 s
    later = forwarding.feed(line * 1_000, 11.0)  # 10 s later: the burst again, then the count
    assert later[:-1] == ["x" * 79] * burst
    assert later[-1].startswith(f"{(1_000 - len(one_second)) + (1_000 - burst)} lines")
    assert forwarding.flush(11.0) == []


def test_the_count_left_at_the_end_is_said() -> None:
    forwarding = Forwarding(0.0)
    said = forwarding.feed(b"z\n" * (LOG_BURST // 2 + 10), 0.0)
    assert said[-1] == "10 lines of stderr not logged (over 8 KiB a second)"  # the first at once
    assert forwarding.feed(b"z\n" * 5_000, 0.5)[-1] == "z"  # within 10 s: counted, not said
    assert forwarding.flush(0.6)[-1].endswith("lines of stderr not logged (over 8 KiB a second)")


def test_reads_past_their_budget_wait_what_they_took_beyond_it() -> None:
    forwarding = Forwarding(0.0)
    forwarding.feed(b"\n" * READ_BURST, 0.0)
    assert forwarding.pause() == 0.0
    forwarding.feed(b"\n" * READ_BYTES_PER_SECOND, 0.0)
    assert forwarding.pause() == 1.0
    forwarding.feed(b"", 2.0)
    assert forwarding.pause() == 0.0
