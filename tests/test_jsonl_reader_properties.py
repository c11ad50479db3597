"""The compiled JSON Lines reader reads every file as the SQL path does: the same events, the same skips (line
numbers, reasons, text), the same file summaries and every staged column, whatever the lines hold."""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError
from forensics.ingest.readers import jsonl, logfmt, runtime
from tests.test_tokenizer_properties import (ENDINGS, READ_EVERY_WAY, of_any_file, read, skipped_too_long,
                                             too_long_lines, too_long_over)

needs_c = pytest.mark.skipif(jsonl._jsonl is None, reason="the compiled JSON Lines reader was not built")

KEYS = ["timestamp", "ts", "time", "evt", "event", "email", "to", "recipient", "messageid", "msg_id", "agent",
        "worker", "status", "attempt", "count", "campaign", "step", "error", "ttl", "x", "é", "a.b", "Email"]
ODD_KEYS = ["", "\\u0074o", "msg\\u005fid", "from"]  # escaped keys, and one that only appears nested (rare)
NESTED_KEYS = ["meta", "mail", "ctx"]
# string contents, raw JSON text: escapes of every kind, unicode spaces, quotes; and now and then one that is
# not valid JSON or that the compiled reader leaves to SQL
PIECES = ["a", "B", "7", " ", "@", ".", "<", ">", "é", "\u00a0", "\u3000", "\u2000", "\ufeff", "\u2028", "\\\"",
          "\\\\", "\\/", "\\n", "\\t", "\\r", "\\b", "\\f", "\\u00e9", "\\u00A0", "\\u0041", "\\u3000",
          '\\"key\\": ', "send", "2026-11-28T09:00:00Z", "a@b.co", "<m1@x>", "A@B.CO "]
ODD_PIECES = ["\\u0000", "\\ud83d\\ude00", "\\ud800", "\\udc00x", "\\x", "\\u12", "\t", "\x01"]
NUMBER_FORMS = ["0", "-0", "12", "-5", "007", "1.5", "1.50", "-0.0", "1e5", "1E-2", "2.5e+3", "1.",
                ".5", "-", "123456789012345678", "1234567890123456789", "12345678901234567890",
                "1" * 320, "1764320400", "1764320400123", "NaN", "Infinity", "+1", "-12", "0.0", "1.0e0"]
CLEAN_NUMBERS = ["0", "12", "-5", "123456789012345678", "1764320400", "-12", "-0", "1.50", "1e5"]  # the last 3: left to SQL
LITERALS = ["true", "false", "null", "nul", "True", "'x'"]


def _object(members: list[tuple[str, str]], gaps: list[str]) -> str:
    inner = ",".join(f'{gaps[0]}"{key}"{gaps[1]}:{gaps[2]}{value}{gaps[3]}' for key, value in members)
    return "{" + inner + "}"


def _strategies(clean: bool) -> tuple:
    """(key, scalar, space, value) of a line: a clean line holds only what the compiled reader reads itself."""
    pieces = st.sampled_from(PIECES) if clean else st.one_of(st.sampled_from(PIECES), st.sampled_from(ODD_PIECES))
    string = st.lists(pieces, max_size=6).map(lambda parts: '"' + "".join(parts) + '"')
    number = st.sampled_from(CLEAN_NUMBERS if clean else NUMBER_FORMS)
    scalar = st.one_of(string, string, number, st.sampled_from(LITERALS[:3] if clean else LITERALS))
    space = st.sampled_from(["", " ", "  ", "\t"] if clean else ["", " ", "\t", "\u00a0", "\x0c"])
    key = st.sampled_from(KEYS + NESTED_KEYS + ([] if clean else ODD_KEYS))

    def members(children):
        """An object's members: on a clean line each key once, objects and arrays only under the nested keys."""
        if not clean:
            return st.lists(st.tuples(key, children), max_size=6)
        member = st.one_of(st.tuples(st.sampled_from(KEYS), scalar), st.tuples(st.sampled_from(NESTED_KEYS), children))
        return st.lists(member, max_size=6, unique_by=lambda kv: kv[0])

    def container(children):
        return st.one_of(st.builds(_object, members(children), st.lists(space, min_size=4, max_size=4)),
                         st.lists(children, max_size=3).map(lambda items: "[" + ",".join(items) + "]"))

    value = st.recursive(scalar, container, max_leaves=6)
    return members(value), scalar, space, value


