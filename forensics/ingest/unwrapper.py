"""Line envelopes taken off in C (forensics._unwrap): Docker json-file, CRI, `docker logs --timestamps`, CloudWatch's
S3 export, syslog (RFC 3164, rsyslog's format, RFC 5424), journald JSON, the application prefixes, and the JSON
platforms' files of one entry per line (Loki, Cloud Logging, CloudWatch events, Datadog, Elasticsearch), their
logfmt records tokenized beside.

DuckDB takes every envelope off (queries/envelopes.sql); for the line formats of the container runtimes, syslog,
journald and the log platforms, which hold most of what responders are handed, that cost as much as reading the
records themselves. So when the compiled readers are built, a plain file of logfmt records in one of them is read
here instead: each range of the file (a memory map, as tokenizer.stage reads a plain file) is unwrapped and
tokenized in C, GIL released, two halves at a time, and reaches stage_logfmt_tokens as one Arrow stream with each
line's envelope (`env`) built beside its tokens. The staged rows are the ones the DuckDB path makes (tests hold
them equal).

The C module reads the common case only: at the first line it cannot read exactly as envelopes.sql does (a piece
of a longer line, an unfinished one, a CR, invalid UTF-8, a JSON entry of another shape, JSON DuckDB reads more
leniently, a value it would render its own way, ...: see forensics/_unwrap.c) the file goes back to the DuckDB
path, as it does for JSON records, a byte-order mark, a sample of keys the first range cannot hold, or a JSON
platform's document (found.document: an array or pages of entries).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import queries
from forensics.ingest import tokenizer
from forensics.ingest.envelopes import Found, Unwrapped, inner_syntaxes

try:
    from forensics import _unwrap
except ImportError:  # built without a C compiler: DuckDB takes every envelope off
    _unwrap = None

KINDS = {"docker-json": "DOCKER", "cri": "CRI", "docker-logs": "TIMESTAMPED", "cloudwatch-export": "TIMESTAMPED",
         "syslog": "SYSLOG", "rsyslog": "RSYSLOG", "journald": "JOURNALD", "python-logging": "PYTHON_LOGGING",
         "structlog": "STRUCTLOG", "zap": "ZAP", "slog": "SLOG", "logrus": "SLOG", "rfc5424": "RFC5424",
         "loki": "LOKI", "cloud-logging": "CLOUD_LOGGING", "cloudwatch": "CLOUDWATCH", "datadog": "DATADOG",
         "elastic": "ELASTIC"}
# what the file's path names (envelopes.file_params) where the line names none, by envelope: as
# queries/envelopes.sql, coalesce(the line's, :param) for an entry
FROM_PATH = {"docker-json": ("container",), "cri": ("container", "unit"), "docker-logs": ("container",),
             "cloudwatch-export": ("container",), "cloudwatch": ("container",)}
PROVENANCE = ("host", "unit", "container", "pid")
STREAMS = (None, "stdout", "stderr", None)  # by the C module's code: not an entry, stdout, stderr, no stream


class _Deferred(Exception):
    """A line the C module does not read as DuckDB does: the DuckDB path reads the file. Raised inside DuckDB's
    reading of the Arrow stream, it comes back wrapped in a DuckDB error: _Read.deferred says it was this."""


class _Read:
    """What the stream's batches counted: its rows, and whether a range was handed back (_Deferred)."""

    def __init__(self) -> None:
        self.rows, self.deferred = 0, False


def active() -> bool:
    """Whether the line envelopes of KINDS are taken off here (with the compiled tokenizer, which reads them)."""
    return _unwrap is not None and tokenizer.active()


def describe() -> str:
    """What takes the line envelopes of KINDS off, for `mailmortem --version`."""
    if active():
        return "C (forensics._unwrap)"
    return "DuckDB (no compiled unwrapper)" if _unwrap is None else "DuckDB (with the SQL parser)"


def takes(found: Found, syntax: str | None) -> bool:
    """Whether this file may be read here: a line format the C module reads, records that may be logfmt, and
    times without a zone (RFC 3164's) read in UTC (another --tz is DuckDB's)."""
    zone_less = found.envelope.zone_less and found.params.get("tz", "UTC") != "UTC"
    return active() and found.name in KINDS and not found.document and syntax in (None, "logfmt") and not zone_less


