"""logfmt through the compiled tokenizer (forensics.ingest.readers._logfmt), when it was built; the SQL path otherwise.

The C module reads a file's lines into the same text columns that queries/ingest.sql's stage_logfmt computes
with regexes (each canonical field's unquoted text, from the first of its keys present, in the same order),
on two threads with the GIL released. It also types what costs DuckDB most per line: the recipient's normal
form (forensics.addresses.normalize_address), the msg_id (SQL's mm_msg_id) and the common ISO timestamps with
a zone (others are NULL, typed by SQL's mm_ts in the session's zone). Its Arrow batches reach DuckDB as a
stream (one range of the file at a time, never the whole file in Python memory), where stage_logfmt_tokens
types them exactly as stage_logfmt does. Everything else (sampling the keys, repairing a dirty file, the cut-off last line) is shared. A gzipped
logfmt file is read the same way as it is decompressed (stage_gzipped), not from a plain copy made first. The
logfmt lines inside an envelope, taken off by DuckDB, are tokenized as DuckDB reads them (stage_lines).

MAILMORTEM_PARSER=sql forces the SQL path; =c refuses to run without the compiled one.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import mmap
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from forensics.errors import ConfigError
from forensics.ingest import gzstream, sources

try:
    from forensics.ingest.readers import _logfmt
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
        raise ConfigError(f"{ENV}=c but the compiled tokenizer (forensics.ingest.readers._logfmt) is not installed; "
                          "reinstall with a C compiler and Python's headers, or unset it")
    return value


def active() -> bool:
    """Whether logfmt files are read by the compiled tokenizer."""
    return _choice() != "sql" and _logfmt is not None


def describe() -> str:
    """Which logfmt parser is active, for `mailmortem --version`."""
    if active():
        return "C (forensics.ingest.readers._logfmt)"
    return "SQL (no compiled tokenizer)" if _logfmt is None else f"SQL ({ENV}=sql)"


def guard_shrinking_files() -> None:
    """Make a log that shrinks under a reader's memory map (rotated with copytruncate during the read) end the
    process with one line and exit 1 (the C module's SIGBUS handler) rather than a bare "Bus error" (a CLI's
    choice: it is process-wide). Nothing without the C module: the SQL path reads through DuckDB's own reader."""
    if _logfmt is not None:
        _logfmt.guard_shrinking_files()


def fits(keys: list[list[bytes]]) -> bool:
    """Whether the C module takes this many keys (a file with hundreds of spellings of one key does not)."""
    return (sum(map(len, keys)) <= _logfmt.MAX_KEYS
            and all(len(field) <= _logfmt.MAX_FIELD_KEYS for field in keys))


def columns() -> list[str]:
    from forensics.ingest.readers.sql import TEXT_COLUMN_NAMES

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
    tail: bytes = b""  # the last bytes tokenized (of a gzip stream: where a cut-off last line is found)
    broken: bool = False  # a gzip stream turned out damaged or truncated

    @property
    def mixed_endings(self) -> bool:
        return bool(self.flags & _logfmt.CRLF and self.flags & _logfmt.LONE)