CLEAN, ANY = _strategies(True), _strategies(False)
RECORD = {"timestamp": '"2026-11-28T09:00:00Z"', "evt": '"email_sent"', "email": '"p@x.co"', "messageid": '"<m@x>"'}
# a record's time, recipient and msg_id, typed by the compiled reader on the lines it reads: zones and offsets
# (read in C), no zone or odd forms (left to mm_ts); addresses and msg_ids that normalisation changes
TYPED = {"timestamp": ["2026-11-28T09:00:00Z", "2026-11-28 09:00:00.5+05:30", "2026-11-28T09:00:00.123456-08:00",
                       "2026-11-28T09:00:00", "2026-11-28 09:00:00.1234567Z", "2026-02-30T09:00:00Z",
                       "2026-11-28T23:59:59+14:00", " 2026-11-28T09:00:00Z", "1764320400", "2026-11-28"],
         "email": ["P@X.Co", " p@x.co\u00a0", "\u3000<Ann@X.CO> ", "Ann <a@b.co>", "<>", "\u2028", "a@b.co>",
                   "\ufeffQ@x.co", "x <\t B@C.co\u2000>", "é@X.co"],
         "messageid": ["<m1@x>", " < m2@x > ", "<>", "\u3000", "m3", "<<m4>>", "\u00a0<m5@X>\u00a0", "<m6"]}


def _typed_value(draw, key: str) -> str:
    """One of TYPED[key] as a JSON string, its non-ASCII escaped or not."""
    return json.dumps(draw(st.sampled_from(TYPED[key])), ensure_ascii=draw(st.booleans()))


@st.composite
def json_line(draw) -> bytes:
    kind = draw(st.sampled_from(["object"] * 8 + ["blank", "spaces", "junk", "bytes", "value", "broken"]))
    if kind == "blank":
        return b""
    if kind == "spaces":
        return draw(st.sampled_from([" ", "   ", " \t ", "\t", "\u00a0", "\u3000 "])).encode()
    if kind == "junk":
        return draw(st.sampled_from(["not json", "ts=2026-11-28T09:00:00Z event=send", "{", "}", "{}x", "[]"])).encode()
    if kind == "bytes":  # invalid UTF-8 and control bytes: the file is repaired first, on both paths
        return draw(st.binary(min_size=1, max_size=20)).replace(b"\n", b"").replace(b"\r", b"")
    members, scalar, space, json_value = CLEAN if draw(st.integers(0, 2)) else ANY
    if kind == "value":
        return draw(json_value).encode()
    members = draw(members)
    if draw(st.integers(0, 3)):  # most lines are records, so that their fields are compared too
        at = draw(st.integers(0, len(members)))
        members[at:at] = [(k, _typed_value(draw, k) if k in TYPED and draw(st.booleans()) else v)
                          for k, v in RECORD.items() if draw(st.integers(0, 5)) and k not in dict(members)]
        # and a text field kept as read (numbers, strings and literals show there as DuckDB prints them)
        field = draw(st.sampled_from(["error", "status", "agent"]))
        if field not in dict(members):
            members.insert(draw(st.integers(0, len(members))), (field, draw(scalar)))
    if members and draw(st.integers(0, 4)) == 0:  # a key twice (DuckDB reads the first)
        members.insert(draw(st.integers(0, len(members))), (draw(st.sampled_from(members))[0], draw(scalar)))
    if draw(st.booleans()) and "meta" not in dict(members):  # nested records, read through dotted paths
        members.append(("meta", _object([(k, draw(scalar)) for k in draw(st.sets(st.sampled_from(KEYS)))],
                                        [""] * 4)))
    line = draw(space) + _object(members, [draw(space) for _ in range(4)]) + draw(space)
    if kind == "broken":
        line = draw(st.sampled_from([line[:-1], line + ",", line.replace("}", ",}", 1), line + "{}",
                                     line.replace(":", "=", 1), "\ufeff" + line, line.replace('"', "'", 2)]))
    return line.encode()


FIRST = ("{" + ", ".join(f'"{k}": {v}' for k, v in RECORD.items()) + "}").encode()  # detected as JSON Lines


@st.composite
def jsonl_file(draw) -> bytes:
    """Lines with line endings of one style or mixed, perhaps no final newline, perhaps a byte-order mark."""
    ending = st.sampled_from(ENDINGS[draw(st.sampled_from(sorted(ENDINGS)))])
    body = b"".join(line + draw(ending) for line in [FIRST, *draw(st.lists(json_line(), min_size=1, max_size=25))])
    cut_off, bom = draw(st.booleans()), draw(st.integers(0, 5)) == 0
    return (b"\xef\xbb\xbf" if bom else b"") + (body.rstrip(b"\r\n") if cut_off else body)