def stage(con, found: Found, path: str, staged: str, syntax: str | None, keys_of, keep_raw: bool
          ) -> Unwrapped | None:
    """Take the envelope off `path` and tokenize its logfmt records into `staged`, as envelopes.stage would;
    `keys_of(table, head)` gives the tokenizer's keys from the inner lines in `table` (None: too many). None when
    the file is for the DuckDB path (nothing is left in `staged` then)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            if mapped[:3] == b"\xef\xbb\xbf":
                return None
            return _staged(con, found, mapped, staged, syntax, keys_of, keep_raw)


def _staged(con, found, mapped, staged, syntax, keys_of, keep_raw) -> Unwrapped | None:
    ranges = tokenizer._ranges(mapped)
    kind = getattr(_unwrap, KINDS[found.name])
    first = _unwrapped(mapped, *ranges[0], kind, found)
    if first is None or (first[0] < tokenizer.SAMPLE_LINES and len(ranges) > 1):
        return None  # deferred, or a first range too short to hold the sample of keys DuckDB's path takes
    head_table = f"{staged}_head"
    con.register(head_table, _head(first, found))
    try:
        sample = [row[0] for row in queries.run(con, "envelope_inner_sample", unwrapped=head_table).fetchall()]
        inner = [syntax] if syntax else inner_syntaxes(sample)
        keys = keys_of(head_table, "\n".join(sample).encode()) if inner == ["logfmt"] else None
    finally:
        con.unregister(head_table)
    if keys is None:
        return None
    read = _Read()
    try:
        _into_staged(con, found, mapped, ranges, kind, staged, keys, keep_raw, read)
    except Exception:
        if not read.deferred:
            raise
        queries.run(con, "drop_staged", staged=staged)
        return None
    return Unwrapped("logfmt", read.rows, sample)


def _unwrapped(buffer, start: int, end: int, kind: int, found: Found):
    """The C module's reading of one span, or None where it defers."""
    params = found.params
    result = _unwrap.unwrap(buffer, start, end, kind, params.get("year") or 0, params.get("last_month") or 12)
    return None if result[1] & _unwrap.DEFER else result


def _head(first, found: Found):
    """The first range's inner lines as envelope_lines has them (line, env), for the samples."""
    import pyarrow as pa

    rows, _flags, cols, what, ts, line_no = first
    lines = _text_array(rows, cols[0])
    env = _env(rows, cols, what, ts, line_no, 0, found)
    return pa.table({"line": _as_duckdb_line(lines, what), "env": env})


def _into_staged(con, found, mapped, ranges, kind, staged, keys, keep_raw, read: _Read) -> None:
    import pyarrow as pa

    name = f"{staged}_tokens"
    reader = pa.RecordBatchReader.from_batches(_schema(), _batches(mapped, ranges, kind, keys, keep_raw, found,
                                                                   read))
    con.register(name, reader)
    try:
        queries.script(con, "stage_logfmt_tokens", {"keep_raw": keep_raw}, staged=staged, tokens=name, env="env")
    finally:
        con.unregister(name)


def _batches(mapped, ranges, kind, keys, keep_raw, found, read: _Read) -> Iterator:
    """Each half range's batch in file order: the next range unwrapped and tokenized on two threads (GIL
    released) while DuckDB types this one."""
    with ThreadPoolExecutor(2) as pool:
        def submitted(span):
            start, end = span
            middle = _middle(mapped, start, end)
            return [pool.submit(_read, mapped, a, b, kind, keys, found) for a, b in ((start, middle), (middle, end))
                    if a < b]

        pending = [submitted(ranges[0])]
        for index in range(len(ranges)):
            if index + 1 < len(ranges):
                pending.append(submitted(ranges[index + 1]))
            for future in pending.pop(0):
                try:
                    rows, parts = future.result()
                except _Deferred:
                    read.deferred = True
                    raise
                yield _batch(rows, parts, read.rows, keep_raw, found)
                read.rows += rows
            _drop_pages(mapped, *ranges[index])


