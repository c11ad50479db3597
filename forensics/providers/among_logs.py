"""A provider's export handed over among the LOGS (a folder holding both, say): told apart from the logs.

Such a file is the provider's send history, not a log: read as a log it gives no send, or a false one, or
refuses the whole run (a single JSON document is no log syntax). It is read as `--provider-export` instead.
A file counts as one only on a provider's own marker fields in its first records (forensics.providers.detect),
claimed by exactly one provider and never as your own CSV/JSON Lines (whose canonical names are the logs'), and
only when none of those records is a send in the logs' own vocabulary: an app log whose keys happen to look
like a provider's (`event` beside `message-id`) stays a log. A Postfix maillog is a syslog file, which may hold
the app's records too, so it stays a log.
"""

from __future__ import annotations

import csv
import io
import json

from forensics.ingest import sources

WHOLE_DOCUMENT = 8 * 2**20  # a single JSON document is parsed whole to be told only up to this size
_FIRST_RECORDS = 20


def provider_of(source: sources.Source) -> str | None:
    """The provider whose export `source` is, or None when it is (or may be) a log."""
    from forensics.errors import InputError

    try:
        return _provider_of(source)
    except InputError:  # unreadable: the log reader says so, as it would without this check
        return None


def _provider_of(source: sources.Source) -> str | None:
    from forensics.providers import detect, files

    text = _text(sources.head_bytes(source))
    kind = files.sniff_kind(source.path, text)
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
    from forensics.evidence import SEND_EVENTS
    from forensics.ingest.fields import ALIASES

    lowered = {str(k).lower(): v for k, v in record.items()}
    return any(str(lowered.get(alias, "")).strip().lower() in SEND_EVENTS for alias in ALIASES["event"])
