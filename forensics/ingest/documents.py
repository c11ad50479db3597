"""The entries of a JSON document an envelope's entries are inside (gcloud's array, `aws logs` pages, a search
response, `journalctl -o json-pretty`), one per row: DuckDB reads the whole document; where part of it is no JSON
(a damaged entry, text that is no JSON at all, records run together by bare CRs), its values are read here one by
one instead, and each line of what does not parse is an entry of its own. The envelope's block passes such a line on
whole, and it is skipped (counted and located, and lost evidence where it looks like a send) like any line that is
no record: one malformed entry never costs the file.

    {"MESSAGE": "event=send …", "__REALTIME_TIMESTAMP": "1"}
    {"MESSAGE": "event=send …",                          ← damaged: each of its lines an entry
    {"MESSAGE": "event=send …", "__REALTIME_TIMESTAMP": "3"}

gives three entries read as journald's, and one line passed on whole between them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import queries

_LINE_END = re.compile(r"[\r\n]")
_BETWEEN = re.compile(r"[ \t\r\n,]*")  # what separates values: JSON's spaces, and an array's commas


def _refuse(constant: str):
    raise ValueError(f"{constant} is no JSON")  # Python reads NaN and Infinity; DuckDB does not


_DECODER = json.JSONDecoder(parse_constant=_refuse)


def stage_entries(con, path: str, items: str, entries: str) -> None:
    """The entries of the JSON document(s) at `path` into the table `entries` (envelope_document_entries: an array's
    elements, else the list at `items`, else the document), or where DuckDB finds malformed JSON in them,
    those of each value read here and each line of what is no JSON (values_of)."""
    import duckdb

    try:
        queries.run(con, "envelope_document_entries", {"path": path, "items": items}, entries=entries)
    except duckdb.InvalidInputException:  # malformed JSON: DuckDB cannot say where the next value starts
        _stage_values(con, Path(path).read_bytes().decode("utf-8"), items, entries)  # invalid UTF-8: a dirty file


def _stage_values(con, text: str, items: str, entries: str) -> None:
    import pyarrow as pa

    values = f"{entries}_values"
    con.register(values, pa.table({"value": pa.array(list(values_of(text)), pa.string())}))
    try:
        queries.run(con, "envelope_value_entries", {"items": items}, entries=entries, values=values)
    finally:
        con.unregister(values)


def values_of(text: str) -> Iterator[str]:
    """Each JSON object or array of `text` that parses, on one line, and each line (or the rest of one) of what does
    not: a value is tried where one starts, at the start of a line or after another value, and where it does not parse
    the rest of that line is given as it is and the next line tried."""
    at = 0
    while (at := _BETWEEN.match(text, at).end()) < len(text):
        stop = _value_end(text, at)
        if stop is None:
            line_end = _LINE_END.search(text, at)
            stop = line_end.start() if line_end else len(text)
        yield _one_line(text[at:stop])
        at = stop


def _value_end(text: str, at: int) -> int | None:
    """Where the object or array starting at `at` ends, or None where none starts there or it does not parse."""
    if text[at] not in "{[":
        return None
    try:
        return _DECODER.raw_decode(text, at)[1]
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python's parser goes
        return None


def _one_line(value: str) -> str:
    """A value on one line: a CR or LF inside a value that parsed is a space between its tokens (a JSON string
    holds none raw), and a line of what did not parse holds none."""
    return value.replace("\r", " ").replace("\n", " ")
