"""What a file's lines are read from, and what the reading could not take whole.

A file is read as it is, or from a copy of it: with LF endings where its line endings mix (mixes_line_endings,
line_ended_copy), repaired where it holds a line too long to read or invalid UTF-8 (below). Once it is staged, the
rows a reader could not take whole are marked (after_read): a last line no newline ended, and the lines a repaired
copy cut. forensics.ingest.load stages each file inside `staging`, which does both and removes the copy.

Neither reader takes a line of any length: DuckDB's refuses one of 8,000,000 bytes (its max_line_size in
queries/macros.sql's mm_named_lines, the CR of a CRLF counted), and where such a line ends just past the edge of
one of its buffers it has lost the line without an error, every later line then numbered one too low. So no
reader is shown a line of more than MAX_LINE_BYTES: a file holding one (has_long_line, a look that reads a
few bytes per half of that length) is read, on either path, from a repaired copy (repaired_copy), as a file
holding invalid UTF-8 is once a reader refuses it. In the copy invalid bytes are U+FFFD and each line longer
than MAX_LINE_BYTES is cut to its first KEPT_BYTES; once the copy is staged, each cut line is made a skipped
line (mark_long_lines), whatever its first bytes parse as: a record missing what came after the cut (its msg_id,
its step) would be a send counted wrong or not at all. Lines end at LF, CRLF or a lone CR, as both readers end
them. The compiled readers' own limit (MAX_LINE in forensics/ingest/readers/_logfmt.c and _jsonl.c) is the same,
so a gzipped file they read as it is decompressed sends such a line here too.
"""

from __future__ import annotations

import codecs
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Protocol

import queries

MAX_LINE_BYTES = 7_900_000  # below DuckDB's limit, which it does not always hold to (see above)
KEPT_BYTES = 65_536  # of a line too long to read, what the copy keeps, and its skip shows
TOO_LONG = f"line too long to read: over {MAX_LINE_BYTES:,} bytes"
_CHUNK = 2**20  # the original is read, and the copy written, this much at a time
_PIECE = 65_536  # has_long_line reads a window this much at a time until it meets a line end
_ENDS = (b"\n", b"\r")


class Source(Protocol):
    """A forensics.ingest.sources.Source (a frozen dataclass: its copies are made with dataclasses.replace). Not
    imported from there: sources imports this module."""

    path: str
    label: str
    gzipped: bool


@dataclass(frozen=True)
class LongLine:
    line_no: int  # 1-based, as the readers number the file's lines
    text: str  # its first KEPT_BYTES (whole characters)


def has_long_line(path: str) -> bool:
    """Whether the plain file at `path` holds a line of more than MAX_LINE_BYTES (line end excluded). Such a line
    holds a whole window of half that length (the file cut into windows from its start): only a window without a
    line end is measured, and a window of ordinary lines is done with at its first piece."""
    window = MAX_LINE_BYTES // 2
    with open(path, "rb") as handle:
        fd, size = handle.fileno(), os.fstat(handle.fileno()).st_size
        for start in range(0, size - window + 1, window):
            if _end_after(fd, start, start + window) < 0 and _line_length(fd, start, window, size) > MAX_LINE_BYTES:
                return True
    return False


def _end_after(fd: int, start: int, stop: int) -> int:
    """The offset of the first line end in [start, stop), or -1."""
    while start < stop:
        piece = os.pread(fd, min(_PIECE, stop - start), start)
        if not piece:
            return -1
        found = [at for at in map(piece.find, _ENDS) if at >= 0]
        if found:
            return start + min(found)
        start += len(piece)
    return -1


def _end_before(fd: int, stop: int) -> int:
    """The offset of the last line end before `stop`, or -1."""
    while stop > 0:
        start = max(0, stop - _PIECE)
        found = max(map(os.pread(fd, stop - start, start).rfind, _ENDS))
        if found >= 0:
            return start + found
        stop = start
    return -1


def _line_length(fd: int, start: int, window: int, size: int) -> int:
    """The length of the line holding the window [start, start + window), which holds no line end."""
    end = _end_after(fd, start + window, size)
    return (size if end < 0 else end) - (_end_before(fd, start) + 1)


