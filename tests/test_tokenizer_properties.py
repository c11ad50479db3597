"""The compiled logfmt tokenizer reads every file as the SQL path does: the same events, the same skips (line
numbers, reasons, text) and the same file summaries, whatever the lines hold."""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError, MailmortemError
from forensics.ingest import repair
from forensics.ingest.readers import logfmt, runtime
from forensics.ingest.case import load_case

needs_c = pytest.mark.skipif(logfmt._logfmt is None, reason="the compiled tokenizer was not built")

# the vocabulary's longest alias and its near misses too: the tokenizer gives up a run longer than its longest key
KEYS = ["ts", "time", "event", "evt", "email", "Email", "to", "msg_id", "message-id", "worker", "host", "lease",
        "attempt", "count", "status", "campaign", "step", "error", "x", "k", "é", "visibility_timeout",
        "visibility_timeouts", "visibility_timeou"]
HOSTILE = st.sampled_from(["a", "b", "7", " ", "\t", '"', "\\", "=", "é", "\x0b", "\x0c", "<", ">", "@", ".", "-",
                           ":", "\u00a0", "\ufeff", "x=1", ' k="', '\\"', "\\\\", "A", "Z", "Ä", "\u0301", "\x85",
                           "\u1680", "\u2000", "\u200b", "\u2028", "\u202f", "\u3000", "<a@B.co>"])
text = st.lists(HOSTILE, max_size=12).map("".join)
inside_quotes = st.lists(st.sampled_from(["a", " ", "\t", '\\"', "\\\\", "\\", " k=v", ' x="y', "é", "=", '"']),
                         max_size=10).map("".join)
quoted = st.one_of(text, inside_quotes).map(lambda t: '"' + t + '"')


def _two(low: int, high: int):
    return st.integers(low, high).map(lambda n: f"{n:02d}")


# ISO timestamps, valid or nearly (the compiled tokenizer types the common forms with a zone itself, SQL the rest)
iso_timestamp = st.builds(
    "{}-{}-{}{}{}:{}:{}{}{}".format, st.sampled_from(["2026", "2024", "1970", "1900", "0001", "9999", "0000"]),
    _two(0, 13), _two(0, 32), st.sampled_from(["T", " ", "t"]), _two(0, 24), _two(0, 60), _two(0, 61),
    st.sampled_from(["", ".5", ".123", ".123456", ".1234567", ".", ",5"]),
    st.one_of(st.sampled_from(["Z", "", "z", "+00:00", "-00:00", "+0100", "+01", " Z", "Z "]),
              st.builds("{}{}:{}".format, st.sampled_from("+-"), _two(0, 25), _two(0, 60))))
# msg_ids and addresses in brackets, with the spaces each normaliser trims (or does not) around and inside
around = st.sampled_from(["", "", "\u00a0", "\u3000", "\u2000", "\u200b", "\u2028", "\t", "\ufeff", " "])
bracketed = st.builds("{}<{}{}{}>{}".format, around, around, text, around, around)
value = st.one_of(text, quoted, iso_timestamp, bracketed, bracketed.map(lambda b: '"' + b + '"'), st.sampled_from(["send", "sent", "claim", "2026-11-28T09:00:00Z",
                                                                "1764320400", "30s", "<m@x>", "a@b.co", "A@B.CO",
                                                                "ok", "failed", ""]))
pair = st.tuples(st.sampled_from(KEYS), value).map(lambda kv: f"{kv[0]}={kv[1]}")
separator = st.sampled_from([" ", " ", "  ", "\t", "", " \t"])
leading = st.one_of(
    st.sampled_from(["", "2026-11-28T09:00:00Z ", "2026-11-28T09:00:00Z ", "2026-11-28T09:00:00Z ",
                     " 2026-11-28 09:00:00.5+01:00\t", "2026-11-28T09:00:00Z", "2026-02-30T09:00:00Z ",
                     "2026-11-28T09:00Zx ", "2026-11-28T09:00:00-05 "]),
    iso_timestamp.map(lambda ts: ts + " "), iso_timestamp.map(lambda ts: ts + " "))


@st.composite
def logfmt_line(draw) -> bytes:
    kind = draw(st.sampled_from(["pairs"] * 6 + ["blank", "spaces", "junk", "bytes"]))
    if kind == "blank":
        return b""
    if kind == "spaces":
        return draw(st.sampled_from([b" ", b"   ", b" \t ", b"\x0b"]))
    if kind == "junk":
        return draw(text).encode()
    if kind == "bytes":  # invalid UTF-8 and control bytes: the file is repaired first, on both paths
        return draw(st.binary(min_size=1, max_size=20)).replace(b"\x00", b"").replace(b"\n", b"").replace(b"\r", b"")
    pairs = draw(st.lists(st.tuples(separator, pair), max_size=8))
    if draw(st.integers(0, 3)):  # most lines are records, so that their fields are compared too
        at = draw(st.integers(0, len(pairs)))
        pairs[at:at] = [(" ", "event=send"), (draw(separator), f"msg_id=m{at}")]
    line = draw(leading) + "".join(sep + p for sep, p in pairs)
    if draw(st.integers(0, 30)) == 0:  # a very long value
        line += " error=" + "x" * draw(st.sampled_from([70_000, 300_000]))
    return line.encode()


