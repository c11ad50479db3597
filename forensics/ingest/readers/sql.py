"""The SQL path: which keys a file's lines hold (a sample of them), which keys feed which canonical field, and the
staging of a file's lines (or those inside its envelope) into typed rows by the SQL of queries/ingest*.sql, for the
three syntaxes (logfmt, JSON Lines, CSV). The CSV reader is this one; the logfmt and JSON Lines readers
(forensics.ingest.readers.logfmt, .jsonl) come here for their samples and where their compiled side does not take
a file. forensics.ingest.load picks the reader of each file."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import queries
from forensics.errors import InputError
from forensics.ingest.detect import csv_header, first_lines
from forensics.ingest.fields import ALIASES, CANONICAL, FieldMap
from forensics.ingest.readers.grammar import KEY_OF_PAIR_RE, KEY_RE
from forensics.ingest.readers.runtime import TEXT_COLUMNS
from forensics.ingest.sources import Source

# A line is read whole by giving DuckDB's CSV reader a delimiter no log contains.
LINE_DELIM = "\x1e\x1f\x1e\x1f"

ALL_ALIASES = tuple(alias for names in ALIASES.values() for alias in names)


def spill_folder(con) -> str | None:
    """DuckDB's temp folder (case.connect makes a private one, removed at exit) for our own copies."""
    [(folder,)] = queries.run(con, "spill_folder").fetchall()  # read to its end, as queries.one would
    return folder or None


def _first_of(values: list[queries.Fragment]) -> queries.Fragment | None:
    """The first non-NULL of a field's values (None when no key feeds the field)."""
    if not values:
        return None
    return values[0] if len(values) == 1 else queries.fragment("first_value", values=values)


def _text_column(value: queries.Fragment | None, column: str, template: str = "text_column") -> queries.Fragment:
    return queries.fragment(template, value=value or "NULL", column=column)


def logfmt_field(keys: list[str]) -> queries.Fragment | None:
    """One canonical field of a logfmt line: the first of its keys present on the line (keys a logfmt line can
    hold: _logfmt_keys leaves the others out)."""
    return _first_of([queries.fragment("logfmt_value", key=key, key_re=re.escape(key)) for key in keys])


def logfmt_field_with_fallback(common: list[str], rare: list[str]) -> queries.Fragment | None:
    """Keys seen in the sample always get a regex; the other aliases only on lines flagged `rare`."""
    primary, fallback = logfmt_field(common), logfmt_field(rare)
    if fallback is None:
        return primary
    guarded = queries.fragment("when_rare", value=fallback)
    return guarded if primary is None else queries.fragment("first_value", values=[primary, guarded])




def stage_logfmt(con, source: Source, staged: str, sampled: set[str], field_map: FieldMap, *, keep_raw: bool,
                 reader: str = "mm_lines") -> int:
    """logfmt lines into `staged` by regexes: the `sampled` keys get a regex each; every other alias of the
    vocabulary, and --field names, are tried only on lines where one regex says one of them occurs."""
    fields, rare_keys = logfmt_fields(sampled, field_map)
    pattern = r"\s(?:" + "|".join(re.escape(k) for k in rare_keys) + ")=" if rare_keys else "$^"
    queries.run(con, "stage_logfmt", {**lines_of(source), "rare_keys": pattern, "keep_raw": keep_raw},
                staged=staged, fields=fields, lines=reader)
    return 0


@dataclass(frozen=True)
class LogfmtKeys:
    """The keys of a logfmt file's sample, and per canonical field the keys the compiled tokenizer reads."""

    sampled: set[str]
    tokenized: list[list[bytes]]  # empty when the file is not for the tokenizer


