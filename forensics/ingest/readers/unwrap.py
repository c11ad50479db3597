"""Line envelopes taken off in C (forensics.ingest.readers._unwrap): Docker json-file, CRI, `docker logs --timestamps`,
`docker compose logs`, CloudWatch's S3 export, syslog (RFC 3164, rsyslog's format, RFC 5424), journald JSON, the
application prefixes (Python logging, structlog, zap, slog, logrus), and the JSON platforms' files of one entry per
line (Loki, Cloud Logging, CloudWatch events, Datadog, Elasticsearch), their logfmt or JSON records read beside.

DuckDB takes every envelope off (queries/envelopes.sql); for the line formats of the container runtimes, syslog,
journald and the log platforms, which hold most of what responders are handed, that cost as much as reading the
records themselves. So when the compiled readers are built, a plain file of logfmt records, or of JSON ones (an
object per inner line), in one of them is read here instead: each range of the file (a memory map, as
tokenizer.stage reads a plain file) is unwrapped in C and its inner lines read by the logfmt tokenizer
(_logfmt.tokenize_lines) or by the JSON Lines reader (_jsonl.read_lines, which leaves the lines it is unsure of
to SQL, given their text), GIL released, two halves at a time; they reach stage_logfmt_tokens or
stage_jsonl_tokens as one Arrow stream with each line's envelope (`env`) built beside. The staged rows are the
ones the DuckDB path makes (tests hold them equal).

The C module reads the common case only: at the first line it cannot read exactly as envelopes.sql does (a piece
of a longer line, an unfinished one, a CR, invalid UTF-8, a JSON entry of another shape, JSON DuckDB reads more
leniently, a value it would render its own way, a prefix's JSON tail it cannot judge as json_valid does, ...:
see forensics/ingest/readers/_unwrap.c) the file goes back to the DuckDB path, as it does for records both logfmt and JSON, a
byte-order mark, a sample of keys the first range cannot hold, keys the compiled readers do not take, or a JSON
platform's document (found.document: an array or pages of entries).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import queries
from forensics.ingest import sources
from forensics.ingest.readers import jsonl as jsontokenizer, logfmt as tokenizer
from forensics.ingest.envelopes import INNER_SAMPLE_LINES, Found, Unwrapped, inner_sample

try:
    from forensics.ingest.readers import _unwrap
except ImportError:  # built without a C compiler: DuckDB takes every envelope off
    _unwrap = None

KINDS = {"docker-json": "DOCKER", "cri": "CRI", "docker-logs": "TIMESTAMPED", "cloudwatch-export": "TIMESTAMPED",
         "syslog": "SYSLOG", "rsyslog": "RSYSLOG", "journald": "JOURNALD", "python-logging": "PYTHON_LOGGING",
         "structlog": "STRUCTLOG", "zap": "ZAP", "slog": "SLOG", "logrus": "SLOG", "rfc5424": "RFC5424",
         "loki": "LOKI", "cloud-logging": "CLOUD_LOGGING", "cloudwatch": "CLOUDWATCH", "datadog": "DATADOG",
         "elastic": "ELASTIC", "compose": "COMPOSE"}
# what the file's path names (envelopes.file_params) where the line names none, by envelope: as
# queries/envelopes.sql, coalesce(the line's, :param) for an entry
FROM_PATH = {"docker-json": ("container",), "cri": ("container", "unit"), "docker-logs": ("container",),
             "cloudwatch-export": ("container",), "cloudwatch": ("container",)}
HEAD_BYTES = 2 * 2**20  # the first head of the first range read for the samples (_head)
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
    """Whether the line envelopes of KINDS are taken off here (with the compiled tokenizer, which reads them; JSON
    records need the compiled JSON Lines reader too)."""
    return _unwrap is not None and tokenizer.active()


def describe() -> str:
    """What takes the line envelopes of KINDS off, for `mailmortem --version`."""
    if active():
        return "C (forensics.ingest.readers._unwrap)"
    return "DuckDB (no compiled unwrapper)" if _unwrap is None else "DuckDB (with the SQL parser)"


def takes(found: Found, syntax: str | None) -> bool:
    """Whether this file may be read here: a line format the C module reads, records that may be logfmt or JSON,
    and times without a zone (RFC 3164's) read in UTC (another --tz is DuckDB's)."""
    zone_less = found.envelope.zone_less and found.params.get("tz", "UTC") != "UTC"
    return (active() and found.name in KINDS and not found.document and syntax in (None, "logfmt", "jsonl")
            and not zone_less)


@dataclass(frozen=True)
class Plans:
    """What load reads the inner lines with, from the first range's (`table`: their line and env): the logfmt
    tokenizer's keys (`logfmt(table, head)`, head the sample's text), or the JSON Lines reader's Plan with
    stage_jsonl_tokens' params and picks (`jsonl(table)`); None where the compiled reader does not take them."""

    logfmt: Callable[[str, bytes], list | None]
    jsonl: Callable[[str], tuple | None]


