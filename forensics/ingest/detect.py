"""Tell a file's log syntax (logfmt, JSON Lines, CSV) from its first lines."""

from __future__ import annotations

import csv
import json

from forensics.ingest.fields import ALIASES
from forensics.ingest.readers.grammar import PAIR_RE

_KNOWN = {alias for names in ALIASES.values() for alias in names}


def first_lines(head: bytes, limit: int = 50) -> list[str]:
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(head) >= 65536 and lines:
        lines = lines[:-1]  # the last sniffed line may be cut
    return [line for line in lines if line.strip()][:limit]


def _csv_header(line: str) -> list[str] | None:
    try:
        cells = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return None
    known = sum(1 for c in cells if c.strip().lower() in _KNOWN)
    if len(cells) >= 2 and known >= 2 and "=" not in line and not line.lstrip().startswith("{"):
        return [c.strip() for c in cells]
    return None


def _is_json_object(line: str) -> bool:
    if not line.lstrip().startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def syntax_counts(lines: list[str]) -> tuple[int, int]:
    """(lines that are JSON objects, other lines holding at least two key=value pairs)."""
    json_lines = [_is_json_object(line) for line in lines]
    logfmt_lines = sum(len(PAIR_RE.findall(line)) >= 2 for line, is_json in zip(lines, json_lines) if not is_json)
    return sum(json_lines), logfmt_lines


def detect_syntax(head: bytes) -> str | None:
    """The syntax most of the first lines are written in, or None when none fits."""
    lines = first_lines(head)
    if not lines:
        return None
    if _csv_header(lines[0]):
        return "csv"
    json_lines = sum(_is_json_object(line) for line in lines)
    logfmt_lines = sum(len(PAIR_RE.findall(line)) >= 2 for line in lines)
    if json_lines and json_lines >= logfmt_lines:
        return "jsonl"
    if logfmt_lines:
        return "logfmt"
    return None


def csv_header(head: bytes) -> tuple[int, list[str]] | None:
    """(line number of the header, its column names) for a CSV file."""
    text = head.decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                cells = next(csv.reader([line]))
            except (csv.Error, StopIteration):
                return None
            return number, [c.strip() for c in cells]
    return None
