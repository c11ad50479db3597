"""Turn what the user typed (files, folders, globs, .gz, `-`) into checked input files."""

from __future__ import annotations

import codecs
import mmap
import os
import shutil
import sys
import tempfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from forensics.errors import ConfigError, InputError
from forensics.ingest import runfolders
from forensics.ingest.folders import Unreadable, files_named
from forensics.ingest.gzstream import GZIP_ERRORS, bulk_gzip

SYNTAXES = ("logfmt", "jsonl", "csv")
_SNIFF_BYTES = 64 * 1024
STDIN_PREFIX = "mailmortem-stdin-"  # the folder (runfolders) holding a copy of standard input


@dataclass(frozen=True)
class Source:
    path: str  # what DuckDB reads
    label: str  # what the user is shown (`-` shows as <stdin>)
    gzipped: bool


def resolve(paths: list[str] | tuple[str, ...], unreadable: Unreadable | None = None) -> list[Source]:
    """Expand folders and globs; read stdin into a temp file; refuse unreadable inputs (or, with
    `unreadable.skip`, leave them out and list them in `unreadable.found`)."""
    unreadable = unreadable or Unreadable()
    if not paths:
        raise ConfigError("no input given: pass log files, folders, globs, or - for standard input")
    sources: list[Source] = []
    for given in paths:
        sources.extend(_expand(given, unreadable))
    seen: set[str] = set()
    unique = [s for s in sources if not (s.path in seen or seen.add(s.path))]
    return [s for s in unique if _readable(s, unreadable)]


def _readable(source: Source, unreadable: Unreadable) -> bool:
    try:
        check_readable(source)
        return True
    except InputError as exc:
        if not unreadable.skip:
            raise
        unreadable.found.append({"path": source.label, "reason": str(exc).removeprefix(f"{source.label}: ")})
        return False


def _expand(given: str, unreadable: Unreadable) -> list[Source]:
    if given == "-":
        return [_spool_stdin()]
    found = []
    for path in files_named(given, unreadable=unreadable):
        try:
            found.append(source_of(str(Path(path))))
        except InputError as exc:  # cannot even be opened: permission denied
            unreadable.meet(path, str(exc).removeprefix(f"{path}: "))
    return found


def source_of(path: str) -> Source:
    """A named file, gzipped when its content (not its name) says so."""
    with _refusing_unreadable(Source(path, path, False)), open(path, "rb") as handle:
        return Source(path, path, handle.read(2) == b"\x1f\x8b")


def _spool_stdin() -> Source:
    # DuckDB reads files, and we need two passes (sniff + load): spool stdin once. A copy of someone's mail log
    # must not outlive the run: it is kept in a folder of the run's own (runfolders), removed however the run ends.
    path = runfolders.make(STDIN_PREFIX) / "stdin.log"
    with open(path, "wb") as handle:
        shutil.copyfileobj(sys.stdin.buffer, handle)
    return replace(source_of(str(path)), label="<stdin>")


def _without_bom(head: bytes) -> bytes:
    # Excel's "CSV UTF-8" starts with a byte-order mark; DuckDB's reader drops it, so the sniffed head must too.
    return head[len(codecs.BOM_UTF8):] if head.startswith(codecs.BOM_UTF8) else head


def head_bytes(source: Source, size: int = _SNIFF_BYTES) -> bytes:
    """The first bytes of the (decompressed) content, for sniffing."""
    with _refusing_unreadable(source), _open(source) as handle:
        return _without_bom(handle.read(size))


def read_all(source: Source) -> bytes:
    """The whole (decompressed) content, a gzip stream checked to its end; a damaged one is refused."""
    with _refusing_unreadable(source), _open(source) as handle:
        return handle.read()


def _open(source: Source):
    return bulk_gzip.open(source.path, "rb") if source.gzipped else open(source.path, "rb")


@contextmanager
def _refusing_unreadable(source: Source):
    """A failed read or a damaged gzip stream becomes one line naming the file and why."""
    try:
        yield
    except PermissionError:
        raise InputError(f"{source.label}: permission denied") from None
    except GZIP_ERRORS as exc:
        raise InputError(f"{source.label}: unreadable gzip file ({_reason(exc)})") from None


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.split(":")[-1].strip() if "Errno" in text else text


def check_readable(source: Source, what: str = "text log") -> None:
    """Refuses a .gz that is not gzip, an unreadable file and a binary one (`what` names what it is not)."""
    if source.path.endswith(".gz") and not source.gzipped and os.path.getsize(source.path) > 0:
        raise InputError(f"{source.label}: unreadable gzip file (not in gzip format)")
    head = head_bytes(source)
    if b"\x00" in head[:8192]:
        raise InputError(f"{source.label}: binary file, not a {what}")


