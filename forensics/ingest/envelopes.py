"""Envelopes: the wrapper a platform puts around an application's log line, told per file and taken off in bulk.

Docker's json-file, CRI, journald, syslog, Loki, Cloud Logging, CloudWatch, Datadog and Elastic exports, and the
prefixes of common logging frameworks all carry the record an agent wrote (logfmt or JSON) inside something
else. Python tells which envelope a file has from its first lines; DuckDB takes every envelope off
(queries/envelopes.sql), and the inner lines are then parsed by the file's ordinary parser, each carrying its
envelope's time and provenance (used where the record has none). A plain file of logfmt or JSON records in one
of the common line envelopes is first offered to the compiled unwrapper (forensics.ingest.readers.unwrap), which
gives the same staged rows or hands the file back here. Each envelope is a row of forensics.ingest.envelope_table.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import queries
from forensics.errors import ConfigError
from forensics.ingest import documents
from forensics.ingest.detect import detect_syntax, first_lines, syntax_counts
from forensics.ingest.envelope_table import ENVELOPES, ISO, TABLE, Envelope
from forensics.ingest.readers.grammar import PAIR_START_RE
from forensics.ingest.sources import Source


NAMES = tuple(ENVELOPES)
NONE = "none"  # --envelope none: read every file as it is
SENDER_SAMPLE = 10_000  # the first records that tell where a file's workers came from (sender)
INNER_SAMPLE_LINES = 200  # the first non-blank inner lines that tell the inner syntax (inner_sample)


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


def check_zone(con, zone: str) -> None:
    if not queries.one(con, "time_zone_known", {"zone": zone})["known"]:
        raise ConfigError(f"--tz {zone!r}: unknown time zone (use a name such as UTC, Europe/Berlin or "
                          "America/New_York)")


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


# --- taking it off --------------------------------------------------------------------------------

@dataclass
class Unwrapped:
    syntax: str  # of the records inside: logfmt, jsonl, or jsonl+logfmt when it holds both
    entries: int  # lines of the file, or entries of its JSON documents
    sample: list[str]  # the first non-blank inner lines


Parse = Callable[[str, Source, bytes, str], None]  # (syntax, lines, head, staged table): the file's parser
NOT_FLAT = "mailmortem: an envelope's entry is not one whole line"  # envelope_flat_lines' error: read the pieces


def stage(con, found: Found, source: Source, staged: str, syntax: str | None, *, delim: str, parse: Parse
          ) -> Unwrapped:
    """Take the envelope off `source` and parse the lines inside into `staged` (with their envelope, `env`): straight
    from the envelope's view when every entry is one whole line, else from its pieces written down, joined or split."""
    tables = {"entries": f"{staged}_entries", "pieces": f"{staged}_pieces", "kept": f"{staged}_kept",
              "unwrapped": f"{staged}_lines"}
    try:
        pieces = _pieces(con, found, source, delim, tables)
        if flat := _read_flat(con, tables, source, staged, syntax, parse=parse, pieces=pieces):
            return flat
        pieces(False)  # the pieces are written down from the view as first made, whatever the flat read made of it
        return _read_kept(con, tables, source, staged, syntax, parse=parse)
    finally:
        queries.script(con, "envelope_drop", **tables)


def _pieces(con, found: Found, source: Source, delim: str, tables: dict) -> Callable[[bool], None]:
    """The file's entries as the envelope's view of pieces (a JSON document's entries written down first). Returns
    what makes the view again knowing whether every record inside is JSON (json_only: see mm_json_object); only the
    blocks that read json_only are made again, and only when it changes."""
    values = {**found.params, "path": source.path, "delim": delim}
    lines = "mm_lines"
    if found.document:
        documents.stage_entries(con, source.path, found.envelope.items, tables["entries"])
        lines, values["path"] = "mm_entries", tables["entries"]
    reads_json_only = "json_only" in queries.get(found.envelope.block).placeholders
    made: bool | None = None  # the json_only of the view as it stands (None: not made yet)

    def view(json_only: bool) -> None:
        nonlocal made
        if made is not None and (made == json_only or not reads_json_only):
            return
        queries.run(con, found.envelope.block, pieces=tables["pieces"], lines=lines, json_only=int(json_only),
                    **values, **dict(found.envelope.shape))
        made = json_only

    view(False)
    return view


