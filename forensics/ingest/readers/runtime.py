"""What the readers share: the one switch between the compiled readers and the SQL path, a file cut into ranges at
line ends (and a range into halves for two threads), the ranges read ahead through a memory map, the compiled
readers' buffers as Arrow batches, and those batches handed to DuckDB.

MAILMORTEM_PARSER=sql forces the SQL path; =c refuses to run without the compiled readers (compiled).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import itertools
import mmap
import os
from collections.abc import Callable, Iterator

from forensics.errors import ConfigError
from forensics.ingest import envelope_table
from forensics.ingest.fields import CANONICAL


def _built(name: str, table: tuple):
    """The compiled module, told the table it reads by (the canonical fields, or the envelopes' readers); None when
    it was not built, or was built for another table (its configure raises ImportError then)."""
    try:
        module = importlib.import_module(f"forensics.ingest.readers.{name}")
        module.configure(table)
    except ImportError:  # built without a C compiler (or for another table): the SQL path reads these files
        return None
    return module


# The compiled readers this install holds (None: not built), by reader.
BUILT = {"logfmt": _built("_logfmt", CANONICAL), "jsonl": _built("_jsonl", CANONICAL),
         "unwrap": _built("_unwrap", envelope_table.C_KINDS)}

ENV = "MAILMORTEM_PARSER"

# A range of the file per call (split between two threads): each batch is a few MB of Arrow buffers.
RANGE_BYTES = 32 * 2**20
THREADS = 2
BOM = b"\xef\xbb\xbf"
PROBLEM_COLUMN = "problem_code"
# Typed by the C module (queries/ingest.sql's typed_columns takes them where they are not NULL).
TYPED_TEXT_COLUMNS, TS_COLUMN = ("recipient_typed", "msg_id_typed"), "ts_typed"
# Each canonical field's text column, in forensics.ingest.fields.CANONICAL's order.
_RENAMED = {"ts": "ts_text", "event": "event_text", "recipient": "recipient_text", "msg_id": "msg_id_text",
            "lease": "lease_text", "attempt": "attempt_text", "count": "count_text"}


def _text_columns() -> tuple[tuple[str, str], ...]:
    return tuple((canon, _RENAMED.get(canon, canon)) for canon in CANONICAL)


TEXT_COLUMNS = _text_columns()
TEXT_COLUMN_NAMES = tuple(column for _canon, column in TEXT_COLUMNS)


def _choice() -> str:
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in ("auto", "c", "sql"):
        raise ConfigError(f"{ENV}={os.environ[ENV]!r}: expected c, sql or auto (unset)")
    if value == "c" and BUILT["logfmt"] is None:
        raise ConfigError(f"{ENV}=c but the compiled tokenizer (forensics.ingest.readers._logfmt) is not installed; "
                          "reinstall with a C compiler and Python's headers, or unset it")
    return value


def compiled(reader: str) -> bool:
    """Whether `reader` (logfmt, jsonl or unwrap) reads in C rather than by the SQL path: the one place that decides.
    The unwrapper takes line envelopes off only beside the compiled tokenizer (which reads their records)."""
    choice = _choice()
    if choice == "sql":
        return False
    if reader == "jsonl" and BUILT["jsonl"] is None and choice == "c":
        raise ConfigError(f"{ENV}=c but the compiled JSON Lines reader (forensics.ingest.readers._jsonl) is not "
                          "installed; reinstall with a C compiler and Python's headers, or unset it")
    if reader == "unwrap" and BUILT["logfmt"] is None:
        return False
    return BUILT.get(reader) is not None  # csv has no compiled reader: always the SQL path


def describe(reader: str) -> str:
    """What reads with `reader`'s part, for `mailmortem --version`."""
    if compiled(reader):
        return f"C (forensics.ingest.readers._{reader})"
    if reader == "unwrap":
        return "DuckDB (no compiled unwrapper)" if BUILT["unwrap"] is None else "DuckDB (with the SQL parser)"
    what = {"logfmt": "tokenizer", "jsonl": "reader"}[reader]
    return f"SQL (no compiled {what})" if BUILT[reader] is None else f"SQL ({ENV}=sql)"


def guard_shrinking_files() -> None:
    """Make a log that shrinks under a reader's memory map (rotated with copytruncate during the read) end the
    process with one line and exit 1 (the C module's SIGBUS handler) rather than a bare "Bus error" (a CLI's
    choice: it is process-wide). Nothing without the C module: the SQL path reads through DuckDB's own reader."""
    if BUILT["logfmt"] is not None:
        BUILT["logfmt"].guard_shrinking_files()


class DirtyFile(Exception):
    """Invalid UTF-8 or an overlong line: load._stage repairs the file, as after DuckDB's reader refuses it."""


class LongLine(Exception):
    """An inner line over a compiled reader's limit (MAX_LINE): the SQL path reads the file."""


def columns() -> list[str]:
    """The columns of a compiled reader's batches (the logfmt tokenizer's and the JSON Lines reader's alike)."""
    return ["line", *TEXT_COLUMN_NAMES, *TYPED_TEXT_COLUMNS, PROBLEM_COLUMN, TS_COLUMN]


@functools.cache
def schema():
    import pyarrow as pa

    types = {PROBLEM_COLUMN: pa.int8(), TS_COLUMN: pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, types.get(name, pa.string())) for name in columns()])


