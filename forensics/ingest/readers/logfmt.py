"""The logfmt reader: a file's logfmt lines (or those inside its envelope) into typed `staged` rows, by the compiled
tokenizer (_logfmt.c, beside this file) where it takes them, else by the SQL path (forensics.ingest.readers.sql).

The C module reads a file's lines into the same text columns that queries/ingest.sql's stage_logfmt computes
with regexes (each canonical field's unquoted text, from the first of its keys present, in the same order),
on two threads with the GIL released. It also types what costs DuckDB most per line: the recipient's normal
form (forensics.addresses.normalize_address), the msg_id (SQL's mm_msg_id) and the common ISO timestamps with
a zone (others are NULL, typed by SQL's mm_ts in the session's zone). Its Arrow batches reach DuckDB as a
stream (one range of the file at a time, never the whole file in Python memory), where stage_logfmt_tokens
types them exactly as stage_logfmt does. Everything else (sampling the keys, repairing a dirty file, the cut-off
last line) is shared. A gzipped logfmt file is read the same way as it is decompressed (stage_gzipped), not from a
plain copy made first. The logfmt lines inside an envelope, taken off by DuckDB, are tokenized as DuckDB reads
them (stage_lines).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import queries
from forensics.ingest import gzstream, repair, sources
from forensics.ingest.fields import FieldMap
from forensics.ingest.readers import runtime, sql
from forensics.ingest.readers.runtime import LongLine
from forensics.ingest.sources import Source

_logfmt = runtime.BUILT["logfmt"]

def read(con, source: Source, staged: str, head: bytes, field_map: FieldMap, *, keep_raw: bool, compiled: bool,
         reader: str = "mm_lines") -> int:
    """A file's logfmt lines (`reader` mm_lines), or those inside its envelope (mm_unwrapped: `source.path` names
    their table), into `staged`: with `compiled` (load's choice, runtime.compiled), by the compiled tokenizer where
    it takes them, else by the SQL path. Keys seen in a sample of the file (and its head) are read on every line;
    every other alias of the vocabulary, and --field names, only on lines where one regex says one of them occurs.
    The header's line: 0 (logfmt has none)."""
    keys = sql.logfmt_keys(con, source, head, field_map, reader=reader, tokenized=compiled)
    if compiled:
        stage = stage_lines if reader == "mm_unwrapped" else stage_file
        if fits(keys.tokenized) and stage(con, source.path, staged, keys.tokenized, keep_raw):
            return 0
        queries.run(con, "drop_staged", staged=staged)  # more keys than the tokenizer takes: read by SQL
    return sql.stage_logfmt(con, source, staged, keys.sampled, field_map, keep_raw=keep_raw, reader=reader)


def fits(keys: list[list[bytes]]) -> bool:
    """Whether the C module takes this many keys (a file with hundreds of spellings of one key does not)."""
    return (sum(map(len, keys)) <= _logfmt.MAX_KEYS
            and all(len(field) <= _logfmt.MAX_FIELD_KEYS for field in keys))


class _Seen(runtime.Seen):
    """The tokenizer's flags over a gzip stream, the last bytes tokenized (where a cut-off last line is found) and
    whether the stream turned out damaged or truncated."""

    def __init__(self) -> None:
        super().__init__("logfmt")
        self.tail, self.broken = b"", False


def stage_file(con, path: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse a plain logfmt file into `staged` (runtime.stage_file: DirtyFile raised, False when its line endings
    mix)."""
    return runtime.stage_file(con, path, staged, "logfmt", _reader(keys, keep_raw), **_file_staging(keep_raw))


def _file_staging(keep_raw: bool) -> dict:
    """How a file's tokens are staged (stage_logfmt_tokens, each row without an envelope)."""
    return {"script": "stage_logfmt_tokens", "params": {"keep_raw": keep_raw}, "env": "mm_no_envelope()"}


@dataclass
class Streamed:
    cut_off: str | None  # the text of the last line when no newline ends it


def stage_gzipped(con, path: str, staged: str, keys_of: Callable[[str], list[list[bytes]] | None], *,
                  keep_raw: bool, folder: str | None) -> Streamed | None:
    """Parse a gzipped logfmt file into `staged` as it is decompressed: a chunk is tokenized while the next is
    decompressed (gzstream.gunzipped_chunks) and DuckDB types the one before. `keys_of` gives the keys from a
    plain file (in `folder`) holding the first lines, the sample the other paths read (None: not to be read
    this way). None when the caller must read a decompressed copy instead, which repairs, reads or refuses it
    by name: a damaged stream (`staged` then holds what came before the damage), a dirty file, mixed line
    endings, or a sample that cannot be read."""
    seen, chunks = _Seen(), gzstream.gunzipped_chunks(path)
    try:
        sample = sql.first_chunks(chunks)
        keys = sample and sql.keys_of_sample(sample, keys_of, folder)
        if not keys:
            return None
        spans = ((data, runtime.start_of(data) if index == 0 else 0, end) for index, (data, end)
                 in enumerate(itertools.chain(sample, chunks)))
        # the next chunk tokenized (GIL released) while DuckDB types this one
        results = runtime.read_ahead(_tracking_tail(spans, seen), _reader(keys, keep_raw))
        runtime.stage_results(con, staged, _unless_damaged(results, seen), seen, **_file_staging(keep_raw))
    except sources.GZIP_ERRORS:
        return None
    finally:
        chunks.close()
    if seen.broken or seen.dirty or seen.mixed_endings:
        return None
    return Streamed(repair.unfinished_text(seen.tail))


def read_gzipped(con, source: Source, staged: str, head: bytes, field_map: FieldMap, *, keep_raw: bool
                 ) -> Streamed | None:
    """A gzipped logfmt file read as it is decompressed (stage_gzipped), with the keys of its first lines; None when
    it is to be read through a decompressed copy instead (whatever went wrong: that path reports it)."""
    def keys_of(sample: str) -> list[list[bytes]] | None:
        try:
            sampled = sql.sampled_keys(con, Source(sample, source.label, False), head)
            keys = sql.tokenizer_keys(sampled, field_map)
        except Exception:  # noqa: BLE001 - DuckDB refuses a dirty sample: the copy is repaired
            return None
        return keys if fits(keys) else None

    try:
        return stage_gzipped(con, source.path, staged, keys_of, keep_raw=keep_raw, folder=sql.spill_folder(con))
    except Exception:  # noqa: BLE001 - whatever went wrong, the copy's path reports it (fail closed)
        return None


def _tracking_tail(spans: Iterator[tuple], seen: _Seen) -> Iterator[tuple]:
    for data, start, end in spans:
        seen.tail = bytes(memoryview(data)[max(0, end - repair.TAIL_BYTES):end])
        yield data, start, end


def _unless_damaged(results: Iterator, seen: _Seen) -> Iterator:
    """The tokenizer's results until the gzip stream under them turns out damaged (an error raised through DuckDB's
    reader would not keep its class)."""
    try:
        yield from results
    except sources.GZIP_ERRORS:
        seen.broken = True


def _reader(keys: list[list[bytes]], keep_raw: bool) -> Callable:
    """What the tokenizer makes of a span (buffer, start, end). A line's text comes only where it may be kept
    (keep_raw, or a line that may be skipped): moving every line's text into DuckDB cost more than tokenizing it."""
    def read(buffer, start: int, end: int) -> list:
        return _logfmt.tokenize(buffer, start, end, keys, runtime.THREADS, keep_raw)
    return read


# --- the inner lines of an envelope ------------------------------------------------------------------


def stage_lines(con, lines: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse the inner lines of an envelope (`lines`: the view or table of `line` and `env` that
    queries/envelopes.sql's envelope_flat_lines, envelope_lines or envelope_joined_lines made) into `staged`, each row
    keeping its envelope. DuckDB hands the tokenizer each vector of lines as an Arrow array, through a function of this
    connection called from its own threads, and gets the columns back as a struct beside the line and its
    `env` (runtime.line_tokens): nothing leaves DuckDB but the lines, and the rows stay aligned. False when a line is
    over the tokenizer's limit: the caller reads the lines through the SQL path then."""
    seen = runtime.Seen("logfmt")
    try:
        runtime.stage_lines(con, lines, staged, _lines_tokenized(keys, seen), script="stage_logfmt_tokens",
                            params={"keep_raw": keep_raw}, env="env")
    except Exception:
        if seen.dirty:  # raised by LongLine, wrapped by DuckDB
            return False
        raise
    return True


def _lines_tokenized(keys: list[list[bytes]], seen: runtime.Seen) -> Callable:
    """What the tokenizer makes of a vector of inner lines (count, data, offsets), as a batch."""
    def tokens(count: int, data, offsets):
        rows, flags, problem, cols, ts = _logfmt.tokenize_lines(data, offsets, keys)
        seen.flags |= flags
        if rows < count:
            raise LongLine("an inner line longer than the tokenizer takes")
        return runtime.batch(rows, problem, cols, ts)

    return tokens
