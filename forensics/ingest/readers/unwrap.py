"""Line envelopes taken off in C (forensics.ingest.readers._unwrap): Docker json-file, CRI, `docker logs --timestamps`,
`docker compose logs`, CloudWatch's S3 export, syslog (RFC 3164, rsyslog's format, RFC 5424), journald JSON, the
application prefixes (Python logging, structlog, zap, slog, logrus), and the JSON platforms' files of one entry per
line (Loki, Cloud Logging, CloudWatch events, Datadog, Elasticsearch), their logfmt or JSON records read beside.

DuckDB takes every envelope off (queries/envelopes.sql); for the line formats of the container runtimes, syslog,
journald and the log platforms, which hold most of what responders are handed, that cost as much as reading the
records themselves. So when the compiled readers are built, a plain file of logfmt records, or of JSON ones (an
object per inner line), in one of them is read here instead: each range of the file (a memory map, as
logfmt.stage_file reads a plain file) is unwrapped in C and its inner lines read by the logfmt tokenizer
(_logfmt.tokenize_lines) or by the JSON Lines reader (_jsonl.read_lines, which leaves the lines it is unsure of
to SQL, given their text), GIL released, two halves at a time; they reach stage_logfmt_tokens or
stage_jsonl_tokens as one Arrow stream with each line's envelope (`env`) built beside. The staged rows are the
ones the DuckDB path makes (tests hold them equal).

The C module reads the common case only: at the first line it cannot read exactly as envelopes.sql does (a piece
of a longer line, an unfinished one, a CR, invalid UTF-8, a JSON entry of another shape, JSON DuckDB reads more
leniently, a value it would render its own way, a prefix's JSON tail it cannot judge as json_valid does, ...:
see _unwrap.c) the file goes back to the DuckDB path, as it does for records both logfmt and JSON, a
byte-order mark, a sample of keys the first range cannot hold, keys the compiled readers do not take, or a JSON
platform's document (found.document: an array or pages of entries).
"""

from __future__ import annotations

from collections.abc import Iterator

import queries
from forensics.ingest import envelope_table
from forensics.ingest.envelopes import INNER_SAMPLE_LINES, Found, Unwrapped, inner_sample
from forensics.ingest.fields import FieldMap
from forensics.ingest.readers import jsonl, logfmt, runtime, sql
from forensics.ingest.sources import Source

_unwrap = runtime.BUILT["unwrap"]

# The envelopes taken off here, by the C reader of each (forensics.ingest.envelope_table), and what the file's path
# names where their line names none.
KINDS = {e.name: e.c_reader for e in envelope_table.TABLE if e.c_reader}
FROM_PATH = {e.name: e.from_path for e in envelope_table.TABLE if e.from_path}
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


def takes(found: Found, syntax: str | None) -> bool:
    """Whether this file may be read here: a line format the C module reads, records that may be logfmt or JSON,
    and times without a zone (RFC 3164's) read in UTC (another --tz is DuckDB's)."""
    zone_less = found.envelope.zone_less and found.params.get("tz", "UTC") != "UTC"
    return (runtime.compiled("unwrap") and found.name in KINDS and not found.document
            and syntax in (None, "logfmt", "jsonl") and not zone_less)


def read(con, source: Source, staged: str, found: Found, field_map: FieldMap, *, syntax: str | None,
         keep_raw: bool) -> Unwrapped | None:
    """Take the envelope `found` off the file and read its logfmt or JSON records into `staged`, as envelopes.stage
    would, with the keys or the plan the DuckDB path would read its inner lines with (`syntax`: --syntax). None when
    the file is for the DuckDB path (nothing is left in `staged` then)."""
    if not (isinstance(source.path, str) and takes(found, syntax)):
        return None
    return stage(con, found, source.path, staged, syntax, inner_reading=_Inner(con, source.label, field_map, keep_raw,
                                                                             found))


def stage(con, found: Found, path: str, staged: str, syntax: str | None, *, inner_reading: _Inner
          ) -> Unwrapped | None:
    """The file at `path` unwrapped and its records read (read: once it is known to be for this reader)."""
    with runtime.mapped(path) as mapped:
        if mapped is None or mapped[:3] == runtime.BOM:
            return None
        return _staged(con, found, mapped, staged, syntax=syntax, inner_reading=inner_reading)


