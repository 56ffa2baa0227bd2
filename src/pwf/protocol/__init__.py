"""The wire protocols of the host; its modules import canonical, errors and msgspec only.

Pure code: parsing, checking and encoding of client and worker messages, and
NDJSON framing.  No sockets, clock or logging; the host and server rooms do
the I/O.

* :mod:`pwf.protocol.client`: ``pi-workflows.client.v1`` (DOMAIN §6, §7.1).
* :mod:`pwf.protocol.worker`: the worker launch, message and response schemas (DOMAIN §14).
* :mod:`pwf.protocol.framing`: :class:`~pwf.protocol.framing.FrameDecoder`.
* :mod:`pwf.protocol.wire`: the constants both ends share (schema, version, limits).
* :mod:`pwf.protocol._lines`: reading and writing one canonical JSON object a line, the
  rule both protocols share, worded by each, and the member checks and wire members
  both take the same way.

The package itself imports nothing, so the light client of ``pwf call``
reads :mod:`pwf.protocol.wire` without loading the parser.
"""
