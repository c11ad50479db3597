"""The watch's index of the sends it keeps: which rows of watch_sends share a key (a person's or a send's 64-bit
hash) with a poll's new sends, found without reading watch_sends. DuckDB has no keyed lookup that stays in its
memory limit (an ART index over every send is held in memory whole), and a join reads the whole table at every
poll, so that a poll's cost grew with the watch; here a poll costs a binary search of its keys.

The keys are kept as their upper 32 bits beside the row's number (rowid), in sorted runs that are merged as they
grow (a log-structured merge: each key is moved O(log n) times). Two keys that share their upper bits only both
come out: the SQL compares the rows it is pointed to exactly, so a shared prefix costs a row read, never a miss."""

from __future__ import annotations

import numpy as np

MERGE_RATIO = 2  # a run is merged into the one before it once it is at least half its size


class RowIndex:
    def __init__(self):
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted key prefixes, their rows), largest first

    def add(self, keys: np.ndarray, rows: np.ndarray) -> None:
        if not len(keys):
            return
        self.runs.append(_sorted(_prefix(keys), rows.astype(np.uint32)))
        while len(self.runs) > 1 and MERGE_RATIO * len(self.runs[-1][0]) >= len(self.runs[-2][0]):
            (k2, r2), (k1, r1) = self.runs.pop(), self.runs.pop()
            self.runs.append(_sorted(np.concatenate([k1, k2]), np.concatenate([r1, r2])))

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """The rows whose key shares its upper bits with one of `keys`."""
        wanted = np.unique(_prefix(keys))
        found = [np.empty(0, np.uint32)]
        for run_keys, run_rows in self.runs:
            left = np.searchsorted(run_keys, wanted, "left")
            right = np.searchsorted(run_keys, wanted, "right")
            found.append(run_rows[_ranges(left, right)])
        return np.unique(np.concatenate(found))

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self.runs)


def _prefix(keys: np.ndarray) -> np.ndarray:
    return (keys.astype(np.uint64) >> np.uint64(32)).astype(np.uint32)


def _sorted(keys: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    return keys[order], rows[order]


def _ranges(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Every position in left[i]:right[i] for each i, without a loop."""
    lengths = right - left
    keep = lengths > 0
    left, lengths = left[keep], lengths[keep]
    if not len(left):
        return np.empty(0, np.intp)
    starts = np.repeat(left - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return starts + np.arange(lengths.sum())