# --- a file cut at line ends -----------------------------------------------------------------------------


def start_of(data) -> int:
    """Where a file's first line starts: after its byte-order mark, if any."""
    return len(BOM) if data[:len(BOM)] == BOM else 0


def ranges(mapped: mmap.mmap) -> list[tuple[int, int]]:
    """The file cut into ranges of about RANGE_BYTES at line ends (after a leading byte-order mark)."""
    size, start = len(mapped), start_of(mapped)
    spans = []
    while start < size:
        end = line_end_after(mapped, start + RANGE_BYTES, size)  # a CRLF is never split
        spans.append((start, end))
        start = end
    return spans


def halves(mapped: mmap.mmap, start: int, end: int) -> list[tuple[int, int]]:
    """A range cut in two at the first line end past its middle, for two threads (an empty half left out)."""
    middle = line_end_after(mapped, (start + end) // 2, end)
    return [(a, b) for a, b in ((start, middle), (middle, end)) if a < b]


def line_end_after(mapped: mmap.mmap, at: int, end: int) -> int:
    """Just after the first \\n of mapped[at:end], or `end` when it holds none (or `at` is past it)."""
    newline = mapped.find(b"\n", at, end)
    return end if newline < 0 else newline + 1


@contextlib.contextmanager
def mapped(path: str) -> Iterator[mmap.mmap | None]:
    """The file at `path` mapped read-only for the compiled readers and the line-ending check (None when it is
    empty: an empty file cannot be mapped)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            yield None
            return
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as whole:
            yield whole


def drop_pages(whole: mmap.mmap, start: int, end: int) -> None:
    """Give back the pages of whole[start:end] once they are read: a file is read once, and the pages of a file
    mapped whole would all count in the process's peak RSS (a 3.5 GB log, 3.5 GB)."""
    aligned = start - start % mmap.PAGESIZE
    whole.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)


def chunks(path: str, size: int) -> Iterator[tuple[mmap.mmap | bytes, int, int]]:
    """The file at `path` in ranges (buffer, start, end) of about `size` bytes that never end between a CR and its
    LF: mapped, each range's pages given back once the caller is done with it (drop_pages); read instead where nothing
    handles SIGBUS (shrink_guarded), as a file that shrinks under its map would kill the process, and then each range
    is (bytes, 0, its length) and a file that shrinks while it is read just ends early (sources.inspect says so)."""
    if not shrink_guarded():
        with open(path, "rb") as handle:
            while chunk := handle.read(size):
                if chunk.endswith(b"\r"):
                    chunk += handle.read(1)
                yield chunk, 0, len(chunk)
        return
    with mapped(path) as whole:
        if whole is None:
            return
        start = 0
        while start < len(whole):
            end = min(start + size, len(whole))
            if whole[end - 1:end] == b"\r":
                end = min(end + 1, len(whole))
            yield whole, start, end
            drop_pages(whole, start, end)
            start = end


