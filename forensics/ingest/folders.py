"""What one argument names: a file, a folder's files, a glob's; and what was met there that cannot be read."""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from forensics.errors import InputError


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
