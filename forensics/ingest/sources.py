"""Turn what the user typed (files, folders, globs, .gz, `-`) into checked input files, and say what each one is
before it is read (inspect) and that it is still that file once read."""

from __future__ import annotations

import codecs
import glob
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from forensics.errors import ConfigError, InputError
from forensics.ingest import runfolders
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


# --- what one argument names: a file, a folder's files, a glob's; and what was met there that cannot be read

@dataclass
class Unreadable:
    """What to do with a file or folder that cannot be read: refuse (the default), or with
    --skip-unreadable go on and list it, so the run can say it did not see everything."""
    skip: bool = False
    found: list[dict] = field(default_factory=list)  # {"path": ..., "reason": ...}

    def meet(self, path: str, reason: str, fix: str = "fix its permissions") -> None:
        if not self.skip:
            raise InputError(f"{path}: {reason} ({fix}, or pass --skip-unreadable to read the rest and list it as "
                             "not read)")
        self.found.append({"path": path, "reason": reason})


def files_named(given: str, ignored: Callable[[Path], bool] | None = None, what: str = "log files",
                unreadable: Unreadable | None = None) -> list[str]:
    """The files one argument names: itself, a folder's files (recursively, less the `ignored` ones), or a
    glob's matching files and folders (expanded as the shell would). Refuses an argument naming no file."""
    ignored = ignored or _not_a_log
    unreadable = unreadable or Unreadable()
    path = Path(given)
    if path.is_dir():
        files = _folder_files(path, ignored, unreadable)
        if not files:
            raise InputError(f"{given}: folder has no {what}")
        return files
    if path.is_file():
        return [given]
    if glob.has_magic(given):
        return _glob_files(given, ignored, unreadable)
    if path.exists():
        raise InputError(f"{given}: not a regular file")
    raise InputError(f"{given}: no such file or folder")


def _glob_files(pattern: str, ignored: Callable[[Path], bool], unreadable: Unreadable) -> list[str]:
    files = [file for match in sorted(glob.glob(pattern, recursive=True), key=Path)
             for file in (_folder_files(Path(match), ignored, unreadable) if os.path.isdir(match)
                          else [match] if _is_regular_file(Path(match), unreadable) else [])]
    if not files:
        raise InputError(f"{pattern}: no file matches this pattern")
    return files


def _folder_files(folder: Path, ignored: Callable[[Path], bool], unreadable: Unreadable) -> list[str]:
    """Every file below `folder`, through symlinked subfolders. What is not a regular file (a dangling symlink, a
    FIFO, a socket, a device), a subfolder that cannot be listed and a symlink loop are met, never passed over:
    Path.rglob and is_file() would swallow them, and a diagnosis would miss logs without a word."""
    found: list[Path] = []
    walked = {_folder_key(folder): folder}
    for root, dirs, names in os.walk(folder, onerror=lambda err: unreadable.meet(err.filename, _why(err)),
                                     followlinks=True):
        dirs[:] = [name for name in dirs if _walk_into(Path(root, name), walked, unreadable)]
        found.extend(path for path in (Path(root, name) for name in names)
                     if not ignored(path) and _is_regular_file(path, unreadable))
    return [str(p) for p in sorted(found)]


def _folder_key(folder: Path) -> tuple[int, int]:
    st = folder.stat()
    return st.st_dev, st.st_ino


def _walk_into(folder: Path, walked: dict[tuple[int, int], Path], unreadable: Unreadable) -> bool:
    """Whether to walk a subfolder: not when it was walked already (read once, by the path that reached it first);
    one met again inside itself is a symlink loop, and is said."""
    try:
        key = _folder_key(folder)
    except OSError as err:  # gone since it was listed
        unreadable.meet(str(folder), _why(err))
        return False
    first = walked.setdefault(key, folder)
    if first is not folder and folder.is_relative_to(first):
        unreadable.meet(str(folder), f"symlink loop: leads back to {first}, which is read once", "remove the link")
    return first is folder


_NOT_A_FILE_FIX = "remove it or move it out of the folder"


def _is_regular_file(path: Path, unreadable: Unreadable) -> bool:
    """Whether a folder's entry is a regular file (or a symlink to one); anything else is met. Only looked at,
    never opened: opening a FIFO waits for a writer."""
    try:
        mode = path.stat().st_mode
    except OSError as err:
        fix = "fix its permissions" if isinstance(err, PermissionError) else _NOT_A_FILE_FIX
        unreadable.meet(str(path), _unlooked_at(path, err), fix)
        return False
    if stat.S_ISREG(mode):
        return True
    unreadable.meet(str(path), f"{_kind(mode)}, not a regular file", _NOT_A_FILE_FIX)
    return False


def _unlooked_at(path: Path, err: OSError) -> str:
    """Why an entry cannot be looked at; a symlink to nothing names what it points to."""
    if not isinstance(err, FileNotFoundError):
        return _why(err)
    try:
        return f"dangling symlink to {os.readlink(path)}"
    except OSError:  # not a symlink: removed since its folder was listed
        return "removed while its folder was read"


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")]
    return next((name for test, name in kinds if test(mode)), "an unknown kind of file")


def _why(err: OSError) -> str:
    return "permission denied" if isinstance(err, PermissionError) else (err.strerror or str(err)).lower()


def _not_a_log(path: Path) -> bool:
    # Simulator ground truth and notes sit beside sample logs; they are not logs.
    return path.name.startswith(".") or path.name in ("truth.csv", "README.md", "README.txt")


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


_HEAD_CHECKED = 4096  # the first bytes of a file that must read the same when it is done (inspect's `since`)


@dataclass(frozen=True)
class FileFacts:
    """What a file is when first looked at: what tells it apart while it is read (device, inode, size, its first
    bytes as stored; None when it is gone), its first bytes for sniffing (decompressed, a byte-order mark dropped),
    and whether it holds nothing at all (a file of a byte-order mark alone is not empty)."""

    identity: tuple[int, int, int, bytes] | None
    head: bytes = b""
    empty: bool = True


def inspect(source: Source, since: FileFacts | None = None) -> FileFacts:
    """The file's facts. Looked at again once it is read (`since`: its facts when first looked at), a file that
    shrank, was replaced, or was emptied and written again is refused: what was read of it is not the log that was
    asked for (logrotate's copytruncate, with or without new lines since, or a rename during the run). A file that
    only grew (a live log) is fine: what was read is all there was then, and its first bytes are still those it had;
    `since` is then returned."""
    seen = _identity(source)
    if since is not None:
        _check_unchanged(source, since.identity, seen)
        return since
    with _refusing_unreadable(source), _open(source) as handle:
        first = handle.read(_SNIFF_BYTES)
    return FileFacts(seen, _without_bom(first), not first)


def _identity(source: Source) -> tuple[int, int, int, bytes] | None:
    try:
        with open(source.path, "rb") as handle:
            st = os.fstat(handle.fileno())
            return st.st_dev, st.st_ino, st.st_size, handle.read(_HEAD_CHECKED)
    except OSError:
        return None


def _check_unchanged(source: Source, before: tuple | None, after: tuple | None) -> None:
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