def _read_flat(con, tables: dict, source: Source, staged: str, syntax: str | None, *, parse: Parse,
               pieces: Callable[[bool], None]) -> Unwrapped | None:
    """The inner lines parsed straight from the pieces' view (made again for records that are all JSON); None
    (nothing left in `staged`) when an entry is not one whole line (envelope_flat_lines stops the read there)."""
    try:
        queries.run(con, "envelope_flat_lines", again=NOT_FLAT, **tables)
        sample, inner = inner_sample(con, tables["unwrapped"], syntax)
        if inner == ["jsonl"]:
            pieces(True)
        _parse_inner(con, inner, Source(tables["unwrapped"], source.label, False), sample, staged, parse=parse)
    except Exception as exc:  # raised inside DuckDB, in whatever class the reading wraps it
        if NOT_FLAT not in str(exc):
            raise
        queries.run(con, "drop_staged", staged=staged)
        return None
    finally:
        queries.run(con, "envelope_drop_lines", relation="VIEW", unwrapped=tables["unwrapped"])
    [entries] = queries.run(con, "envelope_flat_entries", staged=staged).fetchone()
    return Unwrapped("+".join(inner), entries, sample)


def _read_kept(con, tables: dict, source: Source, staged: str, syntax: str | None, *, parse: Parse) -> Unwrapped:
    """The inner lines of the pieces written down: joined where a piece leaves its line unfinished, split at
    newlines, a last line never finished marked (mark_truncated_row)."""
    queries.run(con, "envelope_kept_pieces", **tables)
    partial, incomplete, entries = queries.run(con, "envelope_partial_pieces", **tables).fetchone()
    relation = "TABLE" if partial else "VIEW"
    try:
        queries.run(con, "envelope_joined_lines" if partial else "envelope_lines", **tables)
        sample, inner = _parse_unwrapped(con, tables["unwrapped"], source, syntax, staged, parse=parse)
        cut = queries.run(con, "envelope_cut_rows", unwrapped=tables["unwrapped"]).fetchall() if incomplete else []
    finally:
        queries.run(con, "envelope_drop_lines", relation=relation, unwrapped=tables["unwrapped"])
    for row, text in cut:
        queries.run(con, "mark_truncated_row", {"row": row, "text": text}, staged=staged)
    return Unwrapped("+".join(inner), entries, sample)


def _parse_unwrapped(con, unwrapped: str, source: Source, syntax: str | None, staged: str, *, parse: Parse
                     ) -> tuple[list[str], list[str]]:
    """The inner lines (`unwrapped`) parsed into `staged` by the syntaxes of their records (`syntax` when given):
    (the first inner lines, those syntaxes)."""
    sample, inner = inner_sample(con, unwrapped, syntax)
    _parse_inner(con, inner, Source(unwrapped, source.label, False), sample, staged, parse=parse)
    return sample, inner


def inner_sample(con, unwrapped: str, syntax: str | None) -> tuple[list[str], list[str]]:
    """The first inner lines of `unwrapped` (a relation of `line`), and the syntaxes of the records among them
    (`syntax` when given)."""
    sample = [row[0] for row in queries.run(con, "envelope_inner_sample", {"most": INNER_SAMPLE_LINES},
                                            unwrapped=unwrapped).fetchall()]
    return sample, [syntax] if syntax else inner_syntaxes(sample)


