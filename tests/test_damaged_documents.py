"""A JSON document with malformed JSON in it (a damaged entry of `journalctl -o json-pretty`, records run together
by bare CRs) is read entry by entry: what parses is read, each line of what does not is skipped, counted and
located (forensics.ingest.documents), and neither DuckDB's error text nor a private copy's path reaches the user.
Whatever bytes journald-like or Docker-like JSON text holds, with any line endings, diagnose answers or refuses
with a message of its own: never an internal error."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.errors import InputError
from forensics.ingest import documents, load
from forensics.ingest.readers import sql
from forensics.ingest.case import load_case
from mailmortem.cli import main

PARSERS = pytest.mark.parametrize("parser", ["sql", "c"])
# what only DuckDB's own errors, an unexpected exception or our private copies would put in front of a user
LEAKS = ("Malformed JSON", "Invalid Input Error", "internal error", "Traceback", "mailmortem-spill", "mailmortem-lines",
         "mailmortem-clean")


def entry(n: int, recipient: str) -> dict:
    return {"__CURSOR": f"s=1;i={n}", "__REALTIME_TIMESTAMP": str(1795857686000000 + n * 1000000),
            "_HOSTNAME": "mail-host-1", "SYSLOG_IDENTIFIER": "mailer", "_PID": "812",
            "MESSAGE": f"event=send campaign=c-7 step=1 email={recipient} msg_id=<m{n}@mail.example.com>"}


def pretty_journal_cut_at_entry(damaged: int) -> str:
    """About 9 KB of `journalctl -o json-pretty` with bare CRs for line ends (one CRLF: the endings mix, so the file
    is read from a line-ended copy), entry `damaged` (from 0) cut inside its MESSAGE; 20 people, each sent twice."""
    parts = []
    for n in range(40):
        text = json.dumps(entry(n, f"p{n % 20}@example.com"), indent=1).replace("\n", "\r")
        parts.append(text[:text.index('"MESSAGE"') + 40] if n == damaged else text)
    return "\r".join(parts) + "\r\n"


def test_values_of_gives_each_value_that_parses_and_each_line_of_what_does_not():
    text = ('{"a": 1}{"b":\r [2, 3]}\n{"MESSAGE": "event=send",\r\n  "c": NaN}\r  [4, {"d": 5}],\r'
            '  "e": 6\n]\n"f"\n{"g": {"h": 7}}')
    assert list(documents.values_of(text)) == [
        '{"a": 1}', '{"b":  [2, 3]}', '{"MESSAGE": "event=send",', '"c": NaN}', '[4, {"d": 5}]', '"e": 6', "]",
        '"f"', '{"g": {"h": 7}}']


@pytest.mark.slow
@PARSERS
def test_a_damaged_entry_of_a_journal_is_skipped_and_located_and_the_rest_read(tmp_path, monkeypatch, parser):
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = tmp_path / "journal.json"
    path.write_bytes(pretty_journal_cut_at_entry(7).encode())
    case = load_case([str(path)])
    summary = case.inputs[0]
    # entries 1-7 read, the 7 lines of the cut one entries 8-14 (skipped), then the 32 entries after it
    assert (summary.envelope, summary.lines, summary.records, summary.skipped) == ("journald", 46, 39, 7)
    assert summary.first_skipped_lines == [8, 9, 10, 11, 12, 13, 14]
    [(text,)] = case.con.execute("SELECT text FROM skipped WHERE line_no = 14").fetchall()
    assert text == '"MESSAGE": "event=send campaign=c-7 step'


@pytest.mark.slow
@PARSERS
def test_diagnose_says_first_where_a_damaged_entry_lost_a_send_and_never_shows_duckdbs_error(tmp_path, monkeypatch,
                                                                                           parser, cli):
    """It said 'Error: …: cannot read (Invalid Input Error: Malformed JSON in file "/tmp/mailmortem-spill-…/…"…)',
    exit 1: the file was refused whole over one entry."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = tmp_path / "journal.json"
    path.write_bytes(pretty_journal_cut_at_entry(7).encode())
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 4, result.stderr
    assert result.stdout.splitlines()[0] == (f"INCOMPLETE: 1 skipped line(s) look like mail-send records ({path}:14). "
                                             "Duplicates among them cannot be seen.")
    assert not any(leak in result.stdout + result.stderr for leak in LEAKS)


def test_what_cannot_be_read_names_the_file_never_a_private_copy(tmp_path, monkeypatch):
    """A file whose endings mix is read from a copy in the case's spill folder: an error about the copy names the
    file."""
    def failing(con, lines, *args, **kwargs):
        raise RuntimeError(f'Something in file "{lines.path}" at byte 2')

    monkeypatch.setitem(load.READERS, "jsonl", failing)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"event":"send","msg_id":"m1"}\r\n{"event":"send","msg_id":"m2"}\r')
    with pytest.raises(InputError) as raised:
        load_case([str(path)])
    assert str(raised.value) == f'{path}: cannot read (Something in file "{path}" at byte 2)'


# --- any bytes in journald-like and Docker-like JSON text, any line endings ------------------------------------

MESSAGES = ["event=send campaign=c-7 step=1 email=ana@example.com msg_id=<a1@x>", "starting worker", "",
            '{"event":"send","email":"ben@example.com","msg_id":"<b2@x>"}', "event=send\nemail=cy@example.com"]
ENDINGS = ["\r", "\r", "\n", "\r\n", "\r\r", "\n\r", ""]


@st.composite
def json_record(draw) -> str:
    message, n = draw(st.sampled_from(MESSAGES)), draw(st.integers(0, 59))
    if draw(st.booleans()):
        record = {"__REALTIME_TIMESTAMP": str(1795857686000000 + n), "_HOSTNAME": "h", "MESSAGE": message}
        if draw(st.booleans()):
            record["MESSAGE"] = list(message.encode())
    else:
        record = {"log": message + draw(st.sampled_from(["\n", ""])), "stream": "stdout",
                  "time": f"2026-11-28T09:00:{n:02d}Z"}
    text = json.dumps(record, indent=draw(st.sampled_from([None, None, 1, "\t"])))
    text = text.replace("\n", draw(st.sampled_from(ENDINGS)))
    if draw(st.integers(0, 4)) == 0:  # damaged: cut short
        text = text[:draw(st.integers(0, len(text)))]
    return text


@st.composite
def json_text(draw) -> bytes:
    """journald-like and Docker-like JSON records (compact or pretty, some damaged) separated by any line endings
    (bare CRs above all), with arbitrary bytes put in here and there."""
    body = b"".join(draw(json_record()).encode() + draw(st.sampled_from(ENDINGS)).encode()
                    for _ in range(draw(st.integers(1, 12))))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.binary(max_size=6)) + body[at:]
    return body


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_text(), st.sampled_from(["sql", "c"]))
def test_any_json_text_with_any_line_endings_is_answered_or_refused_never_an_internal_error(body, parser):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.json"
        path.write_bytes(body)
        result = CliRunner().invoke(main, ["diagnose", str(path), "--fail-on-duplicates"],
                                    env={**os.environ, "MAILMORTEM_PARSER": parser}, catch_exceptions=False)
    assert result.exit_code in (0, 1, 3, 4), result.stderr
    if result.exit_code == 1:
        assert result.stderr.startswith("Error: ") and result.stdout == ""
    assert not any(leak in result.stdout + result.stderr for leak in LEAKS), result.stderr
