"""The watch's index of the sends it keeps: which rows of watch_sends share a key (a person's or a send's 64-bit
hash) with a poll's new sends, found without reading watch_sends. DuckDB has no keyed lookup that stays in its
memory limit (an ART index over every send is held in memory whole), and a join reads the whole table at every
poll, so that a poll's cost grew with the watch; here a poll costs a binary search of its keys.

The keys are kept as their upper 32 bits beside the row's number (rowid), in sorted runs that are merged as they
grow (a log-structured merge: each key is moved O(log n) times). Two keys that share their upper bits only both
come out: the SQL compares the rows it is pointed to exactly, so a shared prefix costs a row read, never a miss.
A run past ON_DISK entries is written to a file of the watch's run folder and mapped, not held: a binary search
reads a few of its pages, let go once it is done (they stay in the system's page cache, not in the watch's memory).
The keys are hashes, spread evenly: a poll's few hundred searches read pages all over a run, and a handful of polls
read nearly all of it, so that pages let go only every few searches kept the whole index resident (16 bytes a send
kept), growing with the watch."""

from __future__ import annotations

import itertools
import mmap
from pathlib import Path

import numpy as np

MERGE_RATIO = 2  # a run is merged into the one before it once it is at least half its size
ON_DISK = 1 << 18  # entries of a run from which it is a mapped file

_RUN = np.dtype([("key", np.uint32), ("row", np.uint32)])


class RowIndex:
    def __init__(self, folder: Path | None = None, name: str = "index"):
        self.folder = folder  # where runs past ON_DISK entries are written (None: kept in memory)
        self.name = name  # their files' names begin with it: two indexes may share a folder
        self.runs: list[np.ndarray] = []  # sorted by key, largest first
        self._numbers = itertools.count(1)

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        if not len(keys):
            return
        if len(rows) and int(rows.max()) > np.iinfo(np.uint32).max:
            raise OverflowError("the watch kept more than 4,294,967,295 sends: restart it")
        run = np.empty(len(keys), _RUN)
        run["key"], run["row"] = _prefix(keys), rows
        self.runs.append(run[np.argsort(run["key"], kind="stable")])
        while len(self.runs) > 1 and MERGE_RATIO * len(self.runs[-1]) >= len(self.runs[-2]):
            newer, older = self.runs.pop(), self.runs.pop()
            self.runs.append(self._merged(older, newer))

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """The rows whose key shares its upper bits with one of `keys`."""
        wanted = np.unique(_prefix(keys))
        found = [np.empty(0, np.uint32)]
        for run in self.runs:
            run_keys = run["key"]
            left = np.searchsorted(run_keys, wanted, "left")
            right = np.searchsorted(run_keys, wanted, "right")
            found.append(np.asarray(run["row"][_ranges(left, right)]))
        self.release()
        return np.unique(np.concatenate(found))

    def release(self) -> None:
        """Let go of the pages of the mapped runs read so far (read again from the page cache when needed)."""
        for run in self.runs:
            mapped = getattr(run, "_mmap", None)
            if mapped is not None:
                mapped.madvise(mmap.MADV_DONTNEED)

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    def _merged(self, older: np.ndarray, newer: np.ndarray) -> np.ndarray:
        """The two sorted runs as one, in one pass: each entry of the newer placed after the older's equal keys."""
        size = len(older) + len(newer)
        on_disk = self.folder is not None and size >= ON_DISK
        path = self.folder / f"{self.name}-{next(self._numbers)}.npy" if on_disk else None
        out = np.lib.format.open_memmap(path, "w+", _RUN, (size,)) if on_disk else np.empty(size, _RUN)
        at = np.searchsorted(older["key"], newer["key"], "right") + np.arange(len(newer))
        rest = np.ones(size, bool)
        rest[at] = False
        out[at] = newer
        out[rest] = older
        for run in (older, newer):
            _forget(run)
        if not on_disk:
            return out
        out.flush()
        del out  # mapped again read-only: the pages just written are not kept as this process's own
        return np.load(path, mmap_mode="r")


def _forget(run: np.ndarray) -> None:
    """A merged run's file, if it had one (its mapping goes with the last reference to it)."""
    name = getattr(run, "filename", None)
    if name:
        Path(name).unlink(missing_ok=True)


def _prefix(keys: np.ndarray) -> np.ndarray:
    return (keys.astype(np.uint64) >> np.uint64(32)).astype(np.uint32)


def _ranges(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Every position in left[i]:right[i] for each i, without a loop."""
    lengths = right - left
    keep = lengths > 0
    left, lengths = left[keep], lengths[keep]
    if not len(left):
        return np.empty(0, np.intp)
    starts = np.repeat(left - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return starts + np.arange(lengths.sum())