def assert_same(body: bytes, gz: bool = False, range_bytes: int = runtime.RANGE_BYTES) -> tuple:
    """The file read by both parsers (gzipped: from its decompressed copy) gives the same events, skips, file
    summaries and staged rows."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("case.jsonl.gz" if gz else "case.jsonl")
        path.write_bytes(gzip.compress(body) if gz else body)
        sql, compiled = read(path, "sql"), read(path, "c", range_bytes)
    for at, part in enumerate(["events", "skips", "file summaries", "staged rows"]):
        assert compiled[at] == sql[at], f"{part} differ"
    return compiled


@needs_c
@of_any_file(jsonl_file())
def test_compiled_and_sql_paths_read_any_json_lines_alike(body, gz, range_bytes):
    assert_same(body, gz, range_bytes)


def _codes(body: bytes, keys: list[str], rare: list[str] = ()) -> list[int]:
    """The compiled reader's code for each line of `body` (0 read, 1 blank, 2 deferred to SQL)."""
    from forensics.ingest.fields import FieldMap

    plan = jsonl.plan(keys, list(rare), FieldMap())
    batches = jsonl._jsonl.read(body, 0, len(body), plan.paths, plan.always, plan.fields, plan.rare, 1)
    return [code for _rows, _flags, codes, _cols, _ts in batches for code in codes]


@needs_c
def test_the_common_lines_are_read_in_c_and_the_doubtful_ones_left_to_sql():
    common = [b'{"ts": "2026-11-28T09:00:00Z", "evt": "send", "email": "a\\u00e9\\"b\\\\c\\/d\\n@x.co", "attempt": 12}',
              b'{"meta": {"to": "p@x.co"}, "ts": 5, "x": [1, {"y": 2.5}], "evt": null, "email": true}',
              b'{"from": "rare", "x": [{"from": 1}]}', b"  "]
    doubtful = [b'{"attempt": 1.5}', b'{"attempt": -0}', b'{"x": 1e5}', b'{"email": {"a": 1}}', b'{"email": [1]}',
                b'{"evt": "a", "evt": "b"}', b'{"t\\u006f": "p@x.co"}', b'{"x": "\\ud83d\\ude00"}', b'{"email": "a\\u0000"}',
                b'{"a": 1,}', b'{"a": NaN}', b"[1, 2]", b"not json", b'{"from": {"rare": 1}}', b'{"x": [{"from": 1e3}]}']
    codes = _codes(b"\n".join(common + doubtful) + b"\n", ["ts", "evt", "email", "attempt", "meta.to"], ["from"])
    assert codes == [0, 0, 0, 1] + [2] * len(doubtful)


@pytest.mark.slow
@needs_c
def test_escapes_numbers_nesting_and_skips_read_alike():
    lines = ['{"timestamp": "2026-11-28T09:00:00Z", "evt": "email_sent", "email": "A\\u00e9@B.co ", "messageid": "<m1@x>"}',
             '{"timestamp": "2026-11-28T09:00:01Z", "evt": "email_sent", "email": "\\t b@c.co", "messageid": 123}',
             '{"timestamp": 1764320400.5, "evt": "email_sent", "email": "c@c.co", "messageid": "m3", "attempt": 2.0}',
             '{"timestamp": "2026-11-28T09:00:02Z", "evt": "send", "meta": {"email": "d@c.co"}, "messageid": "m4"}',
             '', '  ', '[1]', '{"evt": "send",}', '{"timestamp": "nope", "evt": "send", "messageid": "m5"}',
             '{"timestamp": "2026-11-28T09:00:03Z", "evt": "send", "email": "e@c.co", "messageid": "m6", "to": [1]}',
             '{"timestamp": "2026-11-28T09:00:04Z", "evt": "send", "evt": "claim", "email": "f@c.co", "messageid": "m7"}']
    events, skipped, _, _ = assert_same(("\n".join(lines) + "\n").encode())
    assert [(row[0], row[2]) for row in events] == [(n, "send") for n in (1, 2, 3, 4, 10, 11)] and [row[:2] for row in skipped] == [
        (5, "blank line"), (6, "blank line"), (7, "JSON but not an object"), (8, "no readable timestamp"),
        (9, "no readable timestamp")]  # DuckDB reads a trailing comma


@pytest.mark.slow
@needs_c
def test_every_number_string_and_literal_reads_as_duckdb_prints_it():
    values = [*NUMBER_FORMS, *(f'"{piece}"' for piece in PIECES), '" "', '""', '"\\u3000"', "true", "false", "null"]
    lines = ['{"timestamp": "2026-11-28T09:00:00Z", "evt": "email_sent", "messageid": "m", "error": %s, "status": '
             '%s, "x": {"y": %s}}' % (value, value, value) for value in values]
    assert_same(("\n".join(lines) + "\n").encode())