class _Inner:
    """How the inner lines are read, from the first range's (`table`: their line and env): the logfmt tokenizer's
    keys, or the JSON Lines reader's Plan with stage_jsonl_tokens' params and picks; None where the compiled reader
    does not take them."""

    def __init__(self, con, label: str, field_map: FieldMap, keep_raw: bool, found: Found) -> None:
        self.con, self.label, self.field_map, self.keep_raw, self.found = con, label, field_map, keep_raw, found

    def reader(self, inner: list[str], table: str, sample: list[str]):
        """The reading of the inner lines (_Logfmt or _Jsonl), or None for the DuckDB path."""
        lines = Source(table, self.label, False)
        if inner == ["logfmt"]:
            sampled = sql.sampled_keys(self.con, lines, "\n".join(sample).encode(), "mm_unwrapped")
            keys = sql.tokenizer_keys(sampled, self.field_map)
            return _Logfmt(keys, self.keep_raw, self.found) if logfmt.fits(keys) else None
        if inner == ["jsonl"] and runtime.compiled("jsonl"):
            keys, rare, params = sql.jsonl_keys(self.con, lines, self.field_map, self.keep_raw, "mm_unwrapped")
            planned = jsonl.plan_and_picks(keys, rare, self.field_map)
            return None if planned is None else _Jsonl(planned[0], params, planned[1], self.found)
        return None


def _staged(con, found: Found, mapped, staged: str, *, syntax: str | None, inner_reading: _Inner) -> Unwrapped | None:
    ranges = runtime.ranges(mapped)
    kind = envelope_table.c_kind(found.name)
    head = _head(con, found, mapped, ranges, kind, table=f"{staged}_head", syntax=syntax, inner_reading=inner_reading)
    if head is None:
        return None
    sample, inner, reader = head
    if reader is None:
        return None  # records of both syntaxes (envelope_mixed_staged), or keys the compiled reader does not take
    read = _Read()
    try:
        _into_staged(con, staged, reader, _batches(mapped, ranges, kind, reader, read))
    except Exception:
        if not read.deferred:
            raise
        queries.run(con, "drop_staged", staged=staged)
        return None
    return Unwrapped(inner[0], read.rows, sample)