def shrink_guarded() -> bool:
    """Whether the compiled tokenizer's SIGBUS handler is installed (guard_shrinking_files, which the CLI calls).
    Without it, the first page of a map past a shrunken file's end kills the process with a bare "Bus error". Asked
    of the C module: Python's signal.getsignal answers from its own table, filled when the interpreter started, and
    said SIG_DFL under the handler, so every file's line ends had been read whole instead of mapped."""
    try:
        from forensics.ingest.readers import _logfmt
    except ImportError:
        return False
    return _logfmt.shrink_guarded()


def mapped_ranges(path: str, read: Callable[..., list]) -> Iterator[list]:
    """What a compiled reader makes of a plain file (the logfmt tokenizer's tokens, the JSON Lines reader's
    rows), range by range: `read(buffer, start, end)` of each range in turn (read_ahead), the file read once
    through a memory map whose pages are dropped after each range."""
    with mapped(path) as whole:
        if whole is None:
            return
        yield from read_ahead(((whole, *span) for span in ranges(whole)), read, lambda span: drop_pages(*span))


def read_ahead(spans: Iterator[tuple], read: Callable[..., list],
               done: Callable[[tuple], None] = lambda span: None, ahead: int = 1) -> Iterator:
    """`read(*span)` of each span in turn, the next `ahead` spans read (on as many threads: the C readers release
    the GIL) while the caller takes this one's result; `done(span)` once the caller has taken it."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(ahead) as pool:
        def submitted(span: tuple) -> tuple:
            return span, pool.submit(read, *span)

        pending = collections.deque(map(submitted, itertools.islice(spans, ahead)))
        while pending:
            pending.extend(map(submitted, itertools.islice(spans, 1)))
            span, result = pending.popleft()
            yield result.result()
            done(span)


# --- the compiled readers' buffers as Arrow, handed to DuckDB ---------------------------------------------


def text_array(rows: int, column):
    """One of a C module's text columns (validity, offsets, data, nulls) as an Arrow array, without a copy."""
    import pyarrow as pa

    valid, offsets, data, nulls = column
    return pa.Array.from_buffers(pa.string(), rows, [pa.py_buffer(valid), pa.py_buffer(offsets),
                                                     pa.py_buffer(data)], null_count=nulls)