def repaired_copy(source: Source, folder: str | None, cut: bool = True) -> tuple[Source, list[LongLine]]:
    """A copy in `folder` of a plain file whose invalid bytes are U+FFFD and (with `cut`) whose lines of more than
    MAX_LINE_BYTES (measured in the copy) are cut to their first KEPT_BYTES, and those lines. Every line keeps its
    number; the file is read a chunk at a time. A JSON document is not read by lines: it is never `cut`."""
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-clean-", suffix=".log", dir=folder, delete=False)
    try:
        with handle, open(source.path, "rb") as raw:
            cutter = _LineCutter(handle, MAX_LINE_BYTES if cut else None)
            # a chunk's text (at most 3 bytes a byte) is then shorter than a line too long: see _LineCutter
            for text in _decoded(raw, min(_CHUNK, MAX_LINE_BYTES // 4)):
                cutter.write(text.encode("utf-8"))
            cutter.close()
    except BaseException:
        os.unlink(handle.name)
        raise
    return replace(source, path=handle.name, gzipped=False), cutter.long_lines


def _decoded(raw, size: int) -> Iterator[str]:
    """The file's text, invalid bytes U+FFFD, as decoding each line (or the whole) would give it: no line end is
    part of a multi-byte sequence, and a sequence cut between chunks is held until the next one."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    while chunk := raw.read(size):
        yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


class _LineCutter:
    """Writes a stream of UTF-8 chunks to `out` with each line of more than `longest` bytes (None: no limit) cut to
    its first KEPT_BYTES, noting those lines. Every chunk is shorter than `longest`, so a line inside one is too: only
    the line still open at a chunk's end is held, at most `longest` bytes of it, until it ends or turns out too
    long."""

    def __init__(self, out, longest: int | None) -> None:
        self.out, self.longest, self.long_lines = out, longest, []
        self.line_no = 1  # of the open line
        self.open, self.cut, self.after_cr = bytearray(), False, False

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self.after_cr and data[:1] == b"\n":  # the LF of a CRLF whose CR ended the last chunk
            self.out.write(b"\n")
            data = data[1:]
        self.after_cr = data.endswith(b"\r")
        if not data:
            return
        first = min((at for at in map(data.find, _ENDS) if at >= 0), default=-1)
        if first < 0:
            self._extend(data)
            return
        self._extend(data[:first])
        self._close_line()
        last = max(map(data.rfind, _ENDS))
        ended = data[first:last + 1]
        self.out.write(ended)
        self.line_no += ended.count(b"\n") + ended.count(b"\r") - ended.count(b"\r\n")
        self._extend(data[last + 1:])

    def close(self) -> None:
        self._close_line()

    def _extend(self, part: bytes) -> None:
        if self.longest is None:
            self.out.write(part)
            return
        if self.cut:
            return
        self.open += part
        if len(self.open) > self.longest:
            kept = bytes(self.open[:KEPT_BYTES]).decode("utf-8", "ignore")  # a character cut in two is dropped
            self.long_lines.append(LongLine(self.line_no, kept))
            self.out.write(kept.encode("utf-8"))
            self.open, self.cut = bytearray(), True

    def _close_line(self) -> None:
        self.out.write(self.open)
        self.open, self.cut = bytearray(), False


def mark_long_lines(con, staged: str, long_lines: list[LongLine], enveloped: bool) -> None:
    """Make the staged rows of the lines cut in the copy skipped lines (TOO_LONG), their text what the copy kept; a
    file read through an envelope numbers its rows by the line each came from. Never a record: what the reader made
    of the cut line's first bytes is not what it held."""
    if long_lines:
        queries.run(con, "mark_long_lines_enveloped" if enveloped else "mark_long_lines",
                    {"lines": [line.line_no for line in long_lines], "texts": [line.text for line in long_lines],
                     "reason": TOO_LONG}, staged=staged)


# --- before a read: the file, or its copy ---------------------------------------------------------

@dataclass(frozen=True)
class Readable:
    """What a file's lines are read from: the file itself (`original`) or a copy of it (LF line endings where they
    mixed, repaired where it held a line too long or invalid UTF-8), and the lines that copy cut."""

    source: Source
    original: Source
    long_lines: tuple[LongLine, ...] = ()
    repaired: bool = False


Folder = Callable[[], "str | None"]  # where copies are written (DuckDB's spill folder), asked only when one is


def readable(source: Source, folder: Folder, *, document: bool) -> Readable:
    """The file, or where its line endings mix its copy with LF endings; either, where it holds a line too long to
    read (a JSON `document` is never read by lines), repaired (repaired)."""
    lines = source
    if isinstance(source.path, str) and mixes_line_endings(source.path):
        lines = line_ended_copy(source, folder())
    found = Readable(lines, source)
    if not document and has_long_line(lines.path):
        return repaired(found, folder, document=document)
    return found


def repaired(found: Readable, folder: Folder, *, document: bool) -> Readable:
    """The repaired copy of what `found` reads (and the lines it cut); a copy it replaces is forgotten."""
    copy, long_lines = repaired_copy(found.source, folder(), cut=not document)
    forget(found)
    return Readable(copy, found.original, tuple(long_lines), repaired=True)


def forget(found: Readable) -> None:
    """Remove the copy `found` reads, if it reads one: a copy of someone's log is not kept once staged."""
    if found.source is not found.original:
        os.unlink(found.source.path)


class Staging:
    """What one file is being staged from (`found`: readable), and the repaired copy to read it from instead once
    a reader refuses it as dirty (repair)."""

    def __init__(self, source: Source, folder: Folder, *, document: bool):
        self.folder, self.document = folder, document
        self.found = readable(source, folder, document=document)

    def repair(self) -> None:
        self.found = repaired(self.found, self.folder, document=self.document)


@contextmanager
def staging(con, source: Source, staged: str, folder: Folder, *, document: bool, enveloped: bool
            ) -> Iterator[Staging]:
    """Stage `source` into `staged` inside this block: it reads `Staging.found`. When the block ends without an
    error, what the reader could not take whole is marked (after_read); however it ends, a copy it read is removed."""
    stage = Staging(source, folder, document=document)
    try:
        yield stage
        after_read(con, staged, stage.found, enveloped=enveloped)
    finally:
        forget(stage.found)


# --- after a read: what it could not take whole -----------------------------------------------------

def after_read(con, staged: str, found: Readable, *, enveloped: bool) -> None:
    """Once `found` is staged: mark the staged rows a reader could not take whole (the last line, when no newline
    ended what was read, the file or its copy; the lines the repaired copy cut: mark_long_lines)."""
    mark_cut_off(con, staged, unfinished_line(found.source))
    mark_long_lines(con, staged, list(found.long_lines), enveloped=enveloped)


def mark_cut_off(con, staged: str, text: str | None) -> None:
    """The staged file's last line, when `text` says no newline ended it (None: one did)."""
    if text is not None:
        last = queries.run(con, "staged_rows", staged=staged).fetchone()[0] - 1
        mark_truncated(con, staged, last, text)


def mark_truncated(con, staged: str, row: int, text: str) -> None:
    queries.run(con, "mark_truncated_row", {"row": row, "text": text}, staged=staged)


# --- a file's line ends ----------------------------------------------------------------------------

TAIL_BYTES = 65536  # of a cut-off last line, what its skip shows


def unfinished_line(source: Source) -> str | None:
    """The text of a plain file's last line when no newline follows it (cut off mid-write; its last TAIL_BYTES
    bytes), or None when the file ends with a newline, is empty or cannot be read."""
    try:
        with open(source.path, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            return unfinished_text(handle.read())
    except OSError:
        return None


def unfinished_text(tail: bytes) -> str | None:
    """The text of the last line of `tail` (a file's last bytes) when no newline ends it, else None."""
    if not tail or tail.endswith((b"\n", b"\r")):  # a lone CR ends a line too (old Mac files)
        return None
    return tail.replace(b"\r", b"\n").rsplit(b"\n", 1)[-1].decode("utf-8", "replace")


# A file's line endings are looked at (and a copy written) this many bytes at a time.
_ENDINGS_CHUNK = 64 * 2**20


def mixes_line_endings(path: str) -> bool:
    """Whether a plain file ends lines both with CRLF and with a bare CR or LF. DuckDB's reader splits such a
    file its own way: where it takes the file for CRLF it reads a bare CR as a line end and drops the byte after
    it (a record's first letter), where it takes it for LF a CRLF is two line ends (every line number after it
    one off). A stretch without a CR is told by one search; the others are counted."""
    crlf = bare = False
    for mapped, start, end in _ending_chunks(path):
        if mapped.find(b"\r", start, end) < 0:
            bare = bare or mapped.find(b"\n", start, end) >= 0
        else:
            chunk = mapped[start:end]
            pairs = chunk.count(b"\r\n")
            crlf = crlf or pairs > 0
            bare = bare or chunk.count(b"\r") > pairs or chunk.count(b"\n") > pairs
        if crlf and bare:
            return True
    return False


def line_ended_copy(source: Source, folder: str | None) -> Source:
    """A copy in `folder` of a plain file whose line endings mix (mixes_line_endings), each of them (CRLF, bare CR,
    LF) an LF: one line per line end, as in a file of one kind of ending, which DuckDB's reader splits right."""
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-lines-", suffix=".log", dir=folder, delete=False)
    with handle:
        for mapped, start, end in _ending_chunks(source.path):
            handle.write(mapped[start:end].replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
    return replace(source, path=handle.name, gzipped=False)


def _ending_chunks(path: str) -> Iterator[tuple[mmap.mmap | bytes, int, int]]:
    """The file at `path` in ranges of about _ENDINGS_CHUNK that never end between a CR and its LF, mapped where a
    file shrinking under its map cannot kill the process (forensics.ingest.readers.runtime.chunks)."""
    from forensics.ingest.readers import runtime

    return runtime.chunks(path, _ENDINGS_CHUNK)