def inner_syntaxes(sample: list[str]) -> list[str]:
    """The syntaxes of the records inside: JSON Lines, logfmt, or both (several programs in one journal, say);
    logfmt when neither fits (the file then holds no record, which its note says)."""
    json_lines, logfmt_lines = syntax_counts(sample)
    if json_lines and logfmt_lines:
        return ["jsonl", "logfmt"]
    return ["jsonl"] if json_lines else ["logfmt"]


def _parse_inner(con, syntaxes: list[str], lines: Source, sample: list[str], staged: str, *, parse: Parse) -> None:
    head = "\n".join(sample).encode()
    if len(syntaxes) == 1:
        parse(syntaxes[0], lines, head, staged)
        return
    parts = {"as_json": f"{staged}_as_json", "as_logfmt": f"{staged}_as_logfmt"}
    try:
        parse("jsonl", lines, head, parts["as_json"])
        parse("logfmt", lines, head, parts["as_logfmt"])
        queries.run(con, "envelope_mixed_staged", staged=staged, unwrapped=lines.path, **parts)
    finally:
        for table in parts.values():
            queries.run(con, "drop_staged", staged=table)


def counts(con, staged: str, entries: int) -> tuple[int, int, int, list[int]]:
    """(lines, records, skipped, first skipped) of a staged file read through an envelope."""
    [(records, skipped, first)] = queries.run(con, "envelope_counts", staged=staged).fetchall()  # to its end (see load)
    return entries, records, skipped, list(first or [])


def empty_note(label: str, found: Found, unwrapped: Unwrapped) -> str:
    """What a file whose envelope was recognised holds instead of mail-send records."""
    what = {"jsonl": "JSON objects without an event or message id",
            "logfmt": "key=value lines without an event or message id"}
    inner = detect_syntax("\n".join(unwrapped.sample).encode())
    holds = what.get(inner, "plain text, not key=value pairs or JSON") if unwrapped.sample else "no text at all"
    example = f", e.g. {unwrapped.sample[0][:80]!r}" if unwrapped.sample else ""
    entries = f"{unwrapped.entries:,} {'entry' if unwrapped.entries == 1 else 'entries'}"
    # slog's and logrus's lines are key=value pairs whole: read so, their msg ("email sent") and every key are
    # read and inferred as in any logfmt file, where the envelope keeps only the pairs after msg, unsampled
    whole = ("; --envelope none reads each line whole as key=value pairs, its msg and keys inferred"
             if found.envelope.name in ("slog", "logrus") else "")
    return (f"{label}: {found.envelope.title} envelope recognised ({entries}), but no "
            f"mail-send record inside: the messages are {holds}{example}{whole}")


def zone_note(envelopes_read: list[str | None], tz: str) -> str | None:
    """Say which zone times without one were read in, when it matters: --tz was given, or an envelope's
    times carry no zone."""
    zone_less = sorted({ENVELOPES[name].title for name in envelopes_read if name and ENVELOPES[name].zone_less})
    if tz == "UTC" and not zone_less:
        return None
    where = f" ({', '.join(zone_less)})" if zone_less else ""
    return f"Times without a zone{where} were read as {tz} (change with --tz)."


def sender(con, staged: str, found: Found) -> str | None:
    """Where a staged file's workers came from (among its first SENDER_SAMPLE records), in the platform's words
    (`worker ← _HOSTNAME/_SYSTEMD_UNIT, incarnation ← _PID`): the envelope's fields that named most of them
    (mm_env_worker's choice), or the records' own key; None when no record names a worker."""
    [(source, taken, own, by_pid)] = queries.run(con, "envelope_sender", {"most": SENDER_SAMPLE},
                                                 staged=staged).fetchall()
    names = dict(found.envelope.names)
    if not taken:
        return "worker ← the records' own key" if own else None
    field = "/".join(names.get(part, part) for part in source.split("/"))
    said = f"worker ← {field}" + (f", incarnation ← {names.get('pid', 'pid')}" if by_pid else "")
    return said + (" (some records name their own)" if own else "")
