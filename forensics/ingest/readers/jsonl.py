"""The JSON Lines reader: by the compiled reader (_jsonl.c, beside this file) where it was built, else by the SQL
path (forensics.ingest.readers.sql).

The C module reads a plain file's lines, range by range through a memory map, on two threads with the GIL
released, into the text columns queries/ingest_jsonl.sql's stage_jsonl computes with json_extract_string (each
canonical field from the first of its JSONPaths whose value is not blank). It reads only what it can read
exactly as DuckDB does and defers every other line (not a strict JSON object, a wanted value DuckDB prints its
own way, a key written twice, ...: see _jsonl.c) to SQL, which reads those lines with stage_jsonl's
own expressions (stage_jsonl_tokens). On the lines it reads, it types the recipient, msg_id and zoned ISO time
itself, with the logfmt tokenizer's C code (_typing.h). A gzipped file is read from its decompressed
copy (a plain file). The JSON records inside an envelope, taken off by DuckDB, are read as DuckDB hands them
over (stage_lines), as the logfmt tokenizer reads the logfmt ones; in the line envelopes the C unwrapper takes
(forensics.ingest.readers.unwrap) they are read by read_lines beside it, with their text.

One switch for the compiled readers (runtime.compiled): MAILMORTEM_PARSER=sql forces the SQL path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import queries
from forensics.ingest.fields import CANONICAL, FieldMap
from forensics.ingest.readers import runtime, sql
from forensics.ingest.readers.runtime import LongLine
from forensics.ingest.sources import Source

_jsonl = runtime.BUILT["jsonl"]


def read(con, source: Source, staged: str, head: bytes, field_map: FieldMap, *, keep_raw: bool, compiled: bool,
         reader: str = "mm_lines") -> int:
    """A file's JSON Lines (`reader` mm_lines), or the JSON records inside its envelope (mm_unwrapped: `source.path`
    names their table), into `staged`: with `compiled` (load's choice, runtime.compiled), by the compiled reader
    where it takes them, else by the SQL path. The header's line: 0."""
    keys, rare, params = sql.jsonl_keys(con, source, field_map, keep_raw, reader)
    if not (compiled and _compiled(con, source, staged, (keys, rare), field_map, params=params, reader=reader)):
        sql.stage_jsonl(con, source, staged, (keys, rare), field_map, params=params, reader=reader)
    return 0


def _compiled(con, source: Source, staged: str, keys: tuple[list[str], list[str]], field_map: FieldMap, *,
              params: dict, reader: str) -> bool:
    """Whether the compiled JSON Lines reader staged a plain file, or the lines inside its envelope (`reader`
    mm_unwrapped), reading `keys` (the sampled paths and the rare keys). False when the SQL path is to read it:
    the reader takes not so many paths, finds a file's line endings mixed (never, as load reads a mix from an LF
    copy) or an inner line over its limit."""
    planned = plan_and_picks(*keys, field_map)
    stage = stage_lines if reader == "mm_unwrapped" else stage_file
    if planned and stage(con, source.path, staged, planned[0], params=params, picks=planned[1]):
        return True
    queries.run(con, "drop_staged", staged=staged)
    return False


def plan_and_picks(sampled: list[str], rare: list[str], field_map: FieldMap) -> tuple | None:
    """The compiled JSON Lines reader's Plan for these keys and stage_jsonl_tokens' picks (None: it does not
    take them)."""
    planned = plan(sampled, rare, field_map)
    if planned is None:
        return None
    return planned, [*sql.pick_columns(sampled, field_map, rare, "deferred_text_column"), *carried()]


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


def stage_file(con, path: str, staged: str, plan: Plan, *, params: dict, picks: list) -> bool:
    """Read a plain JSON Lines file into `staged` (`params` and `picks`: stage_jsonl's, for the deferred lines,
    then the carried() columns): runtime.stage_file, which raises DirtyFile, and is False when its line endings
    mix."""
    return runtime.stage_file(con, path, staged, "jsonl", _range_read(plan), script="stage_jsonl_tokens",
                              params=params, picks=picks, env="mm_no_envelope()")


def carried() -> list:
    """The columns the C module typed, and whether SQL reads the line, carried through stage_jsonl_tokens' texts
    (after its picks)."""
    return [queries.fragment("carried_column", column=column)
            for column in ("deferred", *runtime.TYPED_TEXT_COLUMNS, runtime.TS_COLUMN)]


def _range_read(plan: Plan):
    """What the reader makes of a range of a file (runtime.stage_file reads the next range, GIL released, while
    DuckDB takes this one)."""
    def read(buffer, start: int, end: int) -> list:
        return _jsonl.read(buffer, start, end, plan.paths, plan.always, plan.fields, plan.rare, runtime.THREADS)

    return read


# --- the JSON records inside an envelope ---------------------------------------------------------------


def stage_lines(con, lines: str, staged: str, plan: Plan, *, params: dict, picks: list) -> bool:
    """Read the inner lines of an envelope (`lines`: the view or table of `line` and `env` that
    queries/envelopes.sql's envelope_flat_lines, envelope_lines or envelope_joined_lines made) into `staged`, each row
    keeping its envelope, as logfmt.stage_lines reads logfmt ones: DuckDB hands the C module each vector of lines
    through a function of this connection and gets its columns back as a struct beside the line and its `env`; the
    lines it defers are read by SQL there (`params` and `picks` as for stage_file). False when a line is over the
    reader's limit: the caller reads the lines through the SQL path then."""
    seen = runtime.Seen("jsonl")
    try:
        runtime.stage_lines(con, lines, staged, _lines_read(plan, seen), script="stage_jsonl_tokens", params=params,
                            picks=picks, env="env")
    except Exception:
        if seen.dirty:  # raised by LongLine, wrapped by DuckDB
            return False
        raise
    return True


def _lines_read(plan: Plan, seen: runtime.Seen):
    """What the reader makes of a vector of inner lines (count, data, offsets), as a batch; the flags it saw are
    or-ed into `seen`."""
    def read(count: int, data, offsets):
        rows, flags, codes, cols, ts = _jsonl.read_lines(data, offsets, plan.paths, plan.always, plan.fields,
                                                        plan.rare)
        seen.flags |= flags
        if rows < count:
            raise LongLine("an inner line longer than the JSON Lines reader takes")
        return runtime.batch(rows, codes, cols, ts)

    return read
