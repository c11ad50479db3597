"""Find export files (files, folders, globs, .gz) and turn them into documents for DuckDB.

A document is one JSON text (a JSON Lines line, or a whole single-payload file) or one
log line, with its file and line number, so every malformed record can be named. Paths are
expanded, checked and decompressed by forensics.ingest.sources, the same way as log inputs.
"""

from __future__ import annotations

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
