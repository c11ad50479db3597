"""JSON Lines through the compiled reader (forensics.ingest.readers._jsonl), when it was built; the SQL path otherwise.

The C module reads a plain file's lines, range by range through a memory map, on two threads with the GIL
released, into the text columns queries/ingest.sql's stage_jsonl computes with json_extract_string (each
canonical field from the first of its JSONPaths whose value is not blank). It reads only what it can read
exactly as DuckDB does and defers every other line (not a strict JSON object, a wanted value DuckDB prints its
own way, a key written twice, ...: see forensics/ingest/readers/_jsonl.c) to SQL, which reads those lines with stage_jsonl's
own expressions (stage_jsonl_tokens). On the lines it reads, it types the recipient, msg_id and zoned ISO time
itself, with the logfmt tokenizer's C code (forensics/ingest/readers/_typing.h). A gzipped file is read from its decompressed
copy (a plain file). The JSON records inside an envelope, taken off by DuckDB, are read as DuckDB hands them
over (stage_lines), as the logfmt tokenizer reads the logfmt ones; in the line envelopes the C unwrapper takes
(forensics.ingest.unwrapper) they are read by read_lines beside it, with their text.

One switch for both compiled readers: MAILMORTEM_PARSER=sql forces the SQL path; =c refuses to run without them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass

from forensics.errors import ConfigError
from forensics.ingest.readers import logfmt as tokenizer
from forensics.ingest.fields import CANONICAL, FieldMap

try:
    from forensics.ingest.readers import _jsonl
except ImportError:  # built without a C compiler: the SQL path reads JSON Lines
    _jsonl = None

PROBLEM_COLUMN = "problem_code"


def active() -> bool:
    """Whether JSON Lines (plain files, and the records inside an envelope) are read by the compiled reader."""
    if tokenizer._choice() == "sql":
        return False
    if _jsonl is None and tokenizer._choice() == "c":
        raise ConfigError(f"{tokenizer.ENV}=c but the compiled JSON Lines reader (forensics.ingest.readers._jsonl) is not "
                          "installed; reinstall with a C compiler and Python's headers, or unset it")
    return _jsonl is not None


def describe() -> str:
    """Which JSON Lines parser is active, for `mailmortem --version`."""
    if active():
        return "C (forensics.ingest.readers._jsonl)"
    return "SQL (no compiled reader)" if _jsonl is None else f"SQL ({tokenizer.ENV}=sql)"


@dataclass(frozen=True)
class Plan:
    """What the C module looks for: each path as its keys (the first `always` read on every line, the others only
    on a line holding one of the `rare` keys, where stage_jsonl's :rare_keys regex matches), and per canonical
    field the indices of its paths in the field map's order."""

    paths: list[tuple[bytes, ...]]
    always: int
    fields: list[list[int]]
    rare: list[bytes]


def plan(keys: list[str], rare: list[str], field_map: FieldMap) -> Plan | None:
    """The Plan for the dotted paths `keys` (read on every line) and the `rare` keys; None when the C module cannot
    take it (too many, or an empty key: DuckDB refuses that path, and the SQL path then says so). A key DuckDB's
    path syntax spells escaped (non-ASCII, say) is never found by that path: the C module leaves it out too (a
    line whose key is escaped is deferred)."""
    parts = {key: tuple(key.split(".")) for key in [*keys, *rare]}
    if any("" in key_parts for key_parts in parts.values()):
        return None
    found = [key for key in [*keys, *rare] if all(json.dumps(part) == f'"{part}"' for part in parts[key])]
    index = {key: at for at, key in enumerate(found)}
    resolved = field_map.resolve([*keys, *rare])
    encoded = [tuple(part.encode("utf-8", "surrogateescape") for part in parts[key]) for key in found]
    if len(found) > _jsonl.MAX_PATHS or sum(map(len, encoded)) + len(rare) >= _jsonl.MAX_NODES:
        return None
    return Plan(encoded, len(set(found) & set(keys)),
                [[index[key] for key in resolved[canon] if key in index] for canon in CANONICAL],
                [key.encode("utf-8", "surrogateescape") for key in rare])


def columns() -> list[str]:
    from forensics.ingest.readers.sql import TEXT_COLUMN_NAMES

    return ["line", *TEXT_COLUMN_NAMES, *tokenizer.TYPED_TEXT_COLUMNS, PROBLEM_COLUMN, tokenizer.TS_COLUMN]


@functools.cache
def schema():
    import pyarrow as pa

    types = {PROBLEM_COLUMN: pa.int8(), tokenizer.TS_COLUMN: pa.timestamp("us", tz="UTC")}
    return pa.schema([(name, types.get(name, pa.string())) for name in columns()])


def stage(con, path: str, staged: str, plan: Plan, params: dict, picks: list) -> bool:
    """Read a plain JSON Lines file into `staged` (`params` and `picks`: stage_jsonl's, for the deferred lines,
    then the carried() columns).
    False when its line endings mix CRLF with bare CR or LF, which the caller then reads through the SQL path.
    load._stage reads such a file from a copy with LF endings (sources.line_ended_copy), so this never happens
    there: the check keeps a mix from being split any other way."""
    import pyarrow as pa

    import queries

    flags = [0]
    name = f"{staged}_tokens"
    con.register(name, pa.RecordBatchReader.from_batches(schema(), _file_batches(path, plan, flags)))
    try:
        queries.script(con, "stage_jsonl_tokens", params, staged=staged, tokens=name, picks=picks,
                       env="mm_no_envelope()")
    finally:
        con.unregister(name)
    if flags[0] & _jsonl.DIRTY:
        raise tokenizer.DirtyFile("invalid utf-8 or line size over the limit")
    return not (flags[0] & _jsonl.CRLF and flags[0] & _jsonl.LONE)


def carried() -> list:
    """The columns the C module typed, and whether SQL reads the line, carried through stage_jsonl_tokens' texts
    (after its picks)."""
    import queries

    return [queries.fragment("carried_column", column=column)
            for column in ("deferred", *tokenizer.TYPED_TEXT_COLUMNS, tokenizer.TS_COLUMN)]


def _file_batches(path: str, plan: Plan, flags: list[int]) -> Iterator:
    """The file's Arrow batches, range by range (tokenizer.mapped_ranges: the next range is read, GIL released,
    while DuckDB takes this one). Stops at a dirty range or once line endings mix (the file is then read again:
    repaired, or by the SQL path)."""
    def read(buffer, start: int, end: int) -> list:
        return _jsonl.read(buffer, start, end, plan.paths, plan.always, plan.fields, plan.rare, tokenizer.THREADS)

    for result in tokenizer.mapped_ranges(path, read):
        for rows, seen, codes, cols, ts in result:
            flags[0] |= seen
            if seen & _jsonl.DIRTY or (flags[0] & _jsonl.CRLF and flags[0] & _jsonl.LONE):
                return
            if rows:
                yield _batch(rows, codes, cols, ts)


def _batch(rows: int, codes: bytes, cols: list, ts: tuple):
    """The C module's buffers as Arrow arrays, without a copy (the text columns, the codes, the timestamps)."""
    import pyarrow as pa

    arrays = [pa.Array.from_buffers(pa.string(), rows, [pa.py_buffer(valid), pa.py_buffer(offsets),
                                                        pa.py_buffer(data)], null_count=nulls)
              for valid, offsets, data, nulls in cols]
    arrays.append(pa.Array.from_buffers(pa.int8(), rows, [None, pa.py_buffer(codes)]))
    ts_valid, ts_data, ts_nulls = ts
    arrays.append(pa.Array.from_buffers(schema().field(tokenizer.TS_COLUMN).type, rows,
                                        [pa.py_buffer(ts_valid), pa.py_buffer(ts_data)], null_count=ts_nulls))
    return pa.RecordBatch.from_arrays(arrays, schema=schema())


# --- the JSON records inside an envelope ---------------------------------------------------------------


def stage_lines(con, lines: str, staged: str, plan: Plan, params: dict, picks: list) -> bool:
    """Read the inner lines of an envelope (`lines`: the view or table of `line` and `env` that
    queries/envelopes.sql's envelope_flat_lines, envelope_lines or envelope_joined_lines made) into `staged`, each row
    keeping its envelope, as tokenizer.stage_lines reads logfmt ones: DuckDB hands the C module each vector of lines
    through a function of this connection and gets its columns back as a struct beside the line and its `env`; the
    lines it defers are read by SQL there (`params` and `picks` as for stage). False when a line is over the reader's
    limit: the caller reads the lines through the SQL path then."""
    import queries

    flags = [0]

    def register(name: str) -> None:
        register_line_reader(con, name, plan, flags)

    try:
        with tokenizer.line_tokens(con, lines, staged, register) as tokens:
            queries.script(con, "stage_jsonl_tokens", params, staged=staged, tokens=tokens, picks=picks, env="env")
    except Exception:
        if flags[0] & _jsonl.DIRTY:  # raised by LongLine, wrapped by DuckDB
            return False
        raise
    return True


def register_line_reader(con, name: str, plan: Plan, flags: list[int]) -> None:
    """The function `name` of this connection that envelope_tokens calls: a VARCHAR line in, the reader's columns
    (but the line) out, as a struct; the flags it saw are or-ed into flags[0]."""
    con.create_function(name, _lines_read(plan, flags), [tokenizer.duck_types(con, schema())["line"]],
                        tokenizer.duck_struct(con, schema()), type="arrow", null_handling="special")


def _lines_read(plan: Plan, flags: list[int]):
    """The function DuckDB calls with a vector of inner lines: their columns (all but the line) as a struct."""
    import pyarrow as pa

    fields = list(schema())[1:]

    def read(lines):
        count, data, offsets = tokenizer.line_buffers(lines)
        rows, seen, codes, cols, ts = _jsonl.read_lines(data, offsets, plan.paths, plan.always, plan.fields,
                                                        plan.rare)
        flags[0] |= seen
        if rows < count:
            raise tokenizer.LongLine("an inner line longer than the JSON Lines reader takes")
        return pa.StructArray.from_arrays(_batch(rows, codes, cols, ts).columns[1:], fields=fields)

    return read