def _head(con, found: Found, mapped, ranges, kind: int, *, table: str, syntax: str | None, inner_reading: _Inner):
    """(sample, inner syntaxes, reader) from the samples of the first range's head (None: deferred, or a first range
    too short to hold the sample of keys DuckDB's path takes). The head grows until it holds the samples (the first
    SAMPLE_LINES inner lines, INNER_SAMPLE_LINES of them not blank) or is the whole range, which _batches unwraps
    again: unwrapping all of its 32 MB for them cost a fifteenth of a 1M-line file's unwrapping, more than half of
    a 100,000-line one's. The C module reads each line on its own, so a head's rows are the range's first rows."""
    (start, end), size = ranges[0], HEAD_BYTES
    while True:
        stop = runtime.line_end_after(mapped, start + size, end)
        first = _unwrapped(mapped, start, stop, kind, found)
        if first is None:
            return None
        con.register(table, _head_table(first, found))
        try:
            sample, inner = inner_sample(con, table, syntax)
            if stop == end or (first[0] >= sql.SAMPLE_LINES and len(sample) >= INNER_SAMPLE_LINES):
                if first[0] < sql.SAMPLE_LINES and len(ranges) > 1:
                    return None
                return sample, inner, inner_reading.reader(inner, table, sample)
        finally:
            con.unregister(table)
        # a head the samples may reach past: one long enough for SAMPLE_LINES at its density, with a margin
        size = max(2 * size, size * sql.SAMPLE_LINES * 5 // (4 * max(first[0], 1)))


def _unwrapped(buffer, start: int, end: int, kind: int, found: Found):
    """The C module's reading of one span, or None where it defers."""
    params = found.params
    result = _unwrap.unwrap(buffer, start, end, kind, params.get("year") or 0, params.get("last_month") or 12)
    return None if result[1] & _unwrap.DEFER else result


def _head_table(first, found: Found):
    """The first range's inner lines as envelope_flat_lines has them (line, env), for the samples."""
    import pyarrow as pa

    rows, _flags, cols, what, ts = first
    lines = runtime.text_array(rows, cols[0])
    env = _env(rows, cols, what, ts, found)
    return pa.table({"line": _as_duckdb_line(lines, what), "env": env})


def _into_staged(con, staged: str, reader, batches: Iterator) -> None:
    runtime.into_staged(con, staged, reader.schema, batches, script=reader.script, params=reader.params,
                        **reader.names)


def _batches(mapped, ranges, kind, reader, read: _Read) -> Iterator:
    """Each half range's batch in file order: the next range's halves unwrapped and read on two threads (GIL
    released) while DuckDB types this one."""
    spans = ((reader, mapped, *half, kind) for start, end in ranges for half in runtime.halves(mapped, start, end))
    results = runtime.read_ahead(spans, _inner_read, lambda span: runtime.drop_pages(mapped, *span[2:4]), ahead=2)
    while True:
        try:
            rows, parts = next(results)
        except StopIteration:
            return
        except _Deferred:
            read.deferred = True
            raise
        yield reader.batch(rows, parts)
        read.rows += rows


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
        self.schema = _with_env(runtime.schema())  # the stream's, built once (every batch is of it)
        self.script, self.params, self.names = "stage_logfmt_tokens", {"keep_raw": keep_raw}, {"env": "env"}

    def read(self, rows: int, data, offsets) -> tuple:
        tokens = logfmt._logfmt.tokenize_lines(data, offsets, self.keys)
        if tokens[0] < rows or tokens[1] & logfmt._logfmt.DIRTY:
            raise _Deferred  # an inner line over the tokenizer's limit
        return tokens

    def batch(self, rows: int, parts):
        """The tokens of a half range with the line and its `env`, in runtime.schema()'s order."""
        unwrapped, (_n, _tflags, problem, cols, tts) = parts
        tokens = runtime.batch(rows, problem, cols, tts)
        line = runtime.text_array(rows, unwrapped[2][0]) if self.keep_raw else tokens.column(0)
        return _enveloped(self.schema, unwrapped, line, tokens.columns[1:], self.found)


class _Jsonl:
    """JSON records: read by the JSON Lines reader (_jsonl.read_lines) into stage_jsonl_tokens, with the Plan,
    params and picks jsonl.read gives DuckDB's path. Every line's text comes along: SQL reads the lines the
    reader leaves to it (and keeps a skip's) from it, as from DuckDB's line on that path."""

    def __init__(self, plan: jsonl.Plan, params: dict, picks: list, found: Found) -> None:
        self.plan, self.params, self.found = plan, params, found
        self.schema = _with_env(runtime.schema())
        self.script, self.names = "stage_jsonl_tokens", {"picks": picks, "env": "env"}

    def read(self, rows: int, data, offsets) -> tuple:
        plan = self.plan
        result = jsonl._jsonl.read_lines(data, offsets, plan.paths, plan.always, plan.fields, plan.rare)
        if result[0] < rows:
            raise _Deferred  # an inner line over the reader's limit (DuckDB's path then reads them by SQL)
        return result

    def batch(self, rows: int, parts):
        """The reader's columns of a half range with the line and its `env`, in runtime.schema()'s order."""
        unwrapped, (_n, _seen, codes, cols, jts) = parts
        read = runtime.batch(rows, codes, cols, jts)
        return _enveloped(self.schema, unwrapped, runtime.text_array(rows, unwrapped[2][0]), read.columns[1:],
                          self.found)


def _enveloped(schema, unwrapped, line, columns: list, found: Found):
    """A batch of `schema`: the inner line as the DuckDB path has it, a reader's `columns`, and each line's env
    (`unwrapped`: the C module's reading of the half range)."""
    import pyarrow as pa

    rows, _flags, cols, what, ts = unwrapped
    arrays = [_as_duckdb_line(line, what), *columns, _env(rows, cols, what, ts, found)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


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
    provenance = dict(zip(PROVENANCE, (runtime.text_array(rows, column) for column in cols[1:])))
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
