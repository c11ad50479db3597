"""Follow files, folders, globs and a stream like `tail -F`, by polling (os.stat: inode and size).

Each followed file is read from the offset where its last complete line ended; only new bytes are read. A rename
rotation is seen as a new inode at the path: the old file is drained through its open descriptor, then the new
one is read from its start. A copytruncate is seen as a size below the offset: the file is read again from its
start. A file that appears under a watched folder or glob is followed from its start (a new worker's log), unless
it is one already followed under a new name (the renamed old file) or a rotated copy (`NAME.1`, `NAME-20261128`,
`NAME.gz`: its lines were read under NAME). What cannot be read any more is a Notice with `lost=True`.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from forensics.errors import InputError
from forensics.ingest.sources import Unreadable, files_named

STREAM = "-"
STREAM_LABEL = "<stdin>"
TAIL_BYTES = 64
# bytes of standard input held unread at most: beyond, the reading thread waits for a poll to take them, and so does
# the writer (the pipe fills), rather than the watch holding a stream piped in faster than it reads
STREAM_HELD = 8 * 2**20
GZIP_MAGIC = b"\x1f\x8b"


class Compressed(Exception):
    """A gzipped file: it cannot be followed (a rotated log's old lines, compressed once complete)."""


@dataclass
class Chunk:
    """Complete new lines of one followed file; `lines_before` lines of it were read before these."""

    label: str
    data: bytes
    lines_before: int
    prefix: bytes = b""  # a CSV file's header line, which each chunk of it is read under


@dataclass
class Notice:
    """Something about a followed file: `what` is new-file, rotated, stopped-growing, or (lost=True) gone,
    unreadable, lagging, stream-closed."""

    what: str
    source: str
    detail: str = ""
    lost: bool = False


@dataclass
class Followed:
    label: str
    fd: int | None = None
    inode: tuple[int, int] | None = None
    offset: int = 0  # bytes read, up to the end of the last complete line
    lines: int = 0
    read: int = 0  # lines read while watching, over every rotation
    pending: bytes = b""  # a line not yet ended
    tail: bytes = b""  # the last bytes before the offset: a file truncated and refilled past it no longer has them
    grew_at: float = field(default_factory=time.monotonic)
    gone_at: float | None = None
    stalled: bool = False  # said to have stopped growing
    behind_since: float | None = None
    caught_up: bool = False  # read to its end once: until then it is catching up (--since all), not lagging
    lost: bool = False
    prefix: bytes = b""


@dataclass(frozen=True)
class Pace:
    """How the follower polls: seconds before a vanished file counts as gone, before a silent file is said to have
    stopped growing, a reader behind by more than max_lag seconds is lost; bytes read per file and poll."""

    gone_after: float = 5.0
    stale_after: float = 60.0
    max_lag: float = 60.0
    chunk_bytes: int = 8 * 2**20


class Follower:
    def __init__(self, patterns: list[str], from_start: bool, pace: Pace = Pace(), skip_unreadable: bool = False):
        self.patterns = [p for p in patterns if p != STREAM]
        self.pace = pace
        self.files: dict[str, Followed] = {}
        self.inodes: set[tuple[int, int]] = set()  # every file followed so far, under any name
        self.initial: list[Notice] = []  # files found unreadable at start (--skip-unreadable): lost from the start
        found = Unreadable(skip=skip_unreadable)
        self.compressed: list[str] = []  # left out: said at start
        for path in self._expand(strict=True, unreadable=found):
            try:
                self.files[path] = self._open(path, from_start)
            except Compressed:
                self.compressed.append(path)
            except InputError as exc:
                if not skip_unreadable:
                    raise
                self.files[path] = Followed(path, lost=True)
                self.initial.append(Notice("unreadable", path, str(exc), lost=True))
        self.initial += [Notice("unreadable", u["path"], u["reason"], lost=True) for u in found.found]
        if not self.files and STREAM not in patterns:
            raise InputError(f"nothing to follow: {', '.join(self.compressed[:3])} compressed (a compressed file is "
                             "complete: read it with mailmortem diagnose)")
        self.stream = _Stream() if STREAM in patterns else None

    def lines_read(self) -> dict[str, int]:
        lines = {f.label: f.read for f in self.files.values()}
        if self.stream:
            lines[STREAM_LABEL] = self.stream.lines
        return lines

    @property
    def labels(self) -> list[str]:
        return list(self.files) + ([STREAM_LABEL] if self.stream else [])

    @property
    def watching(self) -> bool:
        """Whether anything is still followed (a lost file is not; a closed stream is not)."""
        return any(not f.lost for f in self.files.values()) or bool(self.stream and not self.stream.closed)

    def followed_count(self) -> int:
        return sum(not f.lost for f in self.files.values()) + bool(self.stream and not self.stream.closed)

    def idle(self, now: float) -> dict[str, float]:
        """Seconds since each followed file last grew."""
        idle = {f.label: round(now - f.grew_at, 1) for f in self.files.values() if not f.lost}
        if self.stream and not self.stream.closed:
            idle[STREAM_LABEL] = round(now - self.stream.grew_at, 1)
        return idle

    def _expand(self, strict: bool, unreadable: Unreadable | None = None) -> list[str]:
        """The files the patterns name now. At start (strict) a pattern naming no file is refused: a watch over
        nothing would call any period quiet."""
        found: list[str] = []
        for pattern in self.patterns:
            try:
                found += files_named(pattern, unreadable=unreadable or Unreadable(skip=True))
            except InputError:
                if strict:
                    raise
        return list(dict.fromkeys(found))

    def _open(self, path: str, from_start: bool) -> Followed:
        followed = Followed(path)
        try:
            followed.fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise InputError(f"{path}: {_why(exc)} (a watch must be able to read every file it follows)") from None
        st = os.fstat(followed.fd)
        followed.inode = (st.st_dev, st.st_ino)
        if os.pread(followed.fd, 2, 0) == GZIP_MAGIC:
            os.close(followed.fd)
            raise Compressed(f"{path}: compressed, cannot be followed")
        self.inodes.add(followed.inode)
        if not from_start:
            followed.offset = st.st_size
            # the lines already there are counted once (not parsed), so that later lines are numbered as diagnose
            # numbers them: at start, not at the first new line, where it would delay what that line says
            followed.lines = _count_lines(followed.fd, st.st_size)
        return followed

    def poll(self) -> tuple[list[Chunk], list[Notice]]:
        chunks: list[Chunk] = []
        notices: list[Notice] = []
        for followed in list(self.files.values()):
            if not followed.lost:
                self._poll_file(followed, chunks, notices)
        if self.stream:
            self.stream.take(chunks, notices)
        return chunks, notices

    def discover(self) -> list[Notice]:
        """New files under the watched folders and globs, followed from their start."""
        notices = []
        for path in self._expand(strict=False):
            if path in self.files or _rotated_copy(path, self.files) or _inode(path) in self.inodes:
                continue  # a followed file, or one followed before under another name: its lines were read
            try:
                followed = self._open(path, from_start=True)
            except Compressed:
                continue
            except InputError as exc:
                self.files[path] = Followed(path, lost=True)
                notices.append(Notice("unreadable", path, str(exc), lost=True))
                continue
            self.files[path] = followed
            notices.append(Notice("new-file", path))
        return notices

    def _poll_file(self, followed: Followed, chunks: list[Chunk], notices: list[Notice]) -> None:
        now = time.monotonic()
        try:
            st = os.stat(followed.label)
            os.close(os.open(followed.label, os.O_RDONLY))  # still readable by us (a mode change shows here)
        except FileNotFoundError:
            self._drain(followed, chunks)
            if followed.gone_at is None:
                followed.gone_at = now
            elif now - followed.gone_at >= self.pace.gone_after:
                self._lose(followed, notices, "gone", f"removed and not back after {self.pace.gone_after:g} s")
            return
        except OSError as exc:
            self._lose(followed, notices, "unreadable", _why(exc))
            return
        followed.gone_at = None
        if (st.st_dev, st.st_ino) != followed.inode:
            self._drain(followed, chunks, final=True)
            self._reopen(followed, notices, "rename")
        elif st.st_size < followed.offset + len(followed.pending) or self._refilled(followed):
            followed.offset, followed.lines, followed.pending, followed.tail = 0, 0, b"", b""
            notices.append(Notice("rotated", followed.label, "copytruncate"))
        self._read(followed, chunks, notices, now)

    @staticmethod
    def _refilled(followed: Followed) -> bool:
        """Truncated and written again past the offset between two polls (size alone cannot tell)."""
        return bool(followed.tail) and os.pread(followed.fd, len(followed.tail),
                                                followed.offset - len(followed.tail)) != followed.tail

    def _reopen(self, followed: Followed, notices: list[Notice], how: str) -> None:
        os.close(followed.fd)
        try:
            fresh = self._open(followed.label, from_start=True)
        except (InputError, Compressed) as exc:
            self._lose(followed, notices, "unreadable", str(exc))
            return
        followed.fd, followed.inode, followed.offset, followed.lines, followed.pending, followed.tail = \
            fresh.fd, fresh.inode, 0, 0, b"", b""
        notices.append(Notice("rotated", followed.label, how))

    def _drain(self, followed: Followed, chunks: list[Chunk], final: bool = False) -> None:
        """What the old file (renamed or removed, still open) holds past the offset; when it is `final` (no more is
        written to it), its last line even unended, as diagnose reads a complete last record without a newline."""
        while self._read(followed, chunks, [], time.monotonic()):
            pass
        if final and followed.pending and followed.fd is not None:
            last, followed.pending = followed.pending, b""
            self._emit(followed, last + b"\n", chunks)
            followed.offset -= 1  # the newline is ours, not the file's

    def _read(self, followed: Followed, chunks: list[Chunk], notices: list[Notice], now: float) -> bool:
        if followed.fd is None or followed.lost:
            return False
        data = os.pread(followed.fd, self.pace.chunk_bytes, followed.offset + len(followed.pending))
        size = os.fstat(followed.fd).st_size
        self._check_lag(followed, notices, now, behind=size > followed.offset + len(followed.pending) + len(data))
        if not data:
            self._check_growth(followed, notices, now)
            return False
        followed.grew_at, followed.stalled = now, False
        whole = followed.pending + data
        end = whole.rfind(b"\n") + 1
        followed.pending = whole[end:]
        if end:
            self._emit(followed, whole[:end], chunks)
        return True

    def _emit(self, followed: Followed, data: bytes, chunks: list[Chunk]) -> None:
        if followed.offset == 0:
            followed.prefix = b""
        chunks.append(Chunk(followed.label, data, followed.lines, followed.prefix))
        if followed.offset == 0:
            followed.prefix = csv_header(data)
        followed.offset += len(data)
        followed.tail = data[-TAIL_BYTES:]
        followed.lines += data.count(b"\n")
        followed.read += data.count(b"\n")

    def _check_growth(self, followed: Followed, notices: list[Notice], now: float) -> None:
        if not followed.stalled and now - followed.grew_at >= self.pace.stale_after:
            followed.stalled = True
            notices.append(Notice("stopped-growing", followed.label, f"no new line for {self.pace.stale_after:g} s"))

    def _check_lag(self, followed: Followed, notices: list[Notice], now: float, behind: bool) -> None:
        if not behind:
            followed.behind_since, followed.caught_up = None, True
        elif not followed.caught_up:
            return
        elif followed.behind_since is None:
            followed.behind_since = now
        elif now - followed.behind_since > self.pace.max_lag:
            self._lose(followed, notices, "lagging", f"the reader is more than {self.pace.max_lag:g} s behind")

    def _lose(self, followed: Followed, notices: list[Notice], what: str, detail: str) -> None:
        followed.lost = True
        if followed.fd is not None:
            os.close(followed.fd)
            followed.fd = None
        notices.append(Notice(what, followed.label, detail, lost=True))

    def close(self) -> None:
        for followed in self.files.values():
            if followed.fd is not None:
                os.close(followed.fd)
                followed.fd = None


class _Stream:
    """Standard input read by a thread (a pipe cannot be polled with stat); its lines are taken at each poll."""

    def __init__(self):
        self.closed = False
        self.lines = 0
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._taken = threading.Condition(self._lock)  # a poll took the lines held
        self._ended = False  # the bytes held end at least one line (a line longer than STREAM_HELD is read whole)
        self._eof = False
        self.grew_at = time.monotonic()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        import sys

        source = sys.stdin.buffer
        while True:
            data = source.read1(1 << 16) if hasattr(source, "read1") else source.read(1 << 16)
            with self._lock:
                if not data:
                    self._eof = True
                    return
                self._buffer += data
                self._ended = self._ended or b"\n" in data
                while self._ended and len(self._buffer) >= STREAM_HELD:
                    self._taken.wait()

    def take(self, chunks: list[Chunk], notices: list[Notice]) -> None:
        if self.closed:
            return
        with self._lock:
            end = self._buffer.rfind(b"\n") + 1
            if self._eof:  # a last line without its newline is still a line
                end = len(self._buffer)
            data, self._buffer[:end] = bytes(self._buffer[:end]), b""
            eof, self._ended = self._eof, False  # what is left holds no line end
            self._taken.notify()
        if data:
            self.grew_at = time.monotonic()
            chunks.append(Chunk(STREAM_LABEL, data if data.endswith(b"\n") else data + b"\n", self.lines))
            self.lines += data.count(b"\n") + (not data.endswith(b"\n"))
        if eof:
            self.closed = True
            notices.append(Notice("stream-closed", STREAM_LABEL, "standard input closed", lost=True))


def _inode(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _count_lines(fd: int, end: int) -> int:
    """Lines before `end` (a watch that began mid-file numbers the lines after it as diagnose would)."""
    count, offset = 0, 0
    while offset < end:
        data = os.pread(fd, min(1 << 20, end - offset), offset)
        if not data:
            break
        count += data.count(b"\n")
        offset += len(data)
    return count


def csv_header(data: bytes) -> bytes:
    """The first line of a file's first lines (which end with a line end) when it looks like a CSV header, b""
    otherwise: each later chunk of the file is read under it."""
    line = data[:data.find(b"\n") + 1]
    first = line.strip()
    looks = b"," in first and not first.startswith((b"{", b"[")) and b"=" not in first and b"@" not in first
    return line if looks else b""


def _rotated_copy(path: str, files: dict[str, Followed]) -> bool:
    """NAME.1, NAME.2.gz, NAME-20261128, NAME.gz beside a followed NAME: rotation's copies of lines read as NAME."""
    name = Path(path)
    for followed in files:
        base = Path(followed)
        if name.parent == base.parent and name.name != base.name and name.name.startswith(base.name) \
                and name.name[len(base.name)] in ".-_":
            return True
    return path.endswith(".gz")  # a compressed file cannot be followed; a rotated one was read before it was


def _why(exc: OSError) -> str:
    if isinstance(exc, PermissionError):
        return "permission denied"
    return (exc.strerror or str(exc)).lower()
