"""Folders that hold a run's private files (a copy of standard input, DuckDB's spill): they never outlive the run.

A folder is removed when its run ends: at exit (after an error or Ctrl-C too), on SIGTERM and SIGHUP (the process
then exits with 128 + the signal's number, as a shell reports a killed command), and, when the run was killed
outright (SIGKILL, a crash, a power cut), by the next run. A live run holds a lock on its folder's owner file,
which the kernel drops when the process dies: a folder whose owner file can be locked is abandoned.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

OWNER_FILE = ".owner"  # locked by the run using the folder
_OWNER_BEING_MADE = ".owner-new"  # locked, then renamed: a sweeper never sees an owner file not yet locked
_SWEPT = "mailmortem-*"  # the folders any run looks at; only those with an owner file are ours
STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_live: dict[Path, BinaryIO | None] = {}  # this process's folders and their locked owner files


def make(prefix: str) -> Path:
    """A new folder `prefix`… in the temp folder, private to this run and removed when it ends (see above).
    Folders left by killed runs are swept first."""
    sweep_abandoned()
    _remove_on_stopping_signals()
    folder = Path(tempfile.gettempdir()) / f"{prefix}{secrets.token_hex(8)}"
    _live[folder] = None  # known before it exists: a signal from here on removes it
    try:
        folder.mkdir(mode=0o700)
    except OSError:  # not made, so not ours to remove
        del _live[folder]
        raise
    _live[folder] = _hold(folder)
    return folder


def _hold(folder: Path) -> BinaryIO:
    """Lock the folder's owner file for as long as this process lives (see sweep_abandoned)."""
    handle = open(folder / _OWNER_BEING_MADE, "wb")  # noqa: SIM115 - held open until the folder goes
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(folder / _OWNER_BEING_MADE, folder / OWNER_FILE)
    return handle


def remove(folder: Path) -> None:
    """Remove one of this run's folders with everything in it."""
    owner = _live.pop(folder, None)
    shutil.rmtree(folder, ignore_errors=True)
    if owner is not None:
        owner.close()


def sweep_abandoned() -> None:
    """Remove the folders of runs that were killed (no exit handler ran; a stdin copy is a whole mail log, a
    10M-line case's spill is GBs). A folder without an owner file is not touched: it is not ours, or its run is
    making it (a run killed then leaves it empty)."""
    for owner in Path(tempfile.gettempdir()).glob(f"{_SWEPT}/{OWNER_FILE}"):
        if _abandoned(owner):
            shutil.rmtree(owner.parent, ignore_errors=True)


def _abandoned(owner: Path) -> bool:
    try:
        if owner.parent.is_symlink() or owner.parent.stat().st_uid != os.getuid():
            return False
        with open(owner, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # locked (its run is alive), gone, or not ours to open
        return False


def _remove_on_stopping_signals() -> None:
    """Remove this run's folders when SIGTERM or SIGHUP stops it. A signal someone chose to handle or ignore
    (nohup ignores SIGHUP) is left as it is; so is any signal when called outside the main thread, which alone
    may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in STOPPING_SIGNALS:
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, _stopped)


def _stopped(signum: int, _frame) -> None:
    # Exits here rather than raising: an exception would unwind through code that may catch it, and the stop
    # asked for is immediate, as the default action would have been.
    _remove_all()
    os._exit(128 + signum)


def _remove_all() -> None:
    for folder in list(_live):
        with contextlib.suppress(OSError):
            remove(folder)


atexit.register(_remove_all)