ENDINGS = {"lf": [b"\n"], "crlf": [b"\r\n"], "cr": [b"\r"], "mixed": [b"\n", b"\r\n", b"\r"]}


@st.composite
def log_file(draw) -> bytes:
    lines = draw(st.lists(logfmt_line(), min_size=1, max_size=25))
    endings = ENDINGS[draw(st.sampled_from(list(ENDINGS)))]
    body = b"".join(line + draw(st.sampled_from(endings)) for line in lines)
    if draw(st.booleans()):
        body = body.rstrip(b"\r\n")  # no final newline (perhaps cut off mid-record)
    if draw(st.integers(0, 5)) == 0:
        body = b"\xef\xbb\xbf" + body
    return body


@contextlib.contextmanager
def parser(name: str, range_bytes: int = runtime.RANGE_BYTES):
    before, size = os.environ.get(runtime.ENV), runtime.RANGE_BYTES
    os.environ[runtime.ENV], runtime.RANGE_BYTES = name, range_bytes
    try:
        yield
    finally:
        runtime.RANGE_BYTES = size
        if before is None:
            os.environ.pop(runtime.ENV)
        else:
            os.environ[runtime.ENV] = before


def read(path: Path, name: str, range_bytes: int = runtime.RANGE_BYTES) -> tuple:
    with parser(name, range_bytes):
        try:
            case = load_case([str(path)])
        except MailmortemError as exc:  # refused (a file of blank lines, say): refused alike
            return "refused", str(exc), None, None
    con = case.con
    events = con.execute("SELECT * EXCLUDE (source) FROM events ORDER BY line_no").fetchall()
    skipped = con.execute("SELECT * EXCLUDE (source) FROM skipped ORDER BY line_no").fetchall()
    summaries = [(s.lines, s.records, s.skipped, s.first_skipped_lines, s.encoding) for s in case.inputs]
    staged = [con.execute(f'SELECT * FROM "{table}" ORDER BY rowid').fetchall()  # every typed column, every line
              for (table,) in con.execute("SELECT staged FROM files ORDER BY file_id").fetchall()]
    return events, skipped, summaries, staged


def assert_same(body: bytes, gz: bool = False, range_bytes: int = runtime.RANGE_BYTES) -> tuple:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("case.log.gz" if gz else "case.log")
        path.write_bytes(gzip.compress(body) if gz else body)
        sql, compiled = read(path, "sql"), read(path, "c", range_bytes)
    assert compiled[0] == sql[0], "events differ"
    assert compiled[1] == sql[1], "skips differ"
    assert compiled[2] == sql[2], "file summaries differ"
    assert compiled[3] == sql[3], "staged rows differ"
    return compiled


SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])
# For the property tests that read each file of envelopes three ways (C, DuckDB-unwrapped, SQL) or on both parser
# paths. Each example loads a case twice or three times (about 0.2 s of DuckDB binding and planning each, whatever
# the file's size), so these few tests are most of the suite's time: at 150 and 90 examples the seven heaviest took
# 10.5 minutes of the two workers' 30 (2026-12-02), and the suite 15 minutes, CI's whole budget. Every CI run draws
# new examples, so the cases tried add up across runs.
READ_EVERY_WAY = settings(SETTINGS, max_examples=35)


def of_any_file(files):
    """What a compiled reader is held to the SQL path on (a slow property test): any file of `files`, plain or
    gzipped, read in ranges of any size (ranges cut lines at every place a file can be split)."""
    def test(function):
        return pytest.mark.slow(SETTINGS(given(files, st.booleans(),
                                               st.sampled_from([64, 300, 4096, runtime.RANGE_BYTES]))(function)))
    return test


@needs_c
@of_any_file(log_file())
def test_compiled_and_sql_paths_read_any_logfmt_alike(body, gz, range_bytes):
    assert_same(body, gz, range_bytes)


@contextlib.contextmanager
def too_long_over(longest: int):
    """Lines of more than `longest` bytes too long to read: a file holding one is read from its repaired copy, on
    either path, before a reader sees it (the compiled readers' own limit, repair's at full size, is far above)."""
    saved = repair.MAX_LINE_BYTES, repair.KEPT_BYTES
    repair.MAX_LINE_BYTES, repair.KEPT_BYTES = longest, longest // 3
    try:
        yield
    finally:
        repair.MAX_LINE_BYTES, repair.KEPT_BYTES = saved