def stage(con, path: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse a plain logfmt file into `staged`. False when its line endings mix CRLF with bare CR or LF, which
    the caller then reads through the SQL path. load._stage reads such a file from a copy with LF endings
    (sources.line_ended_copy), so this never happens there: the check keeps a mix from being split any other way."""
    seen = _Seen()
    _into_staged(con, staged, _file_batches(path, keys, seen, keep_raw), keep_raw)
    if seen.flags & _logfmt.DIRTY:
        raise DirtyFile("invalid utf-8 or line size over the limit")
    return not seen.mixed_endings


# sample_logfmt_keys reads the keys of a file's first lines (its LIMIT): the sample of a .gz holds as many.
SAMPLE_LINES = 20_000
SAMPLE_MOST = 64 * 2**20  # a sample that needs more bytes than this is read from a plain copy instead
SAMPLE_CHUNK = 2**20  # a plain file's head is read this much at a time until it holds the sample


@dataclass
class Streamed:
    cut_off: str | None  # the text of the last line when no newline ends it


def stage_gzipped(con, path: str, staged: str, keys_of: Callable[[str], list[list[bytes]] | None],
                  keep_raw: bool, folder: str | None) -> Streamed | None:
    """Parse a gzipped logfmt file into `staged` as it is decompressed: a chunk is tokenized while the next is
    decompressed (gzstream.gunzipped_chunks) and DuckDB types the one before. `keys_of` gives the keys from a
    plain file (in `folder`) holding the first lines, the sample the other paths read (None: not to be read
    this way). None when the caller must read a decompressed copy instead, which repairs, reads or refuses it
    by name: a damaged stream (`staged` then holds what came before the damage), a dirty file, mixed line
    endings, or a sample that cannot be read."""
    seen, chunks = _Seen(), gzstream.gunzipped_chunks(path)
    try:
        sample = _first_chunks(chunks)
        keys = sample and _sample_keys(sample, keys_of, folder)
        if not keys:
            return None
        spans = ((data, _start(data) if index == 0 else 0, end) for index, (data, end)
                 in enumerate(itertools.chain(sample, chunks)))
        _into_staged(con, staged, _unless_damaged(_tokenized(_tracking_tail(spans, seen), keys, seen, keep_raw),
                                                      seen), keep_raw)
    except sources.GZIP_ERRORS:
        return None
    finally:
        chunks.close()
    if seen.broken or seen.flags & _logfmt.DIRTY or seen.mixed_endings:
        return None
    return Streamed(sources.unfinished_text(seen.tail))


def _first_chunks(chunks: Iterator[tuple[bytes, int]]) -> list[tuple[bytes, int]] | None:
    """The first chunks: enough to hold SAMPLE_LINES line ends, or the whole file (None past SAMPLE_MOST)."""
    taken, ends, size = [], 0, 0
    while ends < SAMPLE_LINES and (chunk := next(chunks, None)):
        data, end = chunk
        taken.append(chunk)
        ends += max(data.count(b"\n", 0, end), data.count(b"\r", 0, end))  # LF or CRLF, or CR alone
        size += end
        if size > SAMPLE_MOST:
            return None
    return taken


def sampled_head(path: str, keys_of: Callable[[str], set[str]], folder: str | None) -> set[str] | None:
    """`keys_of` a plain file (in `folder`) holding a plain file's first SAMPLE_LINES lines, as the gzip path
    samples: DuckDB's reader asked for the first lines of the whole file cost a second at 1M lines. None when
    those lines need more than SAMPLE_MOST bytes (the caller samples the file itself)."""
    with open(path, "rb") as handle:
        sample = _first_chunks(iter(lambda: _read_chunk(handle), None))
        return None if sample is None else _sample_keys(sample, keys_of, folder)


def _read_chunk(handle) -> tuple[bytes, int] | None:
    data = handle.read(SAMPLE_CHUNK)
    return (data, len(data)) if data else None


def _sample_keys(sample: list[tuple[bytes, int]], keys_of, folder: str | None):
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-sample-", suffix=".log", dir=folder, delete=False)
    try:
        with handle:
            for data, end in sample:
                handle.write(memoryview(data)[:end])
        return keys_of(handle.name)
    finally:
        os.unlink(handle.name)


def _tracking_tail(spans: Iterator[tuple], seen: _Seen) -> Iterator[tuple]:
    for data, start, end in spans:
        seen.tail = bytes(memoryview(data)[max(0, end - sources.TAIL_BYTES):end])
        yield data, start, end


def _unless_damaged(batches: Iterator, seen: _Seen) -> Iterator:
    """The batches until the gzip stream under them turns out damaged (an error raised through DuckDB's
    reader would not keep its class)."""
    try:
        yield from batches
    except sources.GZIP_ERRORS:
        seen.broken = True


def _into_staged(con, staged: str, batches: Iterator, keep_raw: bool) -> None:
    import pyarrow as pa

    import queries

    name = f"{staged}_tokens"
    con.register(name, pa.RecordBatchReader.from_batches(schema(), batches))
    try:
        queries.script(con, "stage_logfmt_tokens", {"keep_raw": keep_raw}, staged=staged, tokens=name,
                       env="mm_no_envelope()")
    finally:
        con.unregister(name)


def _file_batches(path: str, keys: list[list[bytes]], seen: _Seen, keep_raw: bool) -> Iterator:
    """A plain file's Arrow batches, range by range (mapped_ranges)."""
    return _batches(mapped_ranges(path, _reader(keys, keep_raw)), seen)


def _tokenized(spans: Iterator[tuple], keys: list[list[bytes]], seen: _Seen, keep_raw: bool) -> Iterator:
    """The Arrow batches of each span (buffer, start, end) in turn, the next span tokenized (GIL released) while
    DuckDB types this one; stops at a dirty span or once line endings are mixed (the file is then read again:
    repaired, or by the SQL path). A line's text comes only where it may be kept (keep_raw, or a line that may
    be skipped): moving every line's text into DuckDB cost more than tokenizing it."""
    return _batches(read_ahead(spans, _reader(keys, keep_raw)), seen)


def _reader(keys: list[list[bytes]], keep_raw: bool) -> Callable:
    def read(buffer, start: int, end: int) -> list:
        return _logfmt.tokenize(buffer, start, end, keys, THREADS, keep_raw)
    return read


def _batches(results: Iterator[list], seen: _Seen) -> Iterator:
    for tokens in results:
        for rows, flags, problem, cols, ts in tokens:
            seen.flags |= flags
            if flags & _logfmt.DIRTY or seen.mixed_endings:  # either way the caller reads the file again
                return
            if rows:
                yield _batch(rows, problem, cols, ts)


def mapped_ranges(path: str, read: Callable[..., list]) -> Iterator[list]:
    """What a compiled reader makes of a plain file (the logfmt tokenizer's tokens, the JSON Lines reader's
    rows), range by range: `read(buffer, start, end)` of each range in turn (read_ahead), the file read once
    through a memory map whose pages are dropped after each range."""
    with sources.mapped(path) as mapped:
        if mapped is None:
            return
        yield from read_ahead(((mapped, *span) for span in _ranges(mapped)), read,
                              lambda span: sources.drop_pages(*span))


def read_ahead(spans: Iterator[tuple], read: Callable[..., list],
               done: Callable[[tuple], None] = lambda span: None) -> Iterator[list]:
    """`read(*span)` of each span in turn, the next span read (on a thread: the C readers release the GIL) while
    the caller takes this one's result; `done(span)` once the caller has taken it."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        def submitted(span: tuple) -> tuple:
            return span, pool.submit(read, *span)

        pending = collections.deque(map(submitted, itertools.islice(spans, 1)))
        while pending:
            pending.extend(map(submitted, itertools.islice(spans, 1)))
            span, result = pending.popleft()
            yield result.result()
            done(span)


def _start(data: bytes) -> int:
    """Where a file's first line starts: after its byte-order mark, if any."""
    return len(_BOM) if data[:len(_BOM)] == _BOM else 0


def _ranges(mapped: mmap.mmap) -> list[tuple[int, int]]:
    """The file cut into ranges of about RANGE_BYTES at line ends (after a leading byte-order mark)."""
    size, start = len(mapped), _start(mapped)
    spans = []
    while start < size:
        end = _range_end(mapped, start, size)
        spans.append((start, end))
        start = end
    return spans


def _range_end(mapped: mmap.mmap, start: int, size: int) -> int:
    """Just after the first \\n at or beyond start + RANGE_BYTES (a CRLF is never split), or the file's end."""
    return _line_end_after(mapped, start + RANGE_BYTES, size)


def _line_end_after(mapped: mmap.mmap, at: int, end: int) -> int:
    """Just after the first \\n of mapped[at:end], or `end` when it holds none (or `at` is past it)."""
    newline = mapped.find(b"\n", at, end)
    return end if newline < 0 else newline + 1


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


# --- the inner lines of an envelope ------------------------------------------------------------------


class LongLine(Exception):
    """An inner line over a compiled reader's limit (MAX_LINE): the SQL path reads the file."""


def stage_lines(con, lines: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse the inner lines of an envelope (`lines`: the view or table of `line` and `env` that
    queries/envelopes.sql's envelope_flat_lines, envelope_lines or envelope_joined_lines made) into `staged`, each row
    keeping its envelope. DuckDB hands the tokenizer each vector of lines as an Arrow array, through a function of this
    connection called from its own threads, and gets the columns back as a struct beside the line and its
    `env` (line_tokens): nothing leaves DuckDB but the lines, and the rows stay aligned. False when a line is
    over the tokenizer's limit: the caller reads the lines through the SQL path then."""
    import queries

    seen = _Seen()
    try:
        with line_tokens(con, lines, staged, lambda name: register_line_tokenizer(con, name, keys, seen)) as tokens:
            queries.script(con, "stage_logfmt_tokens", {"keep_raw": keep_raw}, staged=staged, tokens=tokens,
                           env="env")
    except Exception:
        if seen.flags & _logfmt.DIRTY:  # raised by LongLine, wrapped by DuckDB
            return False
        raise
    return True


@contextlib.contextmanager
def line_tokens(con, lines: str, staged: str, register: Callable[[str], None]) -> Iterator[str]:
    """The name of a view of `lines` as a compiled reader reads them (envelope_tokens), through the function
    `register(name)` puts on the connection; the view and the function are gone afterwards."""
    import queries

    names = {"tokenize": f"mm_tokenize_{staged}", "tokens": f"{staged}_tokens"}
    register(names["tokenize"])
    try:
        queries.run(con, "envelope_tokens", unwrapped=lines, **names)
        yield names["tokens"]
    finally:
        queries.run(con, "envelope_tokens_drop", tokens=names["tokens"])
        con.remove_function(names["tokenize"])


def register_line_tokenizer(con, name: str, keys: list[list[bytes]], seen: _Seen) -> None:
    """The function `name` of this connection that envelope_tokens calls: a VARCHAR line in, the tokenizer's
    columns (but the line) out, as a struct."""
    con.create_function(name, _lines_tokenized(keys, seen), [duck_types(con, schema())["line"]],
                        duck_struct(con, schema()), type="arrow", null_handling="special")


def _lines_tokenized(keys: list[list[bytes]], seen: _Seen) -> Callable:
    """The function DuckDB calls with a vector of inner lines: their columns (all but the line) as a struct."""
    import pyarrow as pa

    fields = list(schema())[1:]

    def tokens(lines):
        count, data, offsets = line_buffers(lines)
        rows, flags, problem, cols, ts = _logfmt.tokenize_lines(data, offsets, keys)
        seen.flags |= flags
        if rows < count:
            raise LongLine("an inner line longer than the tokenizer takes")
        return pa.StructArray.from_arrays(_batch(rows, problem, cols, ts).columns[1:], fields=fields)

    return tokens


def line_buffers(lines) -> tuple:
    """(count, data, offsets) of a vector of lines DuckDB hands a function (an Arrow array), as the compiled
    readers' lines entry points take them. A NULL line (a blank one) is read as an empty one: both are blank,
    and the line itself comes from DuckDB."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = lines.combine_chunks()
    if array.type != pa.string():
        array = array.cast(pa.string())
    if array.null_count:
        array = pc.fill_null(array, "")
    _valid, offsets, data = array.buffers()
    return len(array), data or b"", offsets.slice(array.offset * 4, (len(array) + 1) * 4)


def duck_types(con, arrow_schema) -> dict:
    """The DuckDB type of each column of a compiled reader's schema."""
    relation = con.from_arrow(arrow_schema.empty_table())
    return dict(zip(relation.columns, relation.types))


def duck_struct(con, arrow_schema):
    """A compiled reader's columns but the line, as the DuckDB struct its lines function returns."""
    import duckdb

    types = duck_types(con, arrow_schema)
    return duckdb.struct_type({name: types[name] for name in arrow_schema.names[1:]})
