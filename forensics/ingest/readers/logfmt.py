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
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import queries
from forensics.ingest import gzstream, sources
from forensics.ingest.fields import FieldMap
from forensics.ingest.readers import runtime, sql
from forensics.ingest.readers.runtime import DirtyFile, LongLine
from forensics.ingest.sources import Source

_logfmt = runtime.BUILT["logfmt"]

def read(con, source: Source, staged: str, head: bytes, field_map: FieldMap, *, keep_raw: bool,
         reader: str = "mm_lines") -> int:
    """A file's logfmt lines (`reader` mm_lines), or those inside its envelope (mm_unwrapped: `source.path` names
    their table), into `staged`: by the compiled tokenizer where it takes them, else by the SQL path. Keys seen in a
    sample of the file (and its head) are read on every line; every other alias of the vocabulary, and --field
    names, only on lines where one regex says one of them occurs. The header's line: 0 (logfmt has none)."""
    tokenized = isinstance(source.path, str) and runtime.compiled("logfmt")  # a file, or the lines in an envelope
    sampled = _head_sampled_keys(con, source, head) if tokenized and reader == "mm_lines" else None
    if sampled is None:
        sampled = sql.sampled_keys(con, source, head, reader)
    if tokenized:
        keys = sql.tokenizer_keys(sampled, field_map)
        stage = stage_lines if reader == "mm_unwrapped" else stage_file
        if fits(keys) and stage(con, source.path, staged, keys, keep_raw):
            return 0
        queries.run(con, "drop_staged", staged=staged)  # more keys than the tokenizer takes: read by SQL
    return sql.stage_logfmt(con, source, staged, sampled, field_map, keep_raw=keep_raw, reader=reader)


def _head_sampled_keys(con, source: Source, head: bytes) -> set[str] | None:
    """The keys of a plain file's first lines, from a copy of its head (None: read them from the file)."""
    def keys_of(sample: str) -> set[str]:
        return sql.sampled_keys(con, Source(sample, source.label, False), head)

    return sampled_head(source.path, keys_of, sql.spill_folder(con))


def fits(keys: list[list[bytes]]) -> bool:
    """Whether the C module takes this many keys (a file with hundreds of spellings of one key does not)."""
    return (sum(map(len, keys)) <= _logfmt.MAX_KEYS
            and all(len(field) <= _logfmt.MAX_FIELD_KEYS for field in keys))


@dataclass
class _Seen:
    flags: int = 0
    tail: bytes = b""  # the last bytes tokenized (of a gzip stream: where a cut-off last line is found)
    broken: bool = False  # a gzip stream turned out damaged or truncated

    @property
    def mixed_endings(self) -> bool:
        return bool(self.flags & _logfmt.CRLF and self.flags & _logfmt.LONE)