def stage(con, found: Found, path: str, staged: str, syntax: str | None, plans: Plans, keep_raw: bool
          ) -> Unwrapped | None:
    """Take the envelope off `path` and read its logfmt or JSON records into `staged`, as envelopes.stage would,
    with the readers `plans` gives. None when the file is for the DuckDB path (nothing is left in `staged` then)."""
    with sources.mapped(path) as mapped:
        if mapped is None or mapped[:3] == b"\xef\xbb\xbf":
            return None
        return _staged(con, found, mapped, staged, syntax, plans, keep_raw)


def _staged(con, found, mapped, staged, syntax, plans: Plans, keep_raw) -> Unwrapped | None:
    ranges = tokenizer._ranges(mapped)
    kind = getattr(_unwrap, KINDS[found.name])
    head = _head(con, found, mapped, ranges, kind, f"{staged}_head", syntax, plans, keep_raw)
    if head is None:
        return None
    sample, inner, reader = head
    if reader is None:
        return None  # records of both syntaxes (envelope_mixed_staged), or keys the compiled reader does not take
    read = _Read()
    try:
        _into_staged(con, mapped, ranges, kind, staged, reader, read)
    except Exception:
        if not read.deferred:
            raise
        queries.run(con, "drop_staged", staged=staged)
        return None
    return Unwrapped(inner[0], read.rows, sample)


