"""Tell a file's log syntax (logfmt, JSON Lines, CSV) and its envelope from its first lines (tell).

An envelope is the wrapper a platform puts around an application's log line (forensics.ingest.envelopes takes it
off); each is a row of forensics.ingest.envelope_table.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from forensics.errors import ConfigError, InputError
from forensics.ingest.envelope_table import ENVELOPES, ISO, TABLE, Envelope
from forensics.ingest.fields import ALIASES
from forensics.ingest.readers.grammar import PAIR_RE, PAIR_START_RE

_KNOWN = {alias for names in ALIASES.values() for alias in names}

NAMES = tuple(ENVELOPES)
NONE = "none"  # --envelope none: read every file as it is


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


# --- telling the file: its syntax and envelope, and how to read them -----------------------------

@dataclass(frozen=True)
class Reading:
    """How to read the files beyond their syntax: a forced envelope (--envelope), the zone of timestamps that
    carry none (--tz), the year of syslog stamps that carry none (--year)."""

    envelope: str | None = None
    tz: str = "UTC"
    year: int | None = None


@dataclass(frozen=True)
class Found:
    """A file's envelope, and whether its entries are one per line or inside JSON documents."""

    envelope: Envelope
    document: bool = False
    params: dict = field(default_factory=dict, compare=False)  # what the file's path and age tell

    @property
    def name(self) -> str:
        return self.envelope.name


@dataclass(frozen=True)
class Told:
    """What a file's first bytes tell: the syntax of its records (inside its envelope, if it has one), its envelope,
    and for a file read without one that a known envelope fits in part, a note saying which (partial_note)."""

    syntax: str
    envelope: Found | None = None
    partial: str | None = None


def tell(path: str, label: str, head: bytes, forced_syntax: str | None, reading: Reading) -> Told:
    """The file's syntax (--syntax when given) and envelope (of_file); a file none fits is refused, naming an
    envelope it fits in part."""
    found = of_file(path, head, forced_syntax, reading)
    if found:
        return Told(forced_syntax or "logfmt", found)
    partly = None if reading.envelope else partial_note(label, head, path)
    syntax = forced_syntax or detect_syntax(head)
    if syntax is None:
        raise InputError(partly or f"{label}: cannot tell the log syntax (not logfmt, JSON Lines or CSV, nor "
                         "wrapped in a known envelope); force one with --syntax or --envelope")
    return Told(syntax, partial=partly)


# --- telling the envelope ------------------------------------------------------------------------

# (envelope, a line's shape), tried in the table's `tried` order: the first fits win ties
_TEXT_SHAPES = tuple((e.name, e.line_shape) for e in sorted(TABLE, key=lambda e: e.tried) if e.line_shape)
_JSON_ROWS = tuple(e for e in TABLE if e.head_keys)  # the envelopes told from their keys, in the table's order
_S3_EXPORT_NAME = re.compile(r"(?:^|/)\d{6}(?:\.gz)?$")  # CloudWatch's export objects: 000000.gz
_S3_EXPORT_LINE = re.compile(rf"^{ISO}\.\d{{3}}Z ")


def _json_shape(obj: dict) -> tuple[str, bool] | None:
    """(envelope, entries are inside a document) for one JSON object, or None for a plain record."""
    keys = set(obj)
    for row in _JSON_ROWS:
        if row.document and row.document(obj):
            return row.name, True
    for row in _JSON_ROWS:
        if row.entry and row.entry(obj, keys):
            return row.name, False
    return None


def _line_shape(line: str, path: str) -> tuple[str, bool] | None:
    text = line.lstrip("\x1e")
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return _json_shape(obj)
    for name, shape in _TEXT_SHAPES:
        if shape.match(line):
            return name, False
    if _S3_EXPORT_NAME.search(path) and _S3_EXPORT_LINE.match(line):
        return "cloudwatch-export", False
    return None


def _document_shape(head: str) -> str | None:
    """The envelope of a JSON document (an array, or one pretty-printed object) from the keys in its head."""
    scores = {row.name: sum(key in head for key in row.head_keys) for row in _JSON_ROWS}
    best = max(scores, key=scores.get)
    return best if scores[best] >= 2 else None


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def _spread(text: str, lines: list[str]) -> bool:
    """A JSON array, or an object spread over several lines (pretty-printed): none of the first lines is JSON
    by itself (one damaged line does not make a file of one entry per line a document), or longer than the head
    (no whole line in it: an `aws logs` page of any size written on one line, as the SDKs and `jq -c` write it)."""
    return text.startswith("[") or (text.startswith("{") and not any(map(_parses, lines[:3])))


def is_document(head: bytes) -> bool:
    """A JSON document (see _spread), or pages of entries (`events`, `hits`) one per line, rather than one
    entry per line."""
    text = head.decode("utf-8", "replace").lstrip()
    lines = first_lines(head, 3)
    if _spread(text, lines):
        return True
    if not lines or not text.startswith("{") or not _parses(lines[0]):
        return False
    obj = json.loads(lines[0])
    return isinstance(obj, dict) and (isinstance(obj.get("events"), list) or isinstance(obj.get("hits"), dict))