def stage_file(con, path: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse a plain logfmt file into `staged`. False when its line endings mix CRLF with bare CR or LF, which
    the caller then reads through the SQL path. load._stage reads such a file from a copy with LF endings
    (sources.line_ended_copy), so this never happens there: the check keeps a mix from being split any other way."""
    seen = _Seen()
    _into_staged(con, staged, _file_batches(path, keys, seen, keep_raw), keep_raw)
    if seen.flags & _logfmt.DIRTY:
        raise DirtyFile("invalid utf-8 or line size over the limit")
    return not seen.mixed_endings


# sample_logfmt_keys reads the keys of a file's first lines (its LIMIT): the sample of a .gz holds as many.
SAMPLE_LINES = 20_000
SAMPLE_MOST = 64 * 2**20  # a sample that needs more bytes than this is read from a plain copy instead
SAMPLE_CHUNK = 2**20  # a plain file's head is read this much at a time until it holds the sample


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
        sample = _first_chunks(chunks)
        keys = sample and _sample_keys(sample, keys_of, folder)
        if not keys:
            return None
        spans = ((data, runtime.start_of(data) if index == 0 else 0, end) for index, (data, end)
                 in enumerate(itertools.chain(sample, chunks)))
        _into_staged(con, staged, _unless_damaged(_tokenized(_tracking_tail(spans, seen), keys, seen, keep_raw),
                                                      seen), keep_raw)
    except sources.GZIP_ERRORS:
        return None
    finally:
        chunks.close()
    if seen.broken or seen.flags & _logfmt.DIRTY or seen.mixed_endings:
        return None
    return Streamed(sources.unfinished_text(seen.tail))


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


def _first_chunks(chunks: Iterator[tuple[bytes, int]]) -> list[tuple[bytes, int]] | None:
    """The first chunks: enough to hold SAMPLE_LINES line ends, or the whole file (None past SAMPLE_MOST)."""
    taken, ends, size = [], 0, 0
    while ends < SAMPLE_LINES and (chunk := next(chunks, None)):
        data, end = chunk
        taken.append(chunk)
        ends += max(data.count(b"\n", 0, end), data.count(b"\r", 0, end))  # LF or CRLF, or CR alone
        size += end
        if size > SAMPLE_MOST:
            return None
    return taken


def sampled_head(path: str, keys_of: Callable[[str], set[str]], folder: str | None) -> set[str] | None:
    """`keys_of` a plain file (in `folder`) holding a plain file's first SAMPLE_LINES lines, as the gzip path
    samples: DuckDB's reader asked for the first lines of the whole file cost a second at 1M lines. None when
    those lines need more than SAMPLE_MOST bytes (the caller samples the file itself)."""
    with open(path, "rb") as handle:
        sample = _first_chunks(iter(lambda: _read_chunk(handle), None))
        return None if sample is None else _sample_keys(sample, keys_of, folder)


def _read_chunk(handle) -> tuple[bytes, int] | None:
    data = handle.read(SAMPLE_CHUNK)
    return (data, len(data)) if data else None


def _sample_keys(sample: list[tuple[bytes, int]], keys_of, folder: str | None):
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-sample-", suffix=".log", dir=folder, delete=False)
    try:
        with handle:
            for data, end in sample:
                handle.write(memoryview(data)[:end])
        return keys_of(handle.name)
    finally:
        os.unlink(handle.name)


def _tracking_tail(spans: Iterator[tuple], seen: _Seen) -> Iterator[tuple]:
    for data, start, end in spans:
        seen.tail = bytes(memoryview(data)[max(0, end - sources.TAIL_BYTES):end])
        yield data, start, end


def _unless_damaged(batches: Iterator, seen: _Seen) -> Iterator:
    """The batches until the gzip stream under them turns out damaged (an error raised through DuckDB's
    reader would not keep its class)."""
    try:
        yield from batches
    except sources.GZIP_ERRORS:
        seen.broken = True


def _into_staged(con, staged: str, batches: Iterator, keep_raw: bool) -> None:
    runtime.into_staged(con, staged, runtime.schema(), batches, script="stage_logfmt_tokens",
                        params={"keep_raw": keep_raw}, env="mm_no_envelope()")


def _file_batches(path: str, keys: list[list[bytes]], seen: _Seen, keep_raw: bool) -> Iterator:
    """A plain file's Arrow batches, range by range (mapped_ranges)."""
    return _batches(runtime.mapped_ranges(path, _reader(keys, keep_raw)), seen)


def _tokenized(spans: Iterator[tuple], keys: list[list[bytes]], seen: _Seen, keep_raw: bool) -> Iterator:
    """The Arrow batches of each span (buffer, start, end) in turn, the next span tokenized (GIL released) while
    DuckDB types this one; stops at a dirty span or once line endings are mixed (the file is then read again:
    repaired, or by the SQL path). A line's text comes only where it may be kept (keep_raw, or a line that may
    be skipped): moving every line's text into DuckDB cost more than tokenizing it."""
    return _batches(runtime.read_ahead(spans, _reader(keys, keep_raw)), seen)


def _reader(keys: list[list[bytes]], keep_raw: bool) -> Callable:
    def read(buffer, start: int, end: int) -> list:
        return _logfmt.tokenize(buffer, start, end, keys, runtime.THREADS, keep_raw)
    return read


def _batches(results: Iterator[list], seen: _Seen) -> Iterator:
    for tokens in results:
        for rows, flags, problem, cols, ts in tokens:
            seen.flags |= flags
            if flags & _logfmt.DIRTY or seen.mixed_endings:  # either way the caller reads the file again
                return
            if rows:
                yield runtime.batch(rows, problem, cols, ts)


# --- the inner lines of an envelope ------------------------------------------------------------------


def stage_lines(con, lines: str, staged: str, keys: list[list[bytes]], keep_raw: bool) -> bool:
    """Parse the inner lines of an envelope (`lines`: the view or table of `line` and `env` that
    queries/envelopes.sql's envelope_flat_lines, envelope_lines or envelope_joined_lines made) into `staged`, each row
    keeping its envelope. DuckDB hands the tokenizer each vector of lines as an Arrow array, through a function of this
    connection called from its own threads, and gets the columns back as a struct beside the line and its
    `env` (runtime.line_tokens): nothing leaves DuckDB but the lines, and the rows stay aligned. False when a line is
    over the tokenizer's limit: the caller reads the lines through the SQL path then."""
    seen = _Seen()
    try:
        with runtime.line_tokens(con, lines, staged, _lines_tokenized(keys, seen)) as tokens:
            queries.script(con, "stage_logfmt_tokens", {"keep_raw": keep_raw}, staged=staged, tokens=tokens,
                           env="env")
    except Exception:
        if seen.flags & _logfmt.DIRTY:  # raised by LongLine, wrapped by DuckDB
            return False
        raise
    return True


def _lines_tokenized(keys: list[list[bytes]], seen: _Seen) -> Callable:
    """What the tokenizer makes of a vector of inner lines (count, data, offsets), as a batch."""
    def tokens(count: int, data, offsets):
        rows, flags, problem, cols, ts = _logfmt.tokenize_lines(data, offsets, keys)
        seen.flags |= flags
        if rows < count:
            raise LongLine("an inner line longer than the tokenizer takes")
        return runtime.batch(rows, problem, cols, ts)

    return tokens