_HEAD_CHECKED = 4096  # the first bytes of a file that must read the same when it is done (check_unchanged)


def identity(source: Source) -> tuple[int, int, int, bytes] | None:
    """What tells a file apart while it is read (device, inode, size, its first bytes as stored), for
    check_unchanged; None when it is gone."""
    try:
        with open(source.path, "rb") as handle:
            st = os.fstat(handle.fileno())
            return st.st_dev, st.st_ino, st.st_size, handle.read(_HEAD_CHECKED)
    except OSError:
        return None


def check_unchanged(source: Source, before: tuple[int, int, int, bytes] | None) -> None:
    """Refuse a file that shrank, was replaced, or was emptied and written again since `before` (identity, taken
    when it was first looked at): what was read of it is not the log that was asked for (logrotate's copytruncate,
    with or without new lines since, or a rename during the run). A file that only grew (a live log) is fine: what
    was read is all there was then, and its first bytes are still those it had."""
    after = identity(source)
    if before is None:
        return
    if after is None or after[:2] != before[:2]:
        change = "was replaced or removed (rotated?)"
    elif after[2] < before[2]:
        change = f"shrank from {before[2]:,} to {after[2]:,} bytes (rotated or truncated?)"
    elif not after[3].startswith(before[3]):
        change = "was emptied and written again (its first bytes changed: truncated by a rotation?)"
    else:
        return
    raise InputError(f"{source.label}: the file {change} while it was being read; copy the logs and run again on "
                     "the copy")


def is_empty(source: Source) -> bool:
    return not head_bytes(source, 1)


def decompressed_copy(source: Source, folder: str | None) -> Source:
    """A plain copy of a gzipped file in `folder`, its whole stream checked (DuckDB parses a plain file on
    every core, a .gz on one, and does not check a .gz's CRC). A damaged stream is refused, naming why."""
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-gunzip-", suffix=".log", dir=folder, delete=False)
    try:
        with handle, _refusing_unreadable(source), _open(source) as raw:
            shutil.copyfileobj(raw, handle, 4 * 2**20)
    except InputError:
        os.unlink(handle.name)
        raise
    return Source(handle.name, source.label, False)


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
    return Source(handle.name, source.label, False)


def _ending_chunks(path: str) -> Iterator[tuple[mmap.mmap | bytes, int, int]]:
    """The file at `path`, mapped, in ranges (start, end) of about _ENDINGS_CHUNK that never end between a CR and
    its LF. Each range's pages are given back once the caller is done with it (drop_pages). Read instead of mapped
    where nothing handles SIGBUS (_shrink_guarded): a file that shrinks under its map would kill the process."""
    if not _shrink_guarded():
        yield from _read_chunks(path)
        return
    with mapped(path) as whole:
        if whole is None:
            return
        start = 0
        while start < len(whole):
            end = min(start + _ENDINGS_CHUNK, len(whole))
            if whole[end - 1:end] == b"\r":
                end = min(end + 1, len(whole))
            yield whole, start, end
            drop_pages(whole, start, end)
            start = end


def _read_chunks(path: str) -> Iterator[tuple[bytes, int, int]]:
    """_ending_chunks by reads: each chunk as (bytes, 0, its length); a file that shrinks while it is read just ends
    early (check_unchanged then says so)."""
    with open(path, "rb") as handle:
        while chunk := handle.read(_ENDINGS_CHUNK):
            if chunk.endswith(b"\r"):
                chunk += handle.read(1)
            yield chunk, 0, len(chunk)


def _shrink_guarded() -> bool:
    """Whether the compiled tokenizer's SIGBUS handler is installed (the CLI installs it:
    readers.runtime.guard_shrinking_files). Without it, the first page of a map past a shrunken file's end kills the
    process with a bare "Bus error". Asked of the C module: Python's signal.getsignal answers from its own table,
    filled when the interpreter started, and said SIG_DFL under the handler, so every file's line ends had been read
    whole instead of mapped."""
    try:
        from forensics.ingest.readers import _logfmt
    except ImportError:
        return False
    return _logfmt.shrink_guarded()


@contextmanager
def mapped(path: str) -> Generator[mmap.mmap | None, None, None]:
    """The file at `path` mapped read-only for the compiled readers and the line-ending check (None when it is
    empty: an empty file cannot be mapped)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield None
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as whole:
            yield whole


def drop_pages(whole: mmap.mmap, start: int, end: int) -> None:
    """Give back the pages of whole[start:end] once they are read: a file is read once, and the pages of a file
    mapped whole would all count in the process's peak RSS (a 3.5 GB log, 3.5 GB)."""
    aligned = start - start % mmap.PAGESIZE
    whole.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)