def _middle(mapped, start: int, end: int) -> int:
    """Just after the first line end at or past the middle of a span (its end if none)."""
    newline = mapped.find(b"\n", (start + end) // 2, end)
    return end if newline < 0 else newline + 1


def _read(mapped, start: int, end: int, kind: int, keys, found: Found) -> tuple[int, tuple]:
    from forensics import _logfmt

    unwrapped = _unwrapped(mapped, start, end, kind, found)
    if unwrapped is None:
        raise _Deferred
    rows, _flags, cols, what, ts, line_no = unwrapped
    _valid, offsets, data, _nulls = cols[0]
    tokens = _logfmt.tokenize_lines(data, offsets, keys)
    if tokens[0] < rows or tokens[1] & _logfmt.DIRTY:
        raise _Deferred  # an inner line over the tokenizer's limit
    return rows, (unwrapped, tokens)


def _drop_pages(mapped, start: int, end: int) -> None:
    aligned = start - start % mmap.PAGESIZE
    mapped.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)


def _batch(rows: int, parts, first_row: int, keep_raw: bool, found: Found):
    """The tokens of a half range with the line and its `env`, in tokenizer.schema()'s order."""
    import pyarrow as pa

    (_rows, _flags, unwrapped, what, ts, line_no), (_n, _tflags, problem, cols, tts) = parts
    tokens = tokenizer._batch(rows, problem, cols, tts)
    line = _text_array(rows, unwrapped[0]) if keep_raw else tokens.column(0)
    arrays = [_as_duckdb_line(line, what), *tokens.columns[1:],
              _env(rows, unwrapped, what, ts, line_no, first_row, found)]
    return pa.RecordBatch.from_arrays(arrays, schema=_schema())


def _text_array(rows: int, column):
    """One of the C module's text columns (validity, offsets, data, nulls) as an Arrow array, without a copy."""
    import pyarrow as pa

    valid, offsets, data, nulls = column
    return pa.Array.from_buffers(pa.string(), rows, [pa.py_buffer(valid), pa.py_buffer(offsets),
                                                     pa.py_buffer(data)], null_count=nulls)


def _as_duckdb_line(line, what):
    """The line as the DuckDB path has it: an entry's empty text is '', a blank line of the file NULL (whatever
    `line` held there: the inner text, or the tokenizer's NULL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    empty = pc.equal(pc.binary_length(pc.fill_null(line, "")), 0)
    if not pc.any(empty).as_py():
        return line
    entry = pc.not_equal(_codes(what, len(line)), 0)
    blank = pc.if_else(entry, pa.scalar("", pa.string()), pa.scalar(None, pa.string()))
    return pc.if_else(empty, blank, line)


def _codes(what, rows: int):
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int8(), rows, [None, pa.py_buffer(what)])


def _env(rows: int, cols, what, ts, line_no, first_row: int, found: Found):
    """envelope_lines' `env` of each line: its number in the file, and for an entry its time, stream, and the
    host, unit, container and pid its line names, else (FROM_PATH) the file's path does; nothing but the number
    for a line that is no entry."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = _codes(what, rows)
    entry = pc.not_equal(codes, 0)
    ts_valid, ts_data, ts_nulls = ts
    numbers = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(line_no)])
    provenance = dict(zip(PROVENANCE, (_text_array(rows, column) for column in cols[1:])))
    for name in FROM_PATH.get(found.name, ()):
        provenance[name] = pc.coalesce(provenance[name], pc.if_else(
            entry, pa.scalar(found.params.get(name), pa.string()), pa.scalar(None, pa.string())))
    fields = {
        "line_no": pc.add(numbers, first_row + 1),
        "ts": pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), rows, [pa.py_buffer(ts_valid), pa.py_buffer(ts_data)],
                                    null_count=ts_nulls),
        "stream": pc.take(pa.array(STREAMS, pa.string()), codes),
        **provenance,
        "worker": pc.coalesce(provenance["container"], provenance["host"], provenance["unit"]),
        "cut": pc.equal(codes, -1),
    }
    return pa.StructArray.from_arrays(list(fields.values()), names=list(fields))


def _schema():
    import pyarrow as pa

    env = pa.struct([("line_no", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("stream", pa.string()),
                     ("host", pa.string()), ("unit", pa.string()), ("container", pa.string()), ("pid", pa.string()),
                     ("worker", pa.string()), ("cut", pa.bool_())])
    return tokenizer.schema().append(pa.field("env", env))
