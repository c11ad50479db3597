"""Find export files (files, folders, globs, .gz) and turn them into documents for DuckDB.

A document is one JSON text (a JSON Lines line, or a whole single-payload file) or one
log line, with its file and line number, so every malformed record can be named. Paths are
expanded, checked and decompressed by forensics.ingest.sources, the same way as log inputs.
An export handed over among the LOGS is told apart from them here too (provider_of).
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from forensics.errors import InputError
from forensics.ingest import sources

MAX_SINGLE_DOC = 256 * 1024 * 1024
_NOT_EXPORTS = {".md", ".rst", ".html", ".pdf", ".png", ".jpg"}
_NON_BLANK = re.compile(r"\S")


@dataclass
class ExportFile:
    path: str
    text: str
    kind: str  # "json" (one document), "jsonl", "csv" or "lines"


def expand_paths(paths: list[str]) -> list[str]:
    """Files as given, folders recursively, globs expanded (the same rules as log inputs); de-duplicated."""
    found = [file for raw in paths for file in sources.files_named(raw, _not_an_export, "export files")]
    return list(dict.fromkeys(found))


def _not_an_export(path: Path) -> bool:
    # Documentation that sits next to exports in a folder (a README, provenance notes) is not read.
    return path.name.startswith(".") or path.suffix.lower() in _NOT_EXPORTS


def read_text(path: str) -> str:
    """The file's text; .gz transparently (its stream checked); undecodable bytes replaced, never fatal."""
    source = sources.source_of(path)
    sources.check_readable(source, "provider export")
    return sources.read_all(source).decode("utf-8", errors="replace").lstrip("\ufeff")


def sniff_kind(path: str, text: str) -> str:
    """json | jsonl | csv | lines, from the content (extensions only break ties)."""
    head = text.lstrip()  # the same object unless there is leading whitespace: no copy of a big export
    if head.startswith(("{", "[")):
        return "jsonl" if _is_json_lines(text) else "json"
    name = path.lower().removesuffix(".gz")
    if name.endswith((".csv", ".tsv")):
        return "csv"
    first = _first_line(head)
    if "," in first and "postfix" not in first and not first[:3].isalpha() or name.endswith(".csv"):
        return "csv"
    return "lines"


def _first_line(text: str) -> str:
    end = text.find("\n")
    return text if end < 0 else text[:end]


def _is_json_lines(text: str) -> bool:
    """A parseable first line followed by more non-blank text (searched, never copied whole)."""
    start = _NON_BLANK.search(text)
    if start is None:
        return False
    end = text.find("\n", start.start())
    if end < 0 or _NON_BLANK.search(text, end) is None:
        return False
    try:
        json.loads(text[start.start():end])
    except ValueError:
        return False
    return True


def load_json_document(path: str, text: str):
    """Parse a single-payload JSON file; a truncated or invalid one is an error naming file:line."""
    if len(text) > MAX_SINGLE_DOC:
        raise InputError(f"{path}: single JSON document over {MAX_SINGLE_DOC // 2**20} MiB; export JSON Lines")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated JSON" if exc.pos >= len(text.rstrip()) - 1 else "invalid JSON"
        raise InputError(f"{path}:{exc.lineno}: {what} ({exc.msg})") from None


def read_export(path: str) -> ExportFile:
    text = read_text(path)
    return ExportFile(path, text, sniff_kind(path, text))


def _head_lines(text: str, count: int):
    start = 0
    for _ in range(count):
        end = text.find("\n", start)
        yield text[start:] if end < 0 else text[start:end]
        if end < 0:
            return
        start = end + 1


def first_json_values(export: ExportFile, count: int = 20) -> list:
    """The first parseable JSON values of a file (up to `count`), for detection."""
    if export.kind == "json":
        return [load_json_document(export.path, export.text)]
    values = []
    for line in _head_lines(export.text, 200):
        try:
            values.append(json.loads(line))
        except ValueError:
            continue
        if len(values) >= count:
            break
    return values


# --- a provider's export among the LOGS -----------------------------------------------------------------------------
#
# A provider's export handed over among the LOGS (a folder holding both, say): told apart from the logs.
#
# Such a file is the provider's send history, not a log: read as a log it gives no send, or a false one, or
# refuses the whole run (a single JSON document is no log syntax). It is read as `--provider-export` instead.
# A file counts as one only on a provider's own marker fields in its first records (forensics.providers.detect),
# claimed by exactly one provider and never as your own CSV/JSON Lines (whose canonical names are the logs'), and
# only when none of those records is a send in the logs' own vocabulary: an app log whose keys happen to look
# like a provider's (`event` beside `message-id`) stays a log. A Postfix maillog is a syslog file, which may hold
# the app's records too, so it stays a log.

WHOLE_DOCUMENT = 8 * 2**20  # a single JSON document is parsed whole to be told only up to this size
_FIRST_RECORDS = 20


def provider_of(source: sources.Source) -> str | None:
    """The provider whose export `source` is, or None when it is (or may be) a log (see above)."""
    try:
        return _provider_of(source)
    except InputError:  # unreadable: the log reader says so, as it would without this check
        return None


def _provider_of(source: sources.Source) -> str | None:
    from forensics.providers import detect

    text = _text(sources.head_bytes(source))
    kind = sniff_kind(source.path, text)
    if kind == "csv":
        head = _csv_head(text)
        if head is None:
            return None
        header, values = head
        candidates = detect.csv_candidates(header, {})
    elif kind in ("json", "jsonl"):
        values = _json_values(source, text, kind)
        candidates = detect.json_candidates(values, {})
    else:
        return None
    if len(candidates) != 1 or candidates[0] not in detect.DETECTED or candidates[0] == "postfix":
        return None
    return None if any(_is_log_send(v) for v in detect.first_records(values)) else candidates[0]


def _text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff")


def _csv_head(text: str) -> tuple[list[str], list[dict]] | None:
    """The header and first rows of a CSV head, the rows as records (for the log-send check), read in one pass;
    None when the csv module cannot read them (a lone CR inside an unquoted field: the log reader then decides)."""
    lines = text.split("\n")[:_FIRST_RECORDS + 1]
    reader = csv.DictReader(io.StringIO("\n".join(lines[:-1] if len(lines) > 1 else lines), newline=""))
    try:
        rows = list(reader)
    except csv.Error:
        return None
    return list(reader.fieldnames or []), rows


def _json_values(source: sources.Source, head: str, kind: str) -> list:
    if kind == "jsonl":  # the whole lines of the head (its last may be cut)
        lines = head.split("\n")[:-1] if "\n" in head else [head]
        return [value for value in map(_parsed, lines[:200]) if value is not None][:_FIRST_RECORDS]
    whole = sources.head_bytes(source, WHOLE_DOCUMENT + 1)
    if len(whole) > WHOLE_DOCUMENT:
        return []
    value = _parsed(_text(whole))
    return [] if value is None else [value]


def _parsed(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _is_log_send(record: dict) -> bool:
    """A record the logs' vocabulary reads as a send (an event alias holding a send event)."""
    from forensics.classify import SEND_EVENTS
    from forensics.ingest.fields import ALIASES

    lowered = {str(k).lower(): v for k, v in record.items()}
    return any(str(lowered.get(alias, "")).strip().lower() in SEND_EVENTS for alias in ALIASES["event"])
