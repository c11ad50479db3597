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
kept), growing with the watch.

Most of a poll's keys were never added (each new send is a new send, and most people are sent to once): a filter of
the keys added (a Bloom filter of fixed size, held in memory) answers "not added" for those without a search, so
that a poll searches the runs only for the keys sent before and for the few the filter cannot tell apart. It is
fixed in size: memory stays flat however long the watch runs, and past some tens of millions of keys more of them
are searched, never fewer found."""

from __future__ import annotations

import itertools
import mmap
from pathlib import Path

import numpy as np

MERGE_RATIO = 2  # a run is merged into the one before it once it is at least half its size
ON_DISK = 1 << 18  # entries of a run from which it is a mapped file
# the filter's bits (a power of two) and the bits set per key; how many keys never added it lets through after an hour
# of sends is in docs/benchmarks.md, watch
FILTER_BITS, FILTER_HASHES = 1 << 26, 4

_RUN = np.dtype([("key", np.uint32), ("row", np.uint32)])


class RowIndex:
    def __init__(self, folder: Path | None = None, name: str = "index"):
        self.folder = folder  # where runs past ON_DISK entries are written (None: kept in memory)
        self.name = name  # their files' names begin with it: two indexes may share a folder
        self.runs: list[np.ndarray] = []  # sorted by key, largest first
        self.added = KeyFilter()
        self._numbers = itertools.count(1)

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        if not len(keys):
            return
        if len(rows) and int(rows.max()) > np.iinfo(np.uint32).max:
            raise OverflowError("the watch kept more than 4,294,967,295 sends: restart it")
        self.added.add(keys)
        run = np.empty(len(keys), _RUN)
        run["key"], run["row"] = _prefix(keys), rows
        self.runs.append(run[np.argsort(run["key"], kind="stable")])
        while len(self.runs) > 1 and MERGE_RATIO * len(self.runs[-1]) >= len(self.runs[-2]):
            newer, older = self.runs.pop(), self.runs.pop()
            self.runs.append(self._merged(older, newer))

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """The rows whose key shares its upper bits with one of `keys`."""
        wanted = np.unique(_prefix(keys[self.added.may_hold(keys)]))
        if not len(wanted):
            return np.empty(0, np.uint32)
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


class KeyFilter:
    """The keys added so far, as a Bloom filter: whether a key may have been added (never "no" for one that was)."""

    def __init__(self, bits: int | None = None):
        self.bits = bits or FILTER_BITS  # a power of two
        self.words = np.zeros(self.bits // 64, np.uint64)

    def add(self, keys: np.ndarray) -> None:
        words, masks = self._bits(keys)
        np.bitwise_or.at(self.words, words, masks)

    def may_hold(self, keys: np.ndarray) -> np.ndarray:
        words, masks = self._bits(keys)
        return ((self.words[words] & masks) != 0).all(axis=0)

    def _bits(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each key's FILTER_HASHES bits (one row each): the word each falls in, and its mask there."""
        mixed = _mixed(np.asarray(keys, np.uint64))
        step = (mixed >> np.uint64(32)) | np.uint64(1)  # odd: the bits of a key are apart
        positions = (mixed + np.arange(FILTER_HASHES, dtype=np.uint64)[:, None] * step) & np.uint64(self.bits - 1)
        return (positions >> np.uint64(6)).astype(np.intp), np.uint64(1) << (positions & np.uint64(63))


def _mixed(keys: np.ndarray) -> np.ndarray:
    """The keys' bits mixed (splitmix64's finalizer): DuckDB's hashes are mixed already, keys built by hand are not."""
    with np.errstate(over="ignore"):
        keys = (keys ^ (keys >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        keys = (keys ^ (keys >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return keys ^ (keys >> np.uint64(31))


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