def logfmt_keys(con, source: Source, head: bytes, field_map: FieldMap, *, reader: str = "mm_lines",
                tokenized: bool) -> LogfmtKeys:
    """The keys seen in a sample of a file's lines (`reader` mm_lines), or of the lines inside its envelope
    (mm_unwrapped), and its head; with `tokenized`, also the keys the compiled tokenizer is given. A plain file for
    the tokenizer is sampled from a copy of its first lines (sampled_head)."""
    def keys_of(sample: str) -> set[str]:
        return sampled_keys(con, Source(sample, source.label, False), head)

    seen = field_map.keys_seen
    if seen:  # a watch's later poll: the keys its polls have read so far, and those of this chunk's head
        sampled = seen | head_keys(head)
    else:
        sampled = sampled_head(source.path, keys_of, spill_folder(con)) if tokenized and reader == "mm_lines" else None
        sampled = sampled_keys(con, source, head, reader) if sampled is None else sampled
    if seen is not None:  # only the keys read as a field decide anything: a log of ever-new keys does not grow it
        seen.update(key for key in sampled if field_map.canonical_of(key))
    return LogfmtKeys(sampled, tokenizer_keys(sampled, field_map) if tokenized else [])


def head_keys(head: bytes) -> set[str]:
    """The keys of the key=value pairs of a file's first lines (its head's first 200)."""
    return {m.group(1) for line in first_lines(head, 200) for m in KEY_OF_PAIR_RE.finditer(line)}


def sampled_keys(con, source: Source, head: bytes, reader: str = "mm_lines") -> set[str]:
    return head_keys(head) | {row[0] for row in queries.run(con, "sample_logfmt_keys", lines_of(source),
                                                            lines=reader).fetchall()}


def tokenizer_keys(sampled: set[str], field_map: FieldMap) -> list[list[bytes]]:
    return [[key.encode("utf-8", "surrogateescape") for key in common + rare]
            for common, rare in _logfmt_keys(sampled, field_map)]


def logfmt_fields(sampled: set[str], field_map: FieldMap) -> tuple[list[queries.Fragment], list[str]]:
    """The text columns of a logfmt line (sampled keys first) and the keys looked for only on `rare` lines."""
    fields, rare_keys = [], []
    for (common, rare), (_canon, column) in zip(_logfmt_keys(sampled, field_map), TEXT_COLUMNS):
        rare_keys.extend(rare)
        fields.append(_text_column(logfmt_field_with_fallback(common, rare), column))
    return fields, rare_keys


def _logfmt_keys(sampled: set[str], field_map: FieldMap) -> list[tuple[list[str], list[str]]]:
    """Per canonical field, the keys that feed it: those seen in the sample, then the rare ones (the compiled
    tokenizer takes them in that order too; keys a logfmt line cannot hold are left out)."""
    resolved = field_map.resolve(sorted(set(ALL_ALIASES) | sampled | set(field_map.overrides.values())))
    return [([k for k in resolved[canon] if k in sampled and KEY_RE.fullmatch(k)],
             [k for k in resolved[canon] if k not in sampled and KEY_RE.fullmatch(k)])
            for canon in CANONICAL]


# --- the sample of a file's first lines -------------------------------------------------------------------

# sample_logfmt_keys reads the keys of a file's first lines (its LIMIT): the sample of a .gz holds as many.
SAMPLE_LINES = 20_000
SAMPLE_MOST = 64 * 2**20  # a sample that needs more bytes than this is read from a plain copy instead
SAMPLE_CHUNK = 2**20  # a plain file's head is read this much at a time until it holds the sample


def first_chunks(chunks: Iterator[tuple[bytes, int]]) -> list[tuple[bytes, int]] | None:
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
        sample = first_chunks(iter(lambda: _read_chunk(handle), None))
        return None if sample is None else keys_of_sample(sample, keys_of, folder)


def _read_chunk(handle) -> tuple[bytes, int] | None:
    data = handle.read(SAMPLE_CHUNK)
    return (data, len(data)) if data else None


def keys_of_sample(sample: list[tuple[bytes, int]], keys_of, folder: str | None):
    """`keys_of` a plain file (in `folder`, removed after) holding the chunks of `sample`."""
    handle = tempfile.NamedTemporaryFile(prefix="mailmortem-sample-", suffix=".log", dir=folder, delete=False)
    try:
        with handle:
            for data, end in sample:
                handle.write(memoryview(data)[:end])
        return keys_of(handle.name)
    finally:
        os.unlink(handle.name)