@needs_c
@pytest.mark.slow
@settings(READ_EVERY_WAY, max_examples=20)
@given(jsonl_file(), st.integers(60, 400), st.sampled_from([64, 300, runtime.RANGE_BYTES]))
def test_lines_too_long_to_read_are_skipped_alike_each_at_its_number(body, longest, range_bytes):
    with too_long_over(longest):
        compiled = assert_same(body, range_bytes=range_bytes)
    assert skipped_too_long(compiled) in (None, too_long_lines(body, longest))


@pytest.mark.slow
@needs_c
def test_ranges_and_threads_keep_every_line_number():
    lines = [json.dumps({"timestamp": f"2026-11-28T09:00:{n % 60:02d}Z", "evt": "email_sent", "agent": f"w{n % 7}",
                         "email": f"p{n}@x.co", "messageid": f"m{n}"}) if n % 13 else "not a record" for n in range(5000)]
    events, skipped, _, _ = assert_same(("\n".join(lines) + "\n").encode(), range_bytes=10_000)
    assert [row[0] for row in skipped] == [n + 1 for n in range(0, 5000, 13)]
    assert events[-1][0] == 5000


@pytest.mark.slow
@needs_c
def test_mixed_line_endings_and_invalid_utf8_are_read_alike():
    record = '{{"timestamp": "2026-11-28T09:00:0{}Z", "evt": "email_sent", "email": "a@b.co", "messageid": "m{}"}}'
    assert_same(b"\r\n".join(record.format(n, n).encode() for n in range(2)) + b"\r" + record.format(3, 3).encode())
    _, _, [summary], _ = assert_same(record.format(1, 1).encode() + b"\n"
                                     + record.format(2, 2).replace("a@b", "\xff").encode("latin-1") + b"\n")
    assert summary[-1].startswith("utf-8 (repaired")


@needs_c
@pytest.mark.parametrize("choice, built, named", [("", True, "C (forensics.ingest.readers._jsonl)"),
                                                  ("sql", True, "SQL (MAILMORTEM_PARSER=sql)"),
                                                  ("", False, "SQL (no compiled reader)")])
def test_version_names_the_json_lines_parser_beside_the_logfmt_one(monkeypatch, choice, built, named):
    from click.testing import CliRunner

    from mailmortem.cli import main

    monkeypatch.setenv(runtime.ENV, choice)
    if not built:
        monkeypatch.setitem(runtime.BUILT, "jsonl", None)
    shown = CliRunner().invoke(main, ["--version"]).output.splitlines()
    assert shown[-2].startswith("parser: ") and shown[-1] == f"JSON Lines parser: {named}"
    assert runtime.compiled("jsonl") == named.startswith("C")


def test_c_is_refused_without_the_compiled_json_lines_reader(monkeypatch):
    monkeypatch.setenv(runtime.ENV, "c")
    monkeypatch.setitem(runtime.BUILT, "jsonl", None)
    with pytest.raises(ConfigError, match="forensics.ingest.readers._jsonl"):
        runtime.compiled("jsonl")


def test_the_sql_switch_reads_json_lines_through_sql(monkeypatch, tmp_path):
    """MAILMORTEM_PARSER=sql (how .ci/run reruns the ingest tests) reads JSON Lines without the compiled reader."""
    monkeypatch.setenv(runtime.ENV, "sql")
    assert not runtime.compiled("jsonl")
    path = tmp_path / "case.jsonl"
    path.write_text('{"timestamp": "2026-11-28T09:00:00Z", "evt": "email_sent", "email": "a@b.co", "messageid": "m"}\n')
    monkeypatch.setitem(runtime.BUILT, "jsonl", None)  # would fail if it were used
    assert read(path, "sql")[0][0][0] == 1
    assert runtime.describe("jsonl").startswith("SQL")


@pytest.mark.slow
@needs_c
@pytest.mark.parametrize("gz", [False, True])
def test_a_dirty_byte_after_a_bare_cr_in_a_crlf_file_reads_as_on_the_sql_path(gz):
    # see the logfmt test of the same name: first found by the property above
    assert_same(b"\xef\xbb\xbf" + FIRST + b"\r\n\n{}\r\x80\n{}\n{}\n", gz, 64)
    assert_same(FIRST + b"\r\n{}\r\x80\r\n" + FIRST + b"\r\n", gz)