def too_long_lines(body: bytes, longest: int) -> list[int]:
    """The numbers of a file's lines longer than `longest` bytes once repaired (a byte-order mark is line 1's)."""
    lines = re.split(rb"\r\n|\r|\n", body.decode("utf-8", "replace").encode())
    return [number for number, line in enumerate(lines, start=1) if len(line) > longest]


def skipped_too_long(read: tuple) -> list[int] | None:
    """The lines a read skipped as too long (None when the file was refused)."""
    if read[0] == "refused":
        return None
    return [line_no for line_no, reason, _text in read[1] if reason == repair.TOO_LONG]


@needs_c
@pytest.mark.slow
@settings(READ_EVERY_WAY, max_examples=20)
@given(log_file(), st.integers(60, 400), st.sampled_from([64, 300, runtime.RANGE_BYTES]))
def test_lines_too_long_to_read_are_skipped_alike_each_at_its_number(body, longest, range_bytes):
    with too_long_over(longest):
        compiled = assert_same(body, range_bytes=range_bytes)
    assert skipped_too_long(compiled) in (None, too_long_lines(body, longest))


@pytest.mark.slow
@needs_c
def test_quotes_escapes_tabs_and_keys_inside_quotes_read_alike(tmp_path):
    body = ('2026-11-28T09:00:00Z event=send email="a b@c.co" msg_id=<m1@x> error="retry lead=x to=y"\n'
            'ts=2026-11-28T09:00:01Z\tevent=send to=b@c.co msg_id="m\\"2" status=\\\\ok\n'
            'ts=2026-11-28T09:00:02Z event=send to=c@c.co msg_id=m3 error="a\\ to=z" x="=\\"y z=1"\n'
            'ts=2026-11-28T09:00:02Z event=send to=e@c.co msg_id=m6 error="a\\\\\\\\b\\\\\\"c"\n'
            '   \n\nno pairs here\nts=nope event=send msg_id=m4\n'
            'ts=2026-11-28T09:00:03Z event="send" to="d@c.co" msg_id="m5" count=5 attempt=x lease=30s')
    events, skipped, _, _ = assert_same(body.encode())
    assert len(events) == 5 and [row[:2] for row in skipped] == [(5, "blank line"), (6, "blank line"),
                                                                 (7, "no key=value pairs"),
                                                                 (8, "no readable timestamp")]


@pytest.mark.slow
@needs_c
def test_ranges_and_threads_keep_every_line_number(tmp_path):
    lines = [f"ts=2026-11-28T09:00:{n % 60:02d}Z event=send worker=w{n % 7} email=p{n}@x.co msg_id=m{n}"
             if n % 13 else "not a record" for n in range(5000)]
    events, skipped, _, _ = assert_same(("\n".join(lines) + "\n").encode(), range_bytes=10_000)
    assert [row[0] for row in skipped] == [n + 1 for n in range(0, 5000, 13)]
    assert events[-1][0] == 5000


@pytest.mark.slow
@needs_c
def test_mixed_line_endings_are_read_alike(tmp_path):
    events, _, _, _ = assert_same(b"ts=2026-11-28T09:00:00Z event=send to=a@b.co msg_id=m1\r\n"
                                  b"ts=2026-11-28T09:00:01Z event=send to=a@b.co msg_id=m2\r"
                                  b"ts=2026-11-28T09:00:02Z event=send to=a@b.co msg_id=m3\n")
    assert [row[0] for row in events] == [1, 2, 3]


@pytest.mark.slow
@needs_c
def test_invalid_utf8_is_repaired_alike(tmp_path):
    _, _, [summary], _ = assert_same(b"ts=2026-11-28T09:00:00Z event=send to=a@b.co msg_id=m1 error=\xff\xfe\n"
                                  b"ts=2026-11-28T09:00:01Z event=send to=a@b.co msg_id=m\xed\xa0\x80\n")
    assert summary[-1].startswith("utf-8 (repaired")


@pytest.mark.slow
@needs_c
def test_more_spellings_of_a_key_than_the_tokenizer_takes_are_read_by_sql(tmp_path):
    spellings = ["".join(c.upper() if (n >> i) & 1 else c for i, c in enumerate("candidate_email")) for n in range(300)]
    lines = [f"ts=2026-11-28T09:00:00Z event=send msg_id=m{n} " + " ".join(f"{s}=p{n}{s}@x.co" for s in spellings[n:])
             for n in range(20)]
    events, _, _, _ = assert_same(("\n".join(lines) + "\n").encode())
    assert len(events) == 20


