"""Envelopes: the wrapper a platform puts around an application's log line, taken off in bulk.

Docker's json-file, CRI, journald, syslog, Loki, Cloud Logging, CloudWatch, Datadog and Elastic exports, and the
prefixes of common logging frameworks all carry the record an agent wrote (logfmt or JSON) inside something
else. Python tells which envelope a file has from its first lines (forensics.ingest.detect); DuckDB takes every
envelope off (queries/envelopes.sql), and the inner lines are then parsed by the file's ordinary parser, each
carrying its envelope's time and provenance (used where the record has none). A plain file of logfmt or JSON records in one
of the common line envelopes is first offered to the compiled unwrapper (forensics.ingest.readers.unwrap), which
gives the same staged rows or hands the file back here. Each envelope is a row of forensics.ingest.envelope_table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import queries
from forensics.ingest import documents
from forensics.ingest.detect import detect_syntax, syntax_counts
# the readers, the watch and the CLI name these here
from forensics.ingest.detect import NAMES, NONE, Found, Reading  # noqa: F401
from forensics.ingest.envelope_table import ENVELOPES
from forensics.ingest.sources import Source

SENDER_SAMPLE = 10_000  # the first records that tell where a file's workers came from (sender)
INNER_SAMPLE_LINES = 200  # the first non-blank inner lines that tell the inner syntax (inner_sample)


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