def _head(con, found, mapped, ranges, kind, table, syntax, plans: Plans, keep_raw):
    """(sample, inner syntaxes, reader) from the samples of the first range's head (None: deferred, or a first range
    too short to hold the sample of keys DuckDB's path takes). The head grows until it holds the samples (the first
    SAMPLE_LINES inner lines, INNER_SAMPLE_LINES of them not blank) or is the whole range, which _batches unwraps
    again: unwrapping all of its 32 MB for them cost a fifteenth of a 1M-line file's unwrapping, more than half of
    a 100,000-line one's. The C module reads each line on its own, so a head's rows are the range's first rows."""
    (start, end), size = ranges[0], HEAD_BYTES
    while True:
        stop = tokenizer._line_end_after(mapped, start + size, end)
        first = _unwrapped(mapped, start, stop, kind, found)
        if first is None:
            return None
        con.register(table, _head_table(first, found))
        try:
            sample, inner = inner_sample(con, table, syntax)
            if stop == end or (first[0] >= tokenizer.SAMPLE_LINES and len(sample) >= INNER_SAMPLE_LINES):
                if first[0] < tokenizer.SAMPLE_LINES and len(ranges) > 1:
                    return None
                return sample, inner, _reader(inner, plans, table, sample, keep_raw, found)
        finally:
            con.unregister(table)
        # a head the samples may reach past: one long enough for SAMPLE_LINES at its density, with a margin
        size = max(2 * size, size * tokenizer.SAMPLE_LINES * 5 // (4 * max(first[0], 1)))


def _reader(inner: list[str], plans: Plans, head_table: str, sample: list[str], keep_raw: bool, found: Found):
    """The reading of the inner lines (_Logfmt or _Jsonl), or None for the DuckDB path."""
    if inner == ["logfmt"]:
        keys = plans.logfmt(head_table, "\n".join(sample).encode())
        return None if keys is None else _Logfmt(keys, keep_raw, found)
    if inner == ["jsonl"]:
        planned = plans.jsonl(head_table)
        return None if planned is None else _Jsonl(*planned, found)
    return None


def _unwrapped(buffer, start: int, end: int, kind: int, found: Found):
    """The C module's reading of one span, or None where it defers."""
    params = found.params
    result = _unwrap.unwrap(buffer, start, end, kind, params.get("year") or 0, params.get("last_month") or 12)
    return None if result[1] & _unwrap.DEFER else result


def _head_table(first, found: Found):
    """The first range's inner lines as envelope_flat_lines has them (line, env), for the samples."""
    import pyarrow as pa

    rows, _flags, cols, what, ts = first
    lines = _text_array(rows, cols[0])
    env = _env(rows, cols, what, ts, found)
    return pa.table({"line": _as_duckdb_line(lines, what), "env": env})


def _into_staged(con, mapped, ranges, kind, staged, reader, read: _Read) -> None:
    import pyarrow as pa

    name = f"{staged}_tokens"
    con.register(name, pa.RecordBatchReader.from_batches(reader.schema, _batches(mapped, ranges, kind, reader,
                                                                                   read)))
    try:
        reader.stage(con, staged, name)
    finally:
        con.unregister(name)


def _batches(mapped, ranges, kind, reader, read: _Read) -> Iterator:
    """Each half range's batch in file order: the next range unwrapped and read on two threads (GIL released)
    while DuckDB types this one."""
    with ThreadPoolExecutor(2) as pool:
        def submitted(span):
            start, end = span
            middle = tokenizer._line_end_after(mapped, (start + end) // 2, end)  # the first line end past the middle
            return [pool.submit(_inner_read, reader, mapped, a, b, kind) for a, b in ((start, middle), (middle, end))
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
                yield reader.batch(rows, parts)
                read.rows += rows
            sources.drop_pages(mapped, *ranges[index])


def _inner_read(reader, mapped, start: int, end: int, kind: int) -> tuple[int, tuple]:
    """A span unwrapped, and its inner lines read by `reader`: (rows, (unwrapped, what the reader made))."""
    unwrapped = _unwrapped(mapped, start, end, kind, reader.found)
    if unwrapped is None:
        raise _Deferred
    _valid, offsets, data, _nulls = unwrapped[2][0]
    return unwrapped[0], (unwrapped, reader.read(unwrapped[0], data, offsets))


class _Logfmt:
    """logfmt records: tokenized (_logfmt.tokenize_lines) into stage_logfmt_tokens."""

    def __init__(self, keys: list[list[bytes]], keep_raw: bool, found: Found) -> None:
        self.keys, self.keep_raw, self.found = keys, keep_raw, found
        self.schema = _with_env(tokenizer.schema())  # the stream's, built once (every batch is of it)

    def read(self, rows: int, data, offsets) -> tuple:
        from forensics.ingest.readers import _logfmt

        tokens = _logfmt.tokenize_lines(data, offsets, self.keys)
        if tokens[0] < rows or tokens[1] & _logfmt.DIRTY:
            raise _Deferred  # an inner line over the tokenizer's limit
        return tokens

    def batch(self, rows: int, parts):
        """The tokens of a half range with the line and its `env`, in tokenizer.schema()'s order."""
        unwrapped, (_n, _tflags, problem, cols, tts) = parts
        tokens = tokenizer._batch(rows, problem, cols, tts)
        line = _text_array(rows, unwrapped[2][0]) if self.keep_raw else tokens.column(0)
        return _enveloped(self.schema, unwrapped, line, tokens.columns[1:], self.found)

    def stage(self, con, staged: str, tokens: str) -> None:
        queries.script(con, "stage_logfmt_tokens", {"keep_raw": self.keep_raw}, staged=staged, tokens=tokens,
                       env="env")


class _Jsonl:
    """JSON records: read by the JSON Lines reader (_jsonl.read_lines) into stage_jsonl_tokens, with the Plan,
    params and picks _parse_jsonl gives DuckDB's path. Every line's text comes along: SQL reads the lines the
    reader leaves to it (and keeps a skip's) from it, as from DuckDB's line on that path."""

    def __init__(self, plan: jsontokenizer.Plan, params: dict, picks: list, found: Found) -> None:
        self.plan, self.params, self.picks, self.found = plan, params, picks, found
        self.schema = _with_env(jsontokenizer.schema())

    def read(self, rows: int, data, offsets) -> tuple:
        from forensics.ingest.readers import _jsonl

        plan = self.plan
        result = _jsonl.read_lines(data, offsets, plan.paths, plan.always, plan.fields, plan.rare)
        if result[0] < rows:
            raise _Deferred  # an inner line over the reader's limit (DuckDB's path then reads them by SQL)
        return result

    def batch(self, rows: int, parts):
        """The reader's columns of a half range with the line and its `env`, in jsontokenizer.schema()'s order."""
        unwrapped, (_n, _seen, codes, cols, jts) = parts
        read = jsontokenizer._batch(rows, codes, cols, jts)
        return _enveloped(self.schema, unwrapped, _text_array(rows, unwrapped[2][0]), read.columns[1:], self.found)

    def stage(self, con, staged: str, tokens: str) -> None:
        queries.script(con, "stage_jsonl_tokens", self.params, staged=staged, tokens=tokens, picks=self.picks,
                       env="env")


def _enveloped(schema, unwrapped, line, columns: list, found: Found):
    """A batch of `schema`: the inner line as the DuckDB path has it, a reader's `columns`, and each line's env
    (`unwrapped`: the C module's reading of the half range)."""
    import pyarrow as pa

    rows, _flags, cols, what, ts = unwrapped
    arrays = [_as_duckdb_line(line, what), *columns, _env(rows, cols, what, ts, found)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


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


def _env(rows: int, cols, what, ts, found: Found):
    """envelope_flat_lines' `env` of each line: for an entry its time, stream, and the host, unit, container and
    pid its line names, else (FROM_PATH) the file's path does; nothing for a line that is no entry. Its number
    (line_no) is left NULL: each row is one line of the file, numbered by its staged row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codes = _codes(what, rows)
    entry = pc.not_equal(codes, 0)
    ts_valid, ts_data, ts_nulls = ts
    provenance = dict(zip(PROVENANCE, (_text_array(rows, column) for column in cols[1:])))
    for name in FROM_PATH.get(found.name, ()):
        provenance[name] = pc.coalesce(provenance[name], pc.if_else(
            entry, pa.scalar(found.params.get(name), pa.string()), pa.scalar(None, pa.string())))
    fields = {
        "line_no": pa.nulls(rows, pa.int64()),
        "ts": pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), rows, [pa.py_buffer(ts_valid), pa.py_buffer(ts_data)],
                                    null_count=ts_nulls),
        "stream": pc.take(pa.array(STREAMS, pa.string()), codes),
        **provenance,
        "cut": pc.equal(codes, -1),
    }
    return pa.StructArray.from_arrays(list(fields.values()), names=list(fields))


def _with_env(schema):
    """A compiled reader's schema with the lines' `env` after its columns."""
    import pyarrow as pa

    env = pa.struct([("line_no", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("stream", pa.string()),
                     ("host", pa.string()), ("unit", pa.string()), ("container", pa.string()), ("pid", pa.string()),
                     ("cut", pa.bool_())])
    return schema.append(pa.field("env", env))