@needs_c
def test_version_names_the_active_parser(monkeypatch):
    from click.testing import CliRunner

    from mailmortem.cli import main

    monkeypatch.delenv(runtime.ENV, raising=False)
    assert "parser: C (forensics.ingest.readers._logfmt)" in CliRunner().invoke(main, ["--version"]).output
    monkeypatch.setenv(runtime.ENV, "sql")
    assert "parser: SQL (MAILMORTEM_PARSER=sql)" in CliRunner().invoke(main, ["--version"]).output
    monkeypatch.setitem(runtime.BUILT, "logfmt", None)
    monkeypatch.delenv(runtime.ENV)
    assert not runtime.compiled("logfmt")
    assert "parser: SQL (no compiled tokenizer)" in CliRunner().invoke(main, ["--version"]).output


def test_an_unknown_parser_choice_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(runtime.ENV, "fast")
    with pytest.raises(ConfigError, match="MAILMORTEM_PARSER"):
        runtime.compiled("logfmt")
    monkeypatch.setenv(runtime.ENV, "c")
    monkeypatch.setitem(runtime.BUILT, "logfmt", None)
    with pytest.raises(ConfigError, match="not installed"):
        runtime.compiled("logfmt")


@pytest.mark.slow
@needs_c
def test_lines_of_unicode_spaces_are_blank_as_duckdbs_trim_says(tmp_path):
    spaces = [0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]
    others = [0x200B, 0x85, 0x2028, 0xFEFF, 0x09, 0x0B]
    body = "ts=2026-11-28T09:00:00Z event=send msg_id=m1\n" + "".join(chr(c) + "\n" for c in spaces + others)
    _, skipped, _, _ = assert_same(body.encode())
    assert [reason for _, reason, _ in skipped] == ["blank line"] * len(spaces) + ["no key=value pairs"] * len(others)


@pytest.fixture(scope="module")
def duck_in_new_york():
    """DuckDB with the ingest macros, reading times without a zone in a zone that is not UTC."""
    import duckdb

    import queries

    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    con.execute("SET TimeZone = 'America/New_York'")
    yield con
    con.close()


@pytest.mark.slow
@needs_c
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(iso_timestamp, text), min_size=1, max_size=10))
def test_the_timestamps_typed_in_c_are_the_ones_sql_reads(duck_in_new_york, values):
    typed = [logfmt._logfmt.utc_microseconds(v.encode()) for v in values]
    read = duck_in_new_york.execute("SELECT epoch_us(mm_ts(v)) FROM unnest($1::VARCHAR[]) WITH ORDINALITY u(v, n) "
                                    "ORDER BY n", [values]).fetchall()
    assert typed == [us if c is not None else None for (us,), c in zip(read, typed)]  # typed in C: as SQL reads it


@needs_c
def test_the_common_iso_forms_are_typed_in_c_and_others_left_to_sql():
    typed = logfmt._logfmt.utc_microseconds
    assert typed(b"2026-11-28T09:03:30.431Z") == 1795856610431000
    assert typed(b"2026-11-28 10:03:30.431+01:00") == typed(b"2026-11-28T04:03:30.431-05:00") == 1795856610431000
    assert typed(b"2024-02-29T00:00:00.000001Z") == 1709164800000001
    for other in (b"2026-11-28T09:03:30", b"2026-02-29T00:00:00Z", b" 2026-11-28T09:03:30Z", b"2026-11-28T09:03:30+01",
                  b"2026-11-28T09:03:30.1234567Z", b"1764320400", b"2026-11-28T24:00:00Z"):
        assert typed(other) is None, other


@pytest.mark.slow
@needs_c
@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(text, quoted), min_size=1, max_size=10))
def test_the_msg_ids_typed_in_c_are_mm_msg_id(duck_in_new_york, values):
    typed = [logfmt._logfmt.msg_id(v.encode()) for v in values]
    read = duck_in_new_york.execute("SELECT mm_msg_id(v) FROM unnest($1::VARCHAR[]) WITH ORDINALITY u(v, n) ORDER BY n",
                                    [values]).fetchall()
    assert [t.decode() if t is not None else None for t in typed] == [m for (m,) in read]


@pytest.mark.slow
@needs_c
@pytest.mark.parametrize("gz", [False, True])
def test_a_dirty_byte_after_a_bare_cr_in_a_crlf_file_reads_as_on_the_sql_path(gz):
    # DuckDB's reader dropped the byte after a bare CR in a CRLF file (here an invalid one, which it then never
    # saw), while the compiled path read a repaired copy: both now read the file's copy with LF endings
    line = b"ts=2026-11-28T09:00:00Z evt=sent to=p@x.co msg_id=m1"
    assert_same(line + b"\r\n" + line + b"\r\x80 x=1\r\n" + line + b"\r\n", gz)
