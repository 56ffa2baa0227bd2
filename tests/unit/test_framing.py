"""NDJSON framing: DOMAIN §6 and SCENARIOS 6."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pwf.errors import ProtocolError
from pwf.protocol.client import MAX_PROTOCOL_MESSAGE_BYTES
from pwf.protocol.framing import FrameDecoder

MAX = MAX_PROTOCOL_MESSAGE_BYTES
TOO_LARGE = "Client protocol message exceeds 1 MiB"
LINE = b'{"schema":"pi-workflows.client.v1","type":"hello"}'


def refusal(decoder: FrameDecoder, data: bytes) -> str:
    """The message feed refuses some bytes with."""
    with pytest.raises(ProtocolError) as caught:
        decoder.feed(data)
    return str(caught.value)


class TestFrameDecoder:
    def test_a6_frame_decoder_yields_a_line_of_exactly_1_mib(self):
        """1 048 575 bytes plus the newline is one frame."""
        assert [b"x" * (MAX - 1)] == FrameDecoder().feed(b"x" * (MAX - 1) + b"\n")

    def test_a6_frame_decoder_rejects_a_line_over_1_mib(self):
        """1 048 576 bytes plus the newline is a line over the limit."""
        assert TOO_LARGE == refusal(FrameDecoder(), b"x" * MAX + b"\n")

    def test_a6_frame_decoder_rejects_an_unterminated_buffer_over_1_mib(self):
        """1 048 577 bytes with no newline are refused without waiting for one."""
        assert TOO_LARGE == refusal(FrameDecoder(), b"x" * (MAX + 1))

    def test_a6_frame_decoder_waits_at_exactly_1_mib_without_newline(self):
        """A buffer of exactly 1 MiB is kept; its newline then makes it too long."""
        decoder = FrameDecoder()
        assert [] == decoder.feed(b"x" * MAX)
        assert TOO_LARGE == refusal(decoder, b"\n")

    def test_a6_frame_decoder_rejects_an_oversized_line_fed_in_pieces(self):
        """The tail limit holds however the bytes arrive."""
        decoder = FrameDecoder()
        assert [] == decoder.feed(b"x" * (MAX // 2))
        assert TOO_LARGE == refusal(decoder, b"x" * (MAX // 2 + 1))

    def test_a6_frame_decoder_joins_a_split_line(self):
        """The first 3 bytes yield nothing, the rest yields the frame."""
        decoder = FrameDecoder()
        assert ([], [LINE]) == (decoder.feed(LINE[:3]), decoder.feed(LINE[3:] + b"\n"))

    def test_a6_frame_decoder_is_closed_after_an_error(self):
        """After a refusal even a good line is refused: the connection closes."""
        decoder = FrameDecoder()
        refusal(decoder, b"x" * (MAX + 1))
        assert "Protocol frame decoder is closed after an error" == refusal(decoder, LINE + b"\n")

    def test_many_frames_in_one_feed(self):
        """Several lines in one chunk come out in order, the tail kept."""
        decoder = FrameDecoder()
        frames = decoder.feed(b"a\nbb\nccc\ndd")
        assert (["a", "bb", "ccc"], 2) == ([f.decode() for f in frames], decoder.pending)

    def test_split_at_every_byte(self):
        """Whatever byte a line is split at, the same frames come out."""
        data = LINE + b"\n" + LINE + b"\n"
        for cut in range(len(data) + 1):
            decoder = FrameDecoder()
            assert [LINE, LINE] == decoder.feed(data[:cut]) + decoder.feed(data[cut:])

    def test_one_byte_at_a_time(self):
        """Feeding single bytes yields each frame once its newline arrives."""
        decoder = FrameDecoder()
        frames = [frame for byte in LINE + b"\n" for frame in decoder.feed(bytes([byte]))]
        assert [LINE] == frames

    def test_empty_frames_skipped(self):
        """Blank lines are ignored."""
        assert [b"a", b"b"] == FrameDecoder().feed(b"\n\na\n\n\nb\n\n")

    def test_long_line_in_small_chunks(self):
        """A near-limit line fed in 4 KiB chunks comes out whole."""
        data = b"y" * (MAX - 1) + b"\n"
        decoder = FrameDecoder()
        frames = [
            frame
            for start in range(0, len(data), 4096)
            for frame in decoder.feed(data[start : start + 4096])
        ]
        assert [MAX - 1] == [len(frame) for frame in frames]

    def test_frames_are_bytes(self):
        """Frames are immutable bytes, not views of the buffer."""
        assert bytes is type(FrameDecoder().feed(b"a\n")[0])

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(
        lines=st.lists(
            st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b), max_size=12
        ),
        cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=8),
    )
    def test_arbitrary_splits_yield_the_lines(self, lines, cuts):
        """Any chunking of concatenated lines yields exactly those lines."""
        data = b"".join(line + b"\n" for line in lines)
        points = sorted({min(cut, len(data)) for cut in cuts} | {0, len(data)})
        decoder = FrameDecoder()
        frames = [
            frame
            for start, end in itertools.pairwise(points)
            for frame in decoder.feed(data[start:end])
        ]
        assert (lines, 0) == (frames, decoder.pending)