def pick_columns(keys: list[str], field_map: FieldMap, rare: list[str] = (),
                 template: str = "text_column") -> list[queries.Fragment]:
    """Each canonical field as the first non-blank value among its keys: a key of `keys` at its position
    in `vals`, a key of `rare` at its position in `rare_vals` (`template`: text_column, or deferred_text_column
    for the lines the compiled JSON Lines reader leaves to SQL)."""
    resolved = field_map.resolve([*keys, *rare])

    def value(key: str) -> queries.Fragment:
        if key in keys:
            return queries.fragment("pick_value", at=keys.index(key) + 1)
        return queries.fragment("pick_rare_value", at=rare.index(key) + 1)

    return [_text_column(_first_of([value(key) for key in resolved[canon]]), column, template)
            for canon, column in TEXT_COLUMNS]


def stage_jsonl(con, source: Source, staged: str, keys: tuple[list[str], list[str]], field_map: FieldMap, *,
                params: dict, reader: str = "mm_lines") -> int:
    """JSON Lines into `staged` by json_extract_string: `keys` the sampled paths and the rare keys, `params`
    stage_jsonl's (jsonl_keys)."""
    queries.run(con, "stage_jsonl", {**lines_of(source), **params}, staged=staged,
                picks=pick_columns(keys[0], field_map, keys[1]), lines=reader)
    return 0


def jsonl_keys(con, source: Source, field_map: FieldMap, keep_raw: bool, reader: str
               ) -> tuple[list[str], list[str], dict]:
    """(keys, rare keys, stage_jsonl's params) of JSON Lines: paths seen among the first lines are read on every
    line; every other top-level alias of the vocabulary (a key that first appears late in the file) only where
    one regex finds it."""
    # fetched to the end: DuckDB refuses to register the compiled reader's stream beside an unfinished result
    [(structure,)] = queries.run(con, "json_structure", lines_of(source), lines=reader).fetchall()
    seen = _json_paths(json.loads(structure) if structure else {})
    keys = [k for k in seen if field_map.canonical_of(k)]
    # an alias that is an object in the sample (ECS's `event`, `email`, `host`) is not looked for as a value: its
    # text would shadow the paths under it (`event.action`, `email.to.address`)
    objects = {".".join(parts[:end]) for parts in (path.split(".") for path in seen) for end in range(1, len(parts))}
    rare = [k for k in dict.fromkeys([*ALL_ALIASES, *field_map.overrides.values()])
            if k not in seen and k not in objects and '"' not in k and field_map.canonical_of(k)]
    pattern = '"(?:' + "|".join(re.escape(k) for k in rare) + r')"\s*:' if rare else "$^"
    return keys, rare, {"paths": _json_path_texts(keys), "rare_paths": _json_path_texts(rare),
                        "rare_keys": pattern, "keep_raw": keep_raw}


def _json_path_texts(keys: list[str]) -> list[str]:
    return ["$" + "".join("." + json.dumps(part) for part in key.split(".")) for key in keys]


def _json_paths(structure, prefix: str = "") -> list[str]:
    """Leaf dotted paths of a json_group_structure result (arrays are kept as one value)."""
    if not isinstance(structure, dict):
        return [prefix] if prefix else []
    paths: list[str] = []
    for key, sub in structure.items():
        if '"' in key or "." in key:
            continue  # not addressable as a dotted path; the raw line still holds it
        paths.extend(_json_paths(sub, f"{prefix}.{key}" if prefix else key))
    return paths


def read_csv(con, source: Source, staged: str, head: bytes, field_map: FieldMap, *, keep_raw: bool,
             compiled: bool = False, reader: str = "mm_lines") -> int:
    """The CSV reader: a file's rows after its header into `staged`; the header's line. There is no compiled CSV
    reader (`compiled` is never true: runtime.compiled("csv"))."""
    found = csv_header(head)
    if found is None:
        raise InputError(f"{source.label}: CSV file without a header row")
    header_line, keys = found
    queries.run(con, "stage_csv", {**lines_of(source), "keys": keys, "keep_raw": keep_raw},
                staged=staged, picks=pick_columns(keys, field_map))
    return header_line


def lines_of(source: Source) -> dict:
    return {"path": source.path, "delim": LINE_DELIM}

