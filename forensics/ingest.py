"""Load log files into DuckDB: raw lines → `parsed` → `events`, `skipped`, `sends`.

Python decides which file is which syntax and which keys feed which field; the
per-line work (splitting, regexes, JSON, casts) all happens inside DuckDB.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import queries
from forensics import sources
from forensics.detect import csv_header, detect_syntax
from forensics.errors import ConfigError, InputError, ParseError
from forensics.fields import CANONICAL, FieldMap
from forensics.sources import SYNTAXES, Source, head_bytes, is_empty

# A line is read whole by giving DuckDB's CSV reader a delimiter no log contains.
LINE_DELIM = "\x1e\x1f\x1e\x1f"

Progress = Callable[[int, int, str], None]


@dataclass
class InputSummary:
    path: str
    syntax: str
    lines: int = 0
    records: int = 0
    skipped: int = 0
    first_skipped_lines: list[int] = field(default_factory=list)
    encoding: str = "utf-8"


def run_script(con, name: str, params: dict | None = None):
    """Run a named query block (possibly several statements) on DuckDB."""
    sql = queries.get(name).for_duckdb()
    if params:
        return con.execute(sql, params)
    for statement in filter(str.strip, sql.split(";\n")):
        con.execute(statement)
    return con


def fetch(con, name: str, params: dict | None = None) -> list[tuple]:
    """All rows of a named single-statement query."""
    return con.execute(queries.get(name).for_duckdb(), params or {}).fetchall()


def load(con, sources: list[Source], syntax: str | None = None, field_map: FieldMap | None = None,
         strict: bool = False, progress: Progress | None = None) -> list[InputSummary]:
    if syntax is not None and syntax not in SYNTAXES:
        raise ConfigError(f"unknown --syntax {syntax!r} (choose from {', '.join(SYNTAXES)})")
    con.execute("SET TimeZone = 'UTC'")
    run_script(con, "ingest_macros")
    run_script(con, "create_parsed")
    summaries, present_keys = [], []
    for index, source in enumerate(sources):
        if progress:
            progress(index, len(sources), source.label)
        summary, keys = _load_file(con, source, syntax)
        summaries.append(summary)
        present_keys.extend(k for k in keys if k not in present_keys)
    _build_tables(con, (field_map or FieldMap()).resolve(present_keys))
    _fill_counts(con, summaries)
    if strict:
        _refuse_skips(con)
    return summaries


def _load_file(con, source: Source, forced: str | None) -> tuple[InputSummary, list[str]]:
    if is_empty(source):
        return InputSummary(source.label, forced or "empty"), []
    head = head_bytes(source)
    syntax = forced or detect_syntax(head)
    if syntax is None:
        raise InputError(f"{source.label}: cannot tell the log syntax (not logfmt, JSON Lines or CSV); "
                         "force one with --syntax")
    summary = InputSummary(source.label, syntax)
    readable = source
    for attempt in ("as is", "sanitized"):
        try:
            keys = _PARSERS[syntax](con, readable, head)
            break
        except Exception as exc:  # duckdb raises many classes; dirty files get one sanitized retry
            run_script(con, "forget_source", {"label": source.label})
            if attempt == "as is" and _is_dirty_file_error(exc):
                readable = sources.sanitized_copy(source)
                summary.encoding = "utf-8 (repaired: invalid bytes or overlong lines)"
                continue
            raise InputError(f"{source.label}: cannot read ({_first_line(exc)})") from None
    if not source.gzipped and not _ends_with_newline(source.path):
        run_script(con, "mark_truncated_last_line", {"label": source.label})
    return summary, keys


def _is_dirty_file_error(exc: Exception) -> bool:
    text = str(exc).lower()
    return "unicode" in text or "utf-8" in text or "line size" in text or "csv error on line" in text


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _ends_with_newline(path: str) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return True
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


def _read_params(source: Source) -> dict:
    return {"path": source.path, "label": source.label, "delim": LINE_DELIM}


def _parse_logfmt(con, source: Source, head: bytes) -> list[str]:
    run_script(con, "parse_logfmt", _read_params(source))
    return [r[0] for r in run_script(con, "parsed_keys", {"label": source.label}).fetchall()]


def _parse_jsonl(con, source: Source, head: bytes) -> list[str]:
    params = _read_params(source)
    structure = run_script(con, "json_structure", {k: params[k] for k in ("path", "delim")}).fetchone()[0]
    keys = _json_paths(json.loads(structure) if structure else {})
    paths = ["$" + "".join("." + json.dumps(part) for part in key.split(".")) for key in keys]
    run_script(con, "parse_jsonl", {**params, "keys": keys, "paths": paths})
    return keys


def _json_paths(structure, prefix: str = "") -> list[str]:
    """Leaf dotted paths of a json_group_structure result (arrays are kept as one value)."""
    if not isinstance(structure, dict):
        return [prefix] if prefix else []
    paths: list[str] = []
    for key, sub in structure.items():
        if '"' in key or "." in key:
            continue  # not addressable as a dotted path; the raw line still holds it
        paths.extend(_json_paths(sub, f"{prefix}.{key}" if prefix else key))
    return paths


def _parse_csv(con, source: Source, head: bytes) -> list[str]:
    found = csv_header(head)
    if found is None:
        raise InputError(f"{source.label}: CSV file without a header row")
    header_line, keys = found
    run_script(con, "parse_csv", {**_read_params(source), "keys": keys, "header_line": header_line})
    return keys


_PARSERS = {"logfmt": _parse_logfmt, "jsonl": _parse_jsonl, "csv": _parse_csv}


def _build_tables(con, resolved: dict[str, list[str]]) -> None:
    resolved = dict(resolved)
    resolved["ts"] = resolved["ts"] + ["_line_ts"]  # a leading bare timestamp is the fallback
    run_script(con, "create_skipped")
    run_script(con, "build_events", {f"k_{canon}": resolved[canon] for canon in CANONICAL})
    run_script(con, "split_unusable_records")
    run_script(con, "build_sends")


def _fill_counts(con, summaries: list[InputSummary]) -> None:
    rows = {r[0]: r[1:] for r in fetch(con, "file_counts")}
    for summary in summaries:
        lines, records, skipped, first = rows.get(summary.path, (0, 0, 0, None))
        summary.lines, summary.records, summary.skipped = lines, records, skipped
        summary.first_skipped_lines = list(first or [])


def _refuse_skips(con) -> None:
    rows = fetch(con, "first_fatal_skip")
    if rows:
        row = rows[0]
        raise ParseError(row[0], row[1], f"not a record ({row[2]}); --strict makes this fatal")
