"""A gzip file read as it is decompressed: chunks that end at a line end, inflated on a thread of their own while the
tokenizer reads the chunk before (forensics.ingest.readers.logfmt.stage_gzipped), so no plain copy is written first."""

from __future__ import annotations

import contextlib
import gzip
import queue
import threading
import zlib
from collections.abc import Generator, Iterator

try:  # ISA-L's gzip decompresses several times faster than zlib; zlib where no wheel exists
    from isal import igzip as bulk_gzip
    from isal import isal_zlib as _inflating
    from isal.isal_zlib import error as _isal_error
except ImportError:  # pragma: no cover - platforms without an isal wheel
    bulk_gzip, _inflating, _isal_error = gzip, zlib, zlib.error
GZIP_ERRORS = (OSError, EOFError, zlib.error, _isal_error)

# gzip read as it is decompressed: chunks of about this many bytes, ending at a line end, for the tokenizer.
CHUNK_BYTES = 16 * 2**20
_READ_BYTES = 2**20  # compressed bytes read at a time
_LONGEST_LINE = 8_000_000  # the longest line DuckDB's reader (and the compiled tokenizer) takes


def gunzipped_chunks(path: str) -> Iterator[tuple[bytes, int]]:
    """A gzip file's content in chunks (each `data[:end]`) of about CHUNK_BYTES that end at a line end (the last
    one where the file ends), decompressed on a thread of its own (zlib releases the GIL) while the caller works
    on the chunk before. Every member's CRC and length are checked as it ends: a damaged or truncated stream
    raises one of GZIP_ERRORS after the chunks before the damage (the caller throws away what it made of them)."""
    return _ahead(_line_chunks(_inflated(path), CHUNK_BYTES))


def _inflated(path: str) -> Iterator[bytes]:
    """The decompressed bytes of each gzip member of the file in turn (zero bytes padding a member out are
    passed over, as gzip does), each member checked as it ends."""
    inflater, begun = _inflating.decompressobj(wbits=31), False
    with open(path, "rb") as handle:
        while block := handle.read(_READ_BYTES):
            while block:
                if not begun:
                    block = block.lstrip(b"\0")
                    begun = bool(block)
                    if not begun:
                        break
                if piece := inflater.decompress(block):
                    yield piece
                block = b""
                if inflater.eof:  # what follows this member is the next one
                    block, inflater, begun = inflater.unused_data, _inflating.decompressobj(wbits=31), False
    if begun:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")


def _line_chunks(pieces: Iterator[bytes], size: int) -> Iterator[tuple[bytes, int]]:
    """`pieces` joined into chunks of at least `size` bytes cut just after their last line end (a CRLF is
    never split), the last chunk holding whatever follows; a line longer than any reader takes is cut anyway."""
    held, length = [], 0
    for piece in pieces:
        held.append(piece)
        length += len(piece)
        if length >= size:
            joined = b"".join(held)
            cut = _after_last_line_end(joined) or (length if length > _LONGEST_LINE else 0)
            if cut:
                yield joined, cut
            held = [joined[cut:]]  # a line's start, or nothing
            length = len(held[0])
    if length:
        yield b"".join(held), length


def _after_last_line_end(data: bytes) -> int:
    """Just after the last \\n of `data`; with none, after its last \\r that is not its last byte (whose \\n
    may come next); 0 when it holds no line end."""
    newline = data.rfind(b"\n")
    return newline + 1 if newline >= 0 else data.rfind(b"\r", 0, len(data) - 1) + 1


_DONE = object()


def _ahead(items: Generator, depth: int = 2) -> Iterator:
    """`items` made on a thread of its own, up to `depth` ahead of the caller; its error is raised here, in
    turn. Stopping early (or an error here) stops that thread."""
    handoff, stop = queue.Queue(depth), threading.Event()

    def hand(item) -> bool:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                handoff.put(item, timeout=0.05)
                return True
        return False

    def make() -> None:
        try:
            if all(hand(item) for item in items):
                hand(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            hand(exc)
        finally:
            items.close()  # the file, when stopped early

    worker = threading.Thread(target=make, name="mailmortem-gunzip", daemon=True)
    worker.start()
    try:
        while (item := handoff.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