def _starts_entry(line: str) -> bool:
    """Whether a line that fits no envelope starts an entry of its own (a record at the line's start: a JSON object
    or key=value pairs) rather than continuing the entry before it (a traceback, an indented or prefix-less line of a
    message), as lnav joins a message's lines."""
    if line[:1].isspace():
        return False
    return line.startswith("{") and _parses(line) or len(PAIR_START_RE.findall(line)) >= 2


def _votes(lines: list[str], path: str) -> tuple[tuple[str, bool] | None, int, int]:
    """(the shape most entries among `lines` have, how many have it, how many entries there are): an entry is a line
    of an envelope's shape or one that starts a record (_starts_entry); the other lines continue the entry before."""
    shapes = [_line_shape(line, path) for line in lines]
    fitting = [shape for shape in shapes if shape]
    if not fitting:
        return None, 0, 0
    best, votes = Counter(fitting).most_common(1)[0]
    return best, votes, len(fitting) + sum(1 for line, shape in zip(lines, shapes) if not shape and _starts_entry(line))


def detect_envelope(head: bytes, path: str = "") -> Found | None:
    """The envelope most of a file's first entries are wrapped in (at least half of them), or None."""
    text = head.decode("utf-8", "replace").lstrip()
    lines = first_lines(head)
    if _spread(text, lines):
        name = _document_shape(text)
        return Found(ENVELOPES[name], document=True) if name else None
    best, votes, entries = _votes(lines, path)
    if best is None or votes * 2 < entries:
        return None
    name, document = best
    return Found(ENVELOPES[name], document=document)


def partial_note(label: str, head: bytes, path: str = "") -> str | None:
    """For a file read without an envelope that a known one fits in part (some of its first entries, too few to
    tell it): which, and how to force it; None otherwise."""
    lines = first_lines(head)
    if _spread(head.decode("utf-8", "replace").lstrip(), lines):
        return None
    best, votes, entries = _votes(lines, path)
    if best is None or votes * 2 >= entries:
        return None
    envelope = ENVELOPES[best[0]]
    return (f"{label}: {votes} of its first {entries} entries look like {envelope.title}, too few to read it as that; "
            f"if it is, force it with --envelope {envelope.name}")


def of_file(path: str, head: bytes, syntax: str | None, reading: Reading) -> Found | None:
    """A file's envelope, with what its path and age say: forced by --envelope, else detected (a CSV file has
    none)."""
    if reading.envelope:
        found = forced(reading.envelope, head)
    else:
        found = None if syntax == "csv" else detect_envelope(head, path)
    if found and syntax == "csv":
        raise ConfigError("--syntax csv: CSV is not read inside an envelope (records inside one are logfmt or JSON)")
    return file_params(found, path, reading.year, reading.tz) if found else None


def forced(name: str, head: bytes) -> Found | None:
    """The envelope named by --envelope (None for `none`)."""
    if name == NONE:
        return None
    if name not in ENVELOPES:
        raise ConfigError(f"unknown --envelope {name!r} (choose from {', '.join(NAMES + (NONE,))})")
    return Found(ENVELOPES[name], document=is_document(head))


# --- what a file's path and age tell ------------------------------------------------------------

_DOCKER_PATH = re.compile(r"containers/([0-9a-f]{12,64})/\1-json\.log")
_POD_PATH = re.compile(r"pods/[^/_]+_([^/_]+)_[^/]+/([^/]+)/\d+\.log")
_CONTAINER_LINK = re.compile(r"containers/([^/_]+)_[^/_]+_(.+)-[0-9a-f]{64}\.log")
_S3_STREAM = re.compile(r"([^/]+)/\d+(?:\.gz)?$")


def file_params(found: Found, path: str, year: int | None, tz: str = "UTC") -> Found:
    """The envelope with what the file's path and age say: its container (Docker's id, the pod of a kubelet
    log, a CloudWatch export's stream), a kubelet log's container name, and the year of stamps that lack one
    (and the zone they are read in, --tz)."""
    container = unit = None
    if match := _DOCKER_PATH.search(path):
        container = match.group(1)[:12]
    elif match := (_POD_PATH.search(path) or _CONTAINER_LINK.search(path)):
        container, unit = match.groups()
    elif found.name in ("cloudwatch", "cloudwatch-export") and (match := _S3_STREAM.search(path)):
        container = match.group(1)
    stamp_year, last_month = year_rule(path, year)
    params = {"container": container, "unit": unit, "year": stamp_year, "last_month": last_month, "tz": tz}
    return Found(found.envelope, found.document, params)


def year_rule(path: str, year: int | None) -> tuple[int, int]:
    """(year, last month) for syslog stamps without a year: --year for all of them; else the year the file was
    last modified, and the year before for a month after that one (the log crossed New Year)."""
    if year is not None:
        return year, 12
    try:
        modified = dt.datetime.fromtimestamp(os.path.getmtime(path), dt.timezone.utc)
    except OSError:
        modified = dt.datetime.now(dt.timezone.utc)
    return modified.year, modified.month