def batch(rows: int, problem, cols, ts):
    """A compiled reader's buffers as a batch of schema(), without a copy (the text columns, the problem code, the
    timestamps)."""
    import pyarrow as pa

    arrays = [text_array(rows, column) for column in cols]
    arrays.append(pa.Array.from_buffers(pa.int8(), rows, [None, pa.py_buffer(problem)]))
    ts_valid, ts_data, ts_nulls = ts
    arrays.append(pa.Array.from_buffers(schema().field(TS_COLUMN).type, rows,
                                        [pa.py_buffer(ts_valid), pa.py_buffer(ts_data)], null_count=ts_nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=schema())


def into_staged(con, staged: str, stream_schema, batches: Iterator, *, script: str, params: dict, **names) -> None:
    """The batches as one Arrow stream (`{staged}_tokens`) that the queries/ script `script` stages into `staged`."""
    import pyarrow as pa

    name = f"{staged}_tokens"
    con.register(name, pa.RecordBatchReader.from_batches(stream_schema, batches))
    try:
        _staged_by(con, script, params, staged=staged, tokens=name, **names)
    finally:
        con.unregister(name)


def _staged_by(con, script: str, params: dict, **names) -> None:
    """Run stage_logfmt_tokens or stage_jsonl_tokens: the text columns they take are named here, once."""
    import queries

    queries.script(con, script, params, text_columns=TEXT_COLUMN_NAMES, **names)


class Seen:
    """What a compiled reader (`reader`: logfmt or jsonl) said of a file so far: its module's flags, or-ed."""

    def __init__(self, reader: str) -> None:
        self.module, self.flags = BUILT[reader], 0

    @property
    def dirty(self) -> bool:
        return bool(self.flags & self.module.DIRTY)

    @property
    def mixed_endings(self) -> bool:
        return bool(self.flags & self.module.CRLF and self.flags & self.module.LONE)


def stage_file(con, path: str, staged: str, reader: str, read: Callable[..., list], *, script: str, params: dict,
               **names) -> bool:
    """A plain file read by the compiled `reader` (logfmt or jsonl) into `staged`: `read(buffer, start, end)` of each
    range (mapped_ranges) gives its results, staged by the queries/ script `script` (stage_results). Raises DirtyFile
    at invalid UTF-8 or a line over the size limit (load._stage repairs the file). False when its line endings mix
    CRLF with bare CR or LF, which the caller then reads through the SQL path: load reads such a file from a copy
    with LF endings (repair.line_ended_copy), so this never happens there, and the check keeps a mix from being
    split any other way."""
    seen = Seen(reader)
    stage_results(con, staged, mapped_ranges(path, read), seen, script=script, params=params, **names)
    if seen.dirty:
        raise DirtyFile("invalid utf-8 or line size over the limit")
    return not seen.mixed_endings


def stage_results(con, staged: str, results: Iterator[list], seen: Seen, *, script: str, params: dict,
                  **names) -> None:
    """A compiled reader's results (per range, its pieces' rows, flags, problem codes, text columns and times) as one
    Arrow stream staged into `staged` by `script`. Stops at a dirty piece or once line endings mix (`seen` says so;
    the caller then reads the file again: repaired, or by the SQL path)."""
    into_staged(con, staged, schema(), _batches(results, seen), script=script, params=params, **names)


def _batches(results: Iterator[list], seen: Seen) -> Iterator:
    for result in results:
        for rows, flags, problem, cols, ts in result:
            seen.flags |= flags
            if flags & seen.module.DIRTY or seen.mixed_endings:
                return
            if rows:
                yield batch(rows, problem, cols, ts)


# --- the inner lines of an envelope, handed over by DuckDB -----------------------------------------------


@contextlib.contextmanager
def line_tokens(con, lines: str, staged: str, read: Callable) -> Iterator[str]:
    """The name of a view of `lines` as a compiled reader reads them (envelope_tokens), through a function of this
    connection that hands `read` each vector of lines (line_buffers) and gives DuckDB its columns but the line as
    a struct; the view and the function are gone afterwards."""
    import queries

    names = {"tokenize": f"mm_tokenize_{staged}", "tokens": f"{staged}_tokens"}
    register_lines_function(con, names["tokenize"], read)
    try:
        queries.run(con, "envelope_tokens", unwrapped=lines, **names)
        yield names["tokens"]
    finally:
        queries.run(con, "envelope_tokens_drop", tokens=names["tokens"])
        con.remove_function(names["tokenize"])


def stage_lines(con, lines: str, staged: str, read: Callable, *, script: str, params: dict, **names) -> None:
    """The inner lines of an envelope (`lines`: a view or table of `line` and `env`) read by a compiled reader
    (`read`, as line_tokens hands it each vector of lines) and staged into `staged` by `script`."""
    with line_tokens(con, lines, staged, read) as tokens:
        _staged_by(con, script, params, staged=staged, tokens=tokens, **names)


def register_lines_function(con, name: str, read: Callable) -> None:
    """The function `name` of this connection that envelope_tokens calls: a VARCHAR line in, the columns but the
    line of the batch `read(count, data, offsets)` makes of them out, as a struct."""
    import duckdb
    import pyarrow as pa

    types, fields = duck_types(con, schema()), list(schema())[1:]

    def struct(vector):
        return pa.StructArray.from_arrays(read(*line_buffers(vector)).columns[1:], fields=fields)

    con.create_function(name, struct, [types["line"]], duckdb.struct_type({f.name: types[f.name] for f in fields}),
                        type="arrow", null_handling="special")


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
