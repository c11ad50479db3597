"""logfmt through the compiled tokenizer (forensics._logfmt), when it was built; the SQL path otherwise.

The C module reads a file's lines into the same text columns that queries/ingest.sql's stage_logfmt computes
with regexes (each canonical field's unquoted text, from the first of its keys present, in the same order),
on two threads with the GIL released. It also types what costs DuckDB most per line: the recipient's normal
form (forensics.addresses.normalize_address), the msg_id (SQL's mm_msg_id) and the common ISO timestamps with
a zone (others are NULL, typed by SQL's mm_ts in the session's zone). Its Arrow batches reach DuckDB as a stream (one range of the file at a
time, never the whole file in Python memory), where stage_logfmt_tokens types them exactly as stage_logfmt
does. Everything else (sampling the keys, repairing a dirty file, the cut-off last line) is shared.

MAILMORTEM_PARSER=sql forces the SQL path; =c refuses to run without the compiled one.
"""

from __future__ import annotations

import functools
import mmap
import os
from dataclasses import dataclass

from forensics.errors import ConfigError

try:
    from forensics import _logfmt
except ImportError:  # built without a C compiler: the SQL path reads logfmt
    _logfmt = None

ENV = "MAILMORTEM_PARSER"
# A range of the file per call (split between two threads): each batch is a few MB of Arrow buffers.
RANGE_BYTES = 32 * 2**20
THREADS = 2
_BOM = b"\xef\xbb\xbf"
PROBLEM_COLUMN = "problem_code"
# Typed by the C module (queries/ingest.sql's typed_columns takes them where they are not NULL).
TYPED_TEXT_COLUMNS, TS_COLUMN = ("recipient_typed", "msg_id_typed"), "ts_typed"


def _choice() -> str:
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in ("auto", "c", "sql"):
        raise ConfigError(f"{ENV}={os.environ[ENV]!r}: expected c, sql or auto (unset)")
    if value == "c" and _logfmt is None:
        raise ConfigError(f"{ENV}=c but the compiled tokenizer (forensics._logfmt) is not installed; "
                          "reinstall with a C compiler and Python's headers, or unset it")
    return value


def active() -> bool:
    """Whether logfmt files are read by the compiled tokenizer."""
    return _choice() != "sql" and _logfmt is not None


def describe() -> str:
    """Which logfmt parser is active, for `mailmortem --version`."""
    if active():
        return "C (forensics._logfmt)"
    return "SQL (no compiled tokenizer)" if _logfmt is None else f"SQL ({ENV}=sql)"


def fits(keys: list[list[bytes]]) -> bool:
    """Whether the C module takes this many keys (a file with hundreds of spellings of one key does not)."""
    return (sum(map(len, keys)) <= _logfmt.MAX_KEYS
            and all(len(field) <= _logfmt.MAX_FIELD_KEYS for field in keys))


def columns() -> list[str]:
    from forensics.ingest.load import TEXT_COLUMN_NAMES

    return ["line", *TEXT_COLUMN_NAMES, *TYPED_TEXT_COLUMNS, PROBLEM_COLUMN, TS_COLUMN]


@functools.cache
def schema():
    import pyarrow as pa

    types = {PROBLEM_COLUMN: pa.int8(), TS_COLUMN: pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, types.get(name, pa.string())) for name in columns()])


class DirtyFile(Exception):
    """Invalid UTF-8 or an overlong line: load._stage repairs the file, as after DuckDB's reader refuses it."""


@dataclass
class _Seen:
    flags: int = 0

    @property
    def mixed_endings(self) -> bool:
        return bool(self.flags & _logfmt.CRLF and self.flags & _logfmt.LONE)


def stage(con, path: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse a plain logfmt file into `staged`. False when its line endings mix CRLF with bare CR or LF:
    DuckDB's reader splits those its own way, so the caller reads it through the SQL path instead."""
    import pyarrow as pa

    import queries

    seen = _Seen()
    name = f"{staged}_tokens"
    con.register(name, pa.RecordBatchReader.from_batches(schema(), _batches(path, keys, seen)))
    try:
        queries.run(con, "stage_logfmt_tokens", {"keep_raw": keep_raw}, staged=staged, tokens=name)
    finally:
        con.unregister(name)
    if seen.flags & _logfmt.DIRTY:
        raise DirtyFile("invalid utf-8 or line size over the limit")
    return not seen.mixed_endings


def _batches(path: str, keys: list[list[bytes]], seen: _Seen):
    """The file's Arrow batches, range by range, the next range tokenized (GIL released) while DuckDB types
    this one; stops at a dirty range (the file is then read again, repaired)."""
    from concurrent.futures import ThreadPoolExecutor

    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped, ThreadPoolExecutor(1) as pool:
            ranges = _ranges(mapped)
            pending = [(span, pool.submit(_logfmt.tokenize, mapped, *span, keys, THREADS)) for span in ranges[:1]]
            for index, span in enumerate(ranges):
                ahead = ranges[index + 1:index + 2]
                pending += [(nxt, pool.submit(_logfmt.tokenize, mapped, *nxt, keys, THREADS)) for nxt in ahead]
                (start, end), done = pending.pop(0)
                for rows, flags, problem, cols, ts in done.result():
                    seen.flags |= flags
                    if flags & _logfmt.DIRTY:
                        return
                    if rows:
                        yield _batch(rows, problem, cols, ts)
                aligned = start - start % mmap.PAGESIZE
                mapped.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)  # read once: keep RSS down


def _ranges(mapped: mmap.mmap) -> list[tuple[int, int]]:
    """The file cut into ranges of about RANGE_BYTES at line ends (after a leading byte-order mark)."""
    size = len(mapped)
    start = len(_BOM) if mapped[:len(_BOM)] == _BOM else 0
    spans = []
    while start < size:
        end = _range_end(mapped, start, size)
        spans.append((start, end))
        start = end
    return spans


def _range_end(mapped: mmap.mmap, start: int, size: int) -> int:
    """Just after the first \\n at or beyond start + RANGE_BYTES (a CRLF is never split), or the file's end."""
    if start + RANGE_BYTES >= size:
        return size
    newline = mapped.find(b"\n", start + RANGE_BYTES)
    return size if newline < 0 else newline + 1


def _batch(rows: int, problem, cols, ts):
    """The C module's buffers as Arrow arrays, without a copy (the text columns, the problem code, the
    timestamps)."""
    import pyarrow as pa

    arrays = [pa.Array.from_buffers(pa.string(), rows, [pa.py_buffer(valid), pa.py_buffer(offsets),
                                                        pa.py_buffer(data)], null_count=nulls)
              for valid, offsets, data, nulls in cols]
    arrays.append(pa.Array.from_buffers(pa.int8(), rows, [None, pa.py_buffer(problem)]))
    ts_valid, ts_data, ts_nulls = ts
    arrays.append(pa.Array.from_buffers(schema().field(TS_COLUMN).type, rows,
                                        [pa.py_buffer(ts_valid), pa.py_buffer(ts_data)], null_count=ts_nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=schema())
