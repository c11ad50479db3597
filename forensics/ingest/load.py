"""Load log files into DuckDB: each file's lines → typed `staged` rows → `events`, `skipped`, `sends`.

Python decides which file is which syntax and envelope, and picks its reader (forensics.ingest.readers); the per-line
work (splitting, regexes, JSON, casts) happens inside DuckDB or the compiled readers, in one parallel pass
per file (one pass over them all for more than MANY_FILES files of one syntax). A staged table keeps the
file's order (the connection preserves insertion order), so a line's number is its rowid + 1 (less the rows
of the files before it). A file wrapped by a platform (forensics.ingest.envelopes) is unwrapped first, and
its lines keep the number of the line (or entry) they came from.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Callable

import queries
from forensics.ingest import detect, envelopes, repair, sources, vocabulary, window
from forensics.ingest.readers import jsonl, logfmt, runtime, sql, unwrap
from forensics.ingest.detect import Reading
from forensics.errors import ConfigError, InputError, ParseError
from forensics.ingest.fields import FieldMap
from forensics.ingest.readers.sql import LINE_DELIM
from forensics.ingest.sources import SYNTAXES, FileFacts, Source, inspect

# More files than this get events/skipped tables rather than views over a union of staged tables.
MANY_FILES = 16
# The reader of a file's lines (or of those inside its envelope), by syntax: each reads in C where it may.
READERS = {"logfmt": logfmt.read, "jsonl": jsonl.read, "csv": sql.read_csv}

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
    envelope: str | None = None  # the platform's wrapper its lines were read from
    note: str | None = None  # why an enveloped file gave no record
    sender: str | None = None  # which of its envelope's fields named the workers (envelopes.sender)


def load(con, sources: list[Source], *, syntax: str | None = None, field_map: FieldMap | None = None,
         strict: bool = False, progress: Progress | None = None, keep_raw: bool = False,
         reading: Reading = Reading(), limits: window.Window = window.Window(), again: bool = False
         ) -> tuple[list[InputSummary], window.Cut | None, vocabulary.Vocabulary]:
    """Read every source into events/skipped/sends; `keep_raw` (a saved case) keeps each record's line in events.raw
    and copies sends into the case file (otherwise a TEMP table). `limits`
    (--since/--until) keeps the records of a window only: the Cut says what it kept (None without one). The
    Vocabulary says which key was read as which field, and why (forensics.ingest.vocabulary).
    `again` (forensics.watch, a poll's new lines on a connection loaded before): its macros are made already, and
    no sends are built (the watch keeps its own); made anew each time, they cost more than a small chunk's lines."""
    if syntax is not None and syntax not in SYNTAXES:
        raise ConfigError(f"unknown --syntax {syntax!r} (choose from {', '.join(SYNTAXES)})")
    if not again:
        queries.macros(con)
        queries.run(con, "set_time_zone", zone="UTC")
    queries.script(con, "create_files", staged="staged_0")  # the empty staged table of file 0 (_create_views)
    if not again:  # a watch's poll reads with the zone its first load checked
        _check_zone(con, reading.tz)
    field_map = field_map or FieldMap()
    files = [_detected(index + 1, source, syntax, reading) for index, source in enumerate(sources)]
    # before any file is staged: it decides the keys read. A watch's poll (again) keeps the reading its first
    # sample with keys decided, on the same connection, and never stops on a chunk's ambiguous sample.
    if again and field_map.sampled:
        read_as = vocabulary.Vocabulary()
    else:
        read_as = vocabulary.read(con, files, field_map, refuse=not again)
        field_map.sampled = bool(read_as.keys)
    queries.run(con, "set_time_zone", zone=reading.tz)
    try:
        summaries = _load_all(con, files, field_map, keep_raw, progress)
    finally:
        queries.run(con, "set_time_zone", zone="UTC")
    for file in files:
        inspect(file.source, since=file.facts)  # still the file that was looked at, or refused
    for file in [f for f in files if f.partial]:  # a known envelope fits it in part: say which, and how to force it
        summaries[file.file_id].note = file.partial
    cut = _create_views(con, files, summaries, limits, reading.tz)  # a zone-less --since/--until is read in --tz
    if not again:
        queries.script(con, "build_sends")
        queries.script(con, "send_ids")
    if keep_raw:  # a saved case
        queries.script(con, "save_sends")
    if strict:
        _refuse_skips(con)
    return [summaries[file.file_id] for file in files], cut, read_as


def sampled_vocabulary(con, sources: list[Source], syntax: str | None, field_map: FieldMap,
                       reading: Reading | None = None) -> vocabulary.Vocabulary:
    """The files' vocabulary, nothing staged, ambiguities said rather than refused (`mailmortem fields`)."""
    queries.macros(con)
    files = [_detected(index + 1, source, syntax, reading or Reading()) for index, source in enumerate(sources)]
    return vocabulary.read(con, files, field_map, refuse=False)


def _check_zone(con, zone: str) -> None:
    [(known,)] = queries.run(con, "time_zone_known", {"zone": zone}).fetchall()
    if not known:
        raise ConfigError(f"--tz {zone!r}: unknown time zone (use a name such as UTC, Europe/Berlin or "
                          "America/New_York)")


def _load_all(con, files: list[_File], field_map: FieldMap, keep_raw: bool,
              progress: Progress | None) -> dict[int, InputSummary]:
    summaries: dict[int, InputSummary] = {}
    for members in _groups(files):
        if progress:
            progress(len(files) - 1, len(files), f"{len(members)} {members[0].syntax} files at once")
        summaries.update(_load_group(con, members, field_map, keep_raw))
    for index, file in enumerate(files):
        if file.file_id not in summaries:
            if progress:
                progress(index, len(files), file.source.label)
            summaries[file.file_id] = _load_file(con, file, field_map, keep_raw)
    return summaries


@dataclass
class _File:
    file_id: int
    source: Source
    syntax: str  # or "empty"; for a file in an envelope, the syntax of its records once unwrapped
    head: bytes = b""
    group: str | None = None  # the staged table it was read into with other files
    envelope: envelopes.Found | None = None
    forced: str | None = None  # --syntax, for the records inside an envelope
    facts: FileFacts | None = None  # the file when first looked at: it must not shrink or change
    partial: str | None = None  # a known envelope fits it in part (detect.partial_note)


def _detected(file_id: int, source: Source, forced: str | None, reading: Reading) -> _File:
    facts = inspect(source)
    if facts.empty:
        return _File(file_id, source, forced or "empty", facts=facts)
    told = detect.tell(source.path, source.label, facts.head, forced, reading)
    return _File(file_id, source, told.syntax, facts.head, envelope=told.envelope,
                 forced=forced if told.envelope else None, facts=facts, partial=told.partial)


def _groups(files: list[_File]) -> list[list[_File]]:
    """More than MANY_FILES logfmt (or JSON Lines) files are read in one statement: a statement per file is
    planned again each time (hundreds of regexes), whatever the file's size."""
    alone = {syntax: [f for f in files if f.syntax == syntax and f.head and not f.envelope]
             for syntax in ("logfmt", "jsonl")}
    # The compiled readers have no plan to repeat: they read their files one by one. Asked first, whatever the
    # count: a parser switch set to what cannot be had is refused on every run.
    return [members for syntax, members in alone.items() if not runtime.compiled(syntax) and len(members) > MANY_FILES]


def _load_file(con, file: _File, field_map: FieldMap, keep_raw: bool) -> InputSummary:
    source, head, file_id = file.source, file.head, file.file_id
    if not head:
        return InputSummary(source.label, file.syntax)
    staged = f"staged_{file_id}"
    if _streamed_gzip(con, file, staged, field_map, keep_raw):
        header_line, repaired, unwrapped = 0, False, None
    else:
        plain = _decompressed(con, source)
        try:
            header_line, repaired, unwrapped = _stage(con, plain or source, staged, file, field_map, keep_raw=keep_raw)
        finally:
            if plain:
                os.unlink(plain.path)
    queries.run(con, "register_file", {"file_id": file_id, "label": source.label, "header_line": header_line,
                                       "staged": staged, "first_row": 0,
                                       "envelope": file.envelope.name if file.envelope else None})
    if unwrapped:
        summary = _summary(source.label, unwrapped.syntax, envelopes.counts(con, staged, unwrapped.entries))
        summary.envelope, summary.sender = file.envelope.name, envelopes.sender(con, staged, file.envelope)
        if summary.records == 0:
            summary.note = envelopes.empty_note(source.label, file.envelope, unwrapped)
    else:
        # read to the end: DuckDB refuses to register the next file's Arrow stream beside an unfinished result
        [counts] = queries.run(con, "staged_counts", {"header_line": header_line}, staged=staged).fetchall()
        summary = _summary(source.label, file.syntax, counts)
    if repaired:
        summary.encoding = "utf-8 (repaired: invalid bytes or overlong lines)"
    return summary


def _load_group(con, members: list[_File], field_map: FieldMap, keep_raw: bool) -> dict[int, InputSummary]:
    """Many files of one syntax parsed in one parallel statement into one staged table: DuckDB reads a list
    of files in list order, each file's lines together, so a file's rows are the rowid range after those
    of the files before it (their line counts come from one more read). Any failure (a dirty file,
    say) leaves the group to be read file by file."""
    syntax, group = members[0].syntax, f"staged_many_{members[0].syntax}"
    plains: list[Source | None] = []
    try:
        for f in members:  # a damaged .gz raises here; read file by file, it is then named
            plains.append(_decompressed(con, f.source))
        paths = [(plain or f.source).path for plain, f in zip(plains, members)]
        if any(map(repair.mixes_line_endings, paths)) or any(map(repair.has_long_line, paths)):
            raise InputError("line endings mix, or a line too long")  # read from a copy, file by file
        # a Source whose path is a list: DuckDB's reader takes either (groups are made only for the SQL path)
        READERS[syntax](con, Source(paths, f"{len(paths)} files", False), group, b"".join(f.head for f in members),
                        field_map, keep_raw=keep_raw, compiled=False)
        counts = dict(queries.run(con, "file_line_counts", {"paths": paths, "delim": LINE_DELIM}).fetchall())
        lines = [counts.get(path) for path in paths]
        if None in lines or sum(lines) != _staged_rows(con, group):
            raise InputError("line counts disagree")  # never seen; read file by file instead
        cut_off = [repair.unfinished_line(plain or f.source) for plain, f in zip(plains, members)]
    except Exception:  # noqa: BLE001 - the file-by-file path reports (and repairs) what went wrong
        queries.run(con, "drop_staged", staged=group)
        return {}
    finally:
        for plain in filter(None, plains):
            os.unlink(plain.path)
    first_row = 0
    for file, count, cut in zip(members, lines, cut_off):
        queries.run(con, "register_file", {"file_id": file.file_id, "label": file.source.label, "header_line": 0,
                                           "staged": group, "first_row": first_row, "envelope": None})
        if cut is not None:
            repair.mark_truncated(con, group, first_row + count - 1, cut)
        first_row += count
        file.group = group
    counts_by_file = {row[0]: row[1:] for row in queries.run(con, "group_counts", {"staged": group},
                                                                staged=group).fetchall()}
    return {m.file_id: _summary(m.source.label, syntax, counts_by_file[m.file_id]) for m in members}


def _summary(label: str, syntax: str, counts: tuple) -> InputSummary:
    lines, records, skipped, first = counts
    return InputSummary(label, syntax, lines, records, skipped, list(first or []))


def _staged_rows(con, staged: str) -> int:
    return queries.run(con, "staged_rows", staged=staged).fetchone()[0]


def _decompressed(con, source: Source) -> Source | None:
    """A .gz not streamed (_streamed_gzip) is decompressed first into DuckDB's spill folder (removed at exit):
    DuckDB reads a .gz on one core and does not check its CRC, so a damaged archive would be read as garbled
    lines."""
    return sources.decompressed_copy(source, sql.spill_folder(con)) if source.gzipped else None


def _streamed_gzip(con, file: _File, staged: str, field_map: FieldMap, keep_raw: bool) -> bool:
    """Parse a gzipped logfmt file with the compiled tokenizer as it is decompressed. False when it is to be
    read through a decompressed copy instead (the other syntaxes, envelopes and the SQL path always are), which
    then repairs a dirty file, reads mixed line endings or refuses a damaged stream, naming it."""
    if not (file.source.gzipped and file.syntax == "logfmt" and not file.envelope and runtime.compiled("logfmt")):
        return False
    streamed = logfmt.read_gzipped(con, file.source, staged, file.head, field_map, keep_raw=keep_raw)
    if streamed is None:
        queries.run(con, "drop_staged", staged=staged)
        return False
    repair.mark_cut_off(con, staged, streamed.cut_off)
    return True


def _stage(con, source: Source, staged: str, file: _File, field_map: FieldMap, *,
           keep_raw: bool) -> tuple[int, bool, envelopes.Unwrapped | None]:
    """Parse one file into its staged table: the line number of its header (0 without one), whether
    it had to be read from a repaired copy, and what its envelope held (None without one). It is read from what
    forensics.ingest.repair says it can be read from (itself, or a copy with LF endings or repaired), and read again
    from a repaired copy once a reader refuses it as dirty (invalid UTF-8)."""
    folder, document = functools.partial(sql.spill_folder, con), file.envelope is not None and file.envelope.document
    with repair.staging(con, source, staged, folder, document=document, enveloped=file.envelope is not None) as stage:
        while True:
            try:
                header_line, unwrapped = _parse(con, stage.found.source, staged, file, field_map, keep_raw=keep_raw)
                break
            except Exception as exc:  # duckdb raises many classes; dirty files get one repaired retry
                queries.run(con, "drop_staged", staged=staged)
                if not stage.found.repaired and _is_dirty_file_error(exc):
                    stage.repair()
                    continue
                raise InputError(f"{source.label}: cannot read ({_first_line(exc, stage.found.source, source)})"
                                 ) from None
    return header_line, stage.found.repaired, unwrapped


def _parse(con, readable: Source, staged: str, file: _File, field_map: FieldMap, *,
           keep_raw: bool) -> tuple[int, envelopes.Unwrapped | None]:
    """The file's lines (or those inside its envelope) into its staged table: its header's line, what its envelope
    held."""
    if not file.envelope:
        return READERS[file.syntax](con, readable, staged, file.head, field_map, keep_raw=keep_raw,
                                    compiled=runtime.compiled(file.syntax)), None

    def parse(syntax: str, lines: Source, head: bytes, into: str) -> None:
        READERS[syntax](con, lines, into, head, field_map, keep_raw=keep_raw, compiled=runtime.compiled(syntax),
                        reader="mm_unwrapped")

    return 0, (unwrap.read(con, readable, staged, file.envelope, field_map, syntax=file.forced, keep_raw=keep_raw)
               or envelopes.stage(con, file.envelope, readable, staged, file.forced, delim=LINE_DELIM, parse=parse))


def _create_views(con, files: list[_File], summaries: dict[int, InputSummary], limits: window.Window,
                  zone: str) -> window.Cut | None:
    """The events and skipped views over the staged tables (file ids and table names are ours), cut to the
    --since/--until window (a time without a zone read in `zone`, --tz); tables instead when there are more than
    MANY_FILES files, whose staged tables are then dropped."""
    read = [f for f in files if f.group is None and summaries[f.file_id].lines]
    alone = [0] + [f.file_id for f in read if not f.envelope]
    enveloped = [f.file_id for f in read if f.envelope]
    groups = list(dict.fromkeys(f.group for f in files if f.group))
    many, parts = len(files) > MANY_FILES, view_parts(alone, groups, enveloped)
    cut = window.cut(con, limits, parts["events"], zone)
    queries.script(con, "create_views", relation="TABLE" if many else "VIEW", window=cut.predicate() if cut else "TRUE",
                   **parts)
    if many:
        for staged in [f"staged_{i}" for i in alone[1:] + enveloped] + groups:
            queries.run(con, "drop_staged", staged=staged)
    return cut


def view_parts(alone: list[int], groups: list[str], enveloped: list[int] = ()) -> dict[str, list[queries.Fragment]]:
    """The events and skipped parts of every staged table: one per file read alone (or through an envelope),
    one per group."""
    def parts(single: str, of_many: str, unwrapped: str) -> list[queries.Fragment]:
        return ([queries.fragment(single, file_id=i, staged=f"staged_{i}") for i in alone]
                + [queries.fragment(unwrapped, file_id=i, staged=f"staged_{i}") for i in enveloped]
                + [queries.fragment(of_many, staged=group) for group in groups])
    return {"events": parts("events_part", "events_part_of_many", "events_part_enveloped"),
            "skipped": parts("skipped_part", "skipped_part_of_many", "skipped_part_enveloped")}


def _is_dirty_file_error(exc: Exception) -> bool:
    if isinstance(exc, runtime.DirtyFile):
        return True
    text = str(exc).lower()
    return "unicode" in text or "utf-8" in text or "line size" in text or "csv error on line" in text


def _first_line(exc: Exception, *read: Source) -> str:
    """The first line of what went wrong, our own copies of the file (line-ended, repaired, decompressed: in the
    case's private spill folder) and a spooled stdin named as the file is named."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    for source in read:
        if isinstance(source.path, str):
            line = line.replace(source.path, source.label)
    return line


def _refuse_skips(con) -> None:
    row = queries.one(con, "first_fatal_skip")
    if row:
        raise ParseError(row["source"], row["line_no"], f"not a record ({row['reason']}); --strict makes this fatal")
