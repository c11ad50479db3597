"""Envelopes (forensics.ingest.envelopes): each is detected without --envelope on a sample written from its
format's documentation (tests/fixtures/envelopes/README.md), and gives the inner line, time and provenance."""

from __future__ import annotations

import datetime as dt
import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forensics.errors import ConfigError, InputError
from forensics.ingest import detect, envelopes
from forensics.ingest.case import load_case
from forensics.ingest.load import Reading
from forensics.simulate.envelopes import DOCUMENTS, FLAVOURS, JSON_ONLY, LOGFMT_ONLY, NAMES, wrap
from tests.test_jsonl_reader_properties import FIRST, json_line
from tests.test_tokenizer_properties import READ_EVERY_WAY, SETTINGS, logfmt_line, needs_c, parser
from tests.test_tokenizer_properties import read as read_with_parser

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "envelopes"
A = "event=send campaign=c-7 step=1 email=ana@example.com msg_id=<a1@mail.example.com>"
B = '{"event":"send","campaign":"c-7","step":1,"email":"ben@example.com","msg_id":"<b2@mail.example.com>"}'
B_SORTED = '{"campaign":"c-7","email":"ben@example.com","event":"send","msg_id":"<b2@mail.example.com>","step":1}'
DOCKER_ID = "3f4e8a1b2c9d" + "0" * 52
POD_LOG = "kubelet/pods/outreach_mailer-7d9f5_0c1d2e3f-aaaa-bbbb-cccc-123456789abc/mailer/0.log"
HOST = {"host": "mail-host-1", "unit": "mailer", "pid": "812"}

# (file, envelope, the first record's inner line, its time, its envelope's provenance, the worker it gets)
SAMPLES = [
    (f"docker/containers/{DOCKER_ID}/{DOCKER_ID}-json.log", "docker-json", A, "2026-11-28T09:21:26.123456",
     {"stream": "stdout", "container": "3f4e8a1b2c9d"}, "3f4e8a1b2c9d"),
    (POD_LOG, "cri", A, "2026-11-28T09:21:26.576064",
     {"stream": "stdout", "container": "mailer-7d9f5", "unit": "mailer"}, "mailer-7d9f5"),
    ("journald/mailer.json", "journald", A, "2026-11-28T09:21:26.123456",
     {"host": "mail-host-1", "unit": "mailer.service", "pid": "812"}, "mail-host-1/mailer.service"),
    ("syslog/messages", "syslog", A, "2026-11-28T09:21:26", HOST, "mail-host-1/mailer"),
    ("rsyslog/mail.log", "rsyslog", A, "2026-11-28T08:21:26.123456", HOST, "mail-host-1/mailer"),
    ("rfc5424/mail.log", "rfc5424", A, "2026-11-28T09:21:26.003", HOST, "mail-host-1/mailer"),
    ("docker-logs/mailer.log", "docker-logs", A, "2026-11-28T09:21:26.123456", {}, None),
    ("cloudwatch-export/exportedlogs/5b1f0e2a-task/mailer-stream-1/000000.gz", "cloudwatch-export", B,
     "2026-11-28T09:21:26.123", {"container": "mailer-stream-1"}, "mailer-stream-1"),
    ("python-logging/mailer.log", "python-logging", A, "2026-11-28T09:21:26.123", {}, None),
    ("structlog/mailer.log", "structlog", A, "2026-11-28T09:21:26", {}, None),
    ("zap/mailer.log", "zap", B, "2026-11-28T08:21:26.123", {}, None),
    ("slog/mailer.log", "slog", A, "2026-11-28T14:21:26.123", {}, None),
    ("logrus/mailer.log", "logrus", 'campaign=c-7 email=ana@example.com event=send msg_id="<a1@mail.example.com>" '
     "step=1", "2026-11-28T14:21:26", {}, None),
    ("loki/mailer.jsonl", "loki", B, "2026-11-28T09:21:27",
     {"stream": "stdout", "host": "node-3", "unit": "outreach/mailer", "container": "mailer-1"}, "mailer-1"),
    ("cloud-logging/gcloud-read.json", "cloud-logging", B_SORTED, "2026-11-28T09:21:26.123456",
     {"stream": "stdout", "container": "mailer-7d9f5-x2x"}, "mailer-7d9f5-x2x"),
    ("cloud-logging/stdout/2026/11/28/09:00:00_09:59:59_S0.json", "cloud-logging", B_SORTED,
     "2026-11-28T09:21:26.123456", {"stream": "stdout", "container": "mailer-7d9f5-x2x"}, "mailer-7d9f5-x2x"),
    ("cloudwatch/filter-log-events.json", "cloudwatch", A, "2026-11-28T09:21:26.123",
     {"container": "mailer/mailer/5b1f0e2a"}, "mailer/mailer/5b1f0e2a"),
    ("cloudwatch/get-log-events.json", "cloudwatch", A, "2026-11-28T09:21:26.123", {}, None),
    ("datadog/dt=20261128/hour=09/archive_092126.1234.AbCdEf.json.gz", "datadog", A, "2026-11-28T09:21:26.123",
     {"host": "i-0abc123", "unit": "mailer"}, "i-0abc123/mailer"),
    ("elastic/logs-mailer.ndjson", "elastic", A, "2026-11-28T09:21:26.123",
     {"host": "mail-host-1", "unit": "mailer"}, "mail-host-1/mailer"),
    ("elastic/search-response.json", "elastic", A, "2026-11-28T09:21:26.123",
     {"host": "mail-host-1", "unit": "mailer"}, "mail-host-1/mailer"),
    # the shapes real samples had that the first fixtures lacked (issue 41)
    ("compose/compose-logs-t.log", "compose", A, "2026-11-28T09:21:26.123456", {"container": "mailer-1"}, "mailer-1"),
    ("rsyslog/forward.log", "rsyslog", A, "2026-11-28T09:21:26.123456", HOST, "mail-host-1/mailer"),
    ("journald/source-time.json", "journald", A, "2026-11-28T09:21:26.123456",
     {"host": "mail-host-1", "unit": "mailer@1.service", "pid": "812"}, "mail-host-1/mailer@1.service"),
    (POD_LOG.replace("/0.log", "/1.log"), "cri", A, "2026-11-28T09:21:26.576064",
     {"stream": "stdout", "container": "mailer-7d9f5", "unit": "mailer"}, "mailer-7d9f5"),
    ("cloudwatch/filter-log-events-one-line.json", "cloudwatch", A, "2026-11-28T09:21:26.123",
     {"container": "mailer/mailer/5b1f0e2a"}, "mailer/mailer/5b1f0e2a"),
    ("syslog/macos-system.log", "syslog", A, "2026-11-28T09:21:26",
     {"host": "Mail-Mac", "unit": "mailer", "pid": "812"}, "Mail-Mac/mailer"),
]


def records(case) -> list[dict]:
    cursor = case.con.execute("SELECT line_no, ts, worker, incarnation, recipient, msg_id, raw, envelope "
                              "FROM events ORDER BY line_no")
    return [dict(zip([d[0] for d in cursor.description], row)) for row in cursor.fetchall()]


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)


def read(tmp_path, *paths, **reading):
    return load_case([str(p) for p in paths], database=str(tmp_path / "case.duckdb"), reading=Reading(**reading))


@pytest.mark.slow
@pytest.mark.parametrize("path,name,inner,ts,provenance,worker", SAMPLES, ids=[s[0].split("/")[0] + ":" + s[0][-12:]
                                                                            for s in SAMPLES])
def test_a_documented_sample_is_detected_and_unwrapped(tmp_path, path, name, inner, ts, provenance, worker):
    case = read(tmp_path, FIXTURES / path, year=2026)
    assert case.inputs[0].envelope == name
    first = records(case)[0]
    assert first["raw"] == inner
    assert first["ts"] == utc(ts)
    assert first["envelope"]["ts"] is not None
    assert {k: v for k, v in first["envelope"].items() if v is not None and k != "ts"} == provenance
    assert first["worker"] == worker


def test_every_envelope_has_a_documented_sample():
    assert {name for _, name, *_ in SAMPLES} == set(envelopes.NAMES)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for path, *_ in SAMPLES:
        assert f"`{path}`" in readme, path


@pytest.mark.slow
def test_docker_pieces_of_a_long_line_are_joined_and_the_tag_names_the_container(tmp_path):
    rows = records(read(tmp_path, FIXTURES / SAMPLES[0][0]))
    assert [r["recipient"] for r in rows] == ["ana@example.com", "cy@example.com", "ben@example.com"]
    assert rows[1]["line_no"] == 2 and rows[1]["msg_id"] == "c3@mail.example.com"
    assert rows[2]["worker"] == "3f4e8a1b2c9d/mailer"


def test_cri_partial_lines_are_joined(tmp_path):
    rows = records(read(tmp_path, FIXTURES / POD_LOG))
    assert rows[1]["raw"] == "event=send campaign=c-7 step=1 email=cy@example.com msg_id=<c3@mail.example.com>"


def test_journald_message_as_bytes_is_decoded(tmp_path):
    rows = records(read(tmp_path, FIXTURES / "journald" / "mailer.json"))
    assert rows[1]["recipient"] == "dörte@example.com" and rows[1]["incarnation"] == "812"


@pytest.mark.slow
@pytest.mark.parametrize("parser", ["sql", "c"])
def test_what_was_read_names_the_first_ten_skipped_lines_of_the_file_once_each(tmp_path, monkeypatch, parser):
    """The skipped lines an envelope's file is summed up by are its own line numbers, in order, each once: the two
    lines of one entry's message share its number."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)

    def entry(message: str) -> str:
        return json.dumps({"__REALTIME_TIMESTAMP": "1795857686000000", "MESSAGE": message, **HOST}) + "\n"

    journal = tmp_path / "journal.json"
    journal.write_text(entry(A) + entry("starting\nstill starting") + entry(A.replace("a1", "a2"))
                       + "".join(entry(f"waiting {n}") for n in range(12)), encoding="utf-8")
    summary = read(tmp_path, journal).inputs[0]
    assert (summary.lines, summary.records, summary.skipped) == (15, 2, 14)
    assert summary.first_skipped_lines == [2, 4, 5, 6, 7, 8, 9, 10, 11, 12]


@pytest.mark.slow
@pytest.mark.parametrize("parser", ["sql", "c"])
def test_a_multi_line_journald_message_gives_a_line_each_numbered_by_its_entry(tmp_path, monkeypatch, parser):
    """DuckDB parses a file straight through its envelope's view until an entry is not one whole line, then reads
    it again from its pieces: no line is lost or renumbered (the compiled unwrapper hands such a file to DuckDB)."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)

    def entry(message: str) -> str:
        return json.dumps({"__REALTIME_TIMESTAMP": "1795857686000000", "MESSAGE": message, **HOST}) + "\n"

    journal = tmp_path / "journal.json"
    journal.write_text(entry(A) + entry(A.replace("a1", "a2") + "\n" + A.replace("a1", "a3")) + entry("started")
                       + entry(A.replace("a1", "a4")), encoding="utf-8")
    case = read(tmp_path, journal)
    assert [(r["line_no"], r["msg_id"]) for r in records(case)] == [
        (1, "a1@mail.example.com"), (2, "a2@mail.example.com"), (2, "a3@mail.example.com"), (4, "a4@mail.example.com")]
    assert case.con.execute("SELECT line_no, text FROM skipped").fetchall() == [(3, "started")]
    assert case.inputs[0].lines == 4


@pytest.mark.slow
def test_an_envelope_s_provenance_is_text_where_the_file_s_path_names_none(tmp_path, monkeypatch):
    """The envelope's view takes the path's container and unit as literals: NULL ones stay typed VARCHAR."""
    monkeypatch.setenv("MAILMORTEM_PARSER", "sql")
    log = tmp_path / "cri.log"
    log.write_text(f"2026-11-28T09:00:00.000000000Z stdout F {A}\n", encoding="utf-8")
    con = read(tmp_path, log).con
    [env] = con.execute("SELECT DISTINCT data_type FROM duckdb_columns() WHERE column_name = 'env'").fetchall()
    assert env[0] == ("STRUCT(line_no BIGINT, ts TIMESTAMP WITH TIME ZONE, stream VARCHAR, host VARCHAR, unit VARCHAR, "
                      "container VARCHAR, pid VARCHAR, cut BOOLEAN)")


@pytest.mark.slow
def test_an_envelope_of_whole_lines_is_parsed_straight_from_its_view(tmp_path, monkeypatch):
    """Nothing is written before the staged table when every entry is one line: writing the pieces down cost
    about as much as taking the envelope off."""
    import queries

    monkeypatch.setenv("MAILMORTEM_PARSER", "sql")
    ran, run = [], queries.run
    monkeypatch.setattr(queries, "run", lambda con, name, *args, **kwargs: ran.append(name) or run(con, name, *args,
                                                                                                    **kwargs))
    log = tmp_path / "app.log"
    log.write_text(f"2026-11-28 09:21:26,123 INFO mailer: {A}\nnot a record\n", encoding="utf-8")
    assert [r["msg_id"] for r in records(read(tmp_path, log))] == ["a1@mail.example.com"]
    assert "envelope_flat_lines" in ran and "envelope_kept_pieces" not in ran


def test_syslog_year_comes_from_the_file_age_and_rolls_back_over_new_year(tmp_path):
    log = tmp_path / "messages"
    log.write_text(f"Dec 31 23:59:58 h mailer[1]: {A}\nJan  1 00:00:02 h mailer[1]: {B}\n", encoding="utf-8")
    january = dt.datetime(2027, 1, 15, tzinfo=dt.timezone.utc).timestamp()
    os.utime(log, (january, january))
    assert [r["ts"] for r in records(read(tmp_path, log))] == [utc("2026-12-31T23:59:58"), utc("2027-01-01T00:00:02")]


MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def syslog_time(stamp: str, year: int, last_month: int) -> dt.datetime | None:
    """What a syslog stamp without a year means (the year rule of `--help`): `year`, or the year before for a month
    after `last_month`; None for a day the month does not have."""
    month = MONTHS.index(stamp[:3]) + 1
    try:
        naive = dt.datetime.strptime(f"{year - (month > last_month)} {stamp}", "%Y %b %d %H:%M:%S")
    except ValueError:
        return None
    return naive.replace(tzinfo=dt.timezone.utc)


@pytest.mark.slow
@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(MONTHS), st.integers(1, 31), st.integers(0, 23), st.integers(0, 59),
                          st.integers(0, 59)), min_size=1, max_size=40),
       st.integers(1999, 2030), st.integers(1, 12))
def test_a_syslog_stamp_reads_as_its_date_in_the_year_its_month_gives(stamps, year, last_month):
    """The SQL reading of `Nov  3 09:21:26` (mm_syslog_ts): the day padded as syslog pads it, a Feb 29 only in a
    leap year, a day the month lacks read as no time, a month after the file's last one in the year before."""
    import duckdb

    import queries

    texts = [f"{month} {day:2d} {h:02d}:{m:02d}:{s:02d}" for month, day, h, m, s in stamps]
    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    queries.script(con, "envelope_macros")
    read = con.execute("SELECT mm_syslog_ts(s, $year, $last) FROM unnest($texts) AS t(s)",
                       {"texts": texts, "year": year, "last": last_month}).fetchall()
    assert [ts for (ts,) in read] == [syslog_time(text, year, last_month) for text in texts]


@pytest.mark.slow
def test_year_option_sets_the_year(tmp_path):
    rows = records(read(tmp_path, FIXTURES / "syslog" / "messages", year=2024))
    assert [r["ts"].year for r in rows] == [2024, 2024]


@pytest.mark.slow
def test_zone_less_times_are_read_in_tz(tmp_path):
    rows = records(read(tmp_path, FIXTURES / "python-logging" / "mailer.log", tz="Europe/Berlin"))
    assert rows[0]["ts"] == utc("2026-11-28T08:21:26.123")


def test_an_unknown_zone_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="--tz 'Mars/Base': unknown time zone"):
        read(tmp_path, FIXTURES / "python-logging" / "mailer.log", tz="Mars/Base")



@pytest.mark.slow
def test_a_prefixed_line_holds_a_json_record_only_where_its_tail_parses(tmp_path):
    # what follows the prefix is its JSON object when the line ends with '}' (spaces after it do not count, a tab
    # does); in a file of JSON records such a tail that does not parse is skipped as invalid JSON, shown as it is,
    # and a line without one as its whole rest
    record = '{"event":"send","email":"%s@example.com","msg_id":"<%s@m>"}'
    log = tmp_path / "mailer.log"
    log.write_text("".join(f"2026-11-28 09:21:2{i},000 INFO mailer: {text}\n" for i, text in enumerate([
        record % ("ana", "a1"), record % ("ben", "b2") + "   ", record % ("cy", "c3") + "\t",
        '{"event":"send" broken}', "retry {later} {" + (record % ("di", "d4"))[1:]])), encoding="utf-8")
    case = read(tmp_path, log)
    assert [r["recipient"] for r in records(case)] == ["ana@example.com", "ben@example.com"]
    assert case.con.execute("SELECT line_no, reason, text FROM skipped ORDER BY line_no").fetchall() == [
        (3, "not valid JSON", "INFO mailer: " + record % ("cy", "c3") + "\t"),
        (4, "not valid JSON", '{"event":"send" broken}'),
        (5, "not valid JSON", "{later} {" + (record % ("di", "d4"))[1:])]


def test_a_prefixed_logfmt_record_ending_in_braces_that_are_no_json_is_read_as_pairs(tmp_path):
    # in a file of key=value records a tail shaped like an object counts only where it parses: here it does not,
    # so the line's pairs are the record
    log = tmp_path / "mailer.log"
    log.write_text("2026-11-28 09:21:20,000 INFO mailer: event=send email=ana@example.com msg_id=<a1@m>\n"
                   "2026-11-28 09:21:21,000 INFO mailer: retry event=send email=ben@example.com msg_id=<b2@m> "
                   "note={later}\n", encoding="utf-8")
    case = read(tmp_path, log)
    assert [r["recipient"] for r in records(case)] == ["ana@example.com", "ben@example.com"]
    assert case.con.execute("SELECT count(*) FROM skipped").fetchone()[0] == 0


@pytest.mark.slow
@pytest.mark.parametrize("parser_path", ["sql", "c"])
@pytest.mark.parametrize("head", ["2026-11-28 09:21:2%d,000 INFO mailer: ", "2026-11-28T09:21:2%dZ\tINFO\tmailer\t",
                                  "2026-11-28 09:21:2%d [info     ] sent "])
def test_a_json_value_ending_key_value_pairs_is_a_value_and_a_json_value_alone_the_record(tmp_path, head, parser_path):
    # `meta={...}` behind other pairs is one of the pairs (the record is the pairs, none lost); `payload={...}` with
    # no other pair before it is the record itself
    lines = [head % 0 + 'retry event=send email=ana@example.com msg_id=<a1@m> meta={"k":1,"n":[2]}',
             head % 1 + 'payload={"event":"send","email":"ben@example.com","msg_id":"<b2@m>"}',
             head % 2 + "event=send email=cy@example.com msg_id=<c3@m>"]
    log = tmp_path / "mailer.log"
    log.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with parser(parser_path):
        case = read(tmp_path, log)
    assert case.inputs[0].envelope in ("python-logging", "zap", "structlog")
    assert [(r["line_no"], r["recipient"], r["msg_id"]) for r in records(case)] == [
        (1, "ana@example.com", "a1@m"), (2, "ben@example.com", "b2@m"), (3, "cy@example.com", "c3@m")]


@pytest.mark.slow
def test_envelope_option_forces_one_or_none(tmp_path):
    export = FIXTURES / "docker-logs" / "mailer.log"
    assert read(tmp_path, export, envelope="cloudwatch-export").inputs[0].envelope == "cloudwatch-export"
    with pytest.raises(InputError, match="no mail-send records found in .*mailer.json \\(check --syntax"):
        load_case([str(FIXTURES / "journald" / "mailer.json")], reading=Reading(envelope="none"))


@pytest.mark.slow
def test_mixed_envelopes_and_plain_files_make_one_case(tmp_path):
    case = read(tmp_path, FIXTURES / "journald" / "mailer.json", FIXTURES / "loki" / "mailer.jsonl",
                Path(__file__).resolve().parent.parent / "sample_logs" / "parallel-worker" / "worker-sender-1.log")
    assert [i.envelope for i in case.inputs] == ["journald", "loki", None]
    assert case.con.execute("SELECT count(DISTINCT source) FROM events").fetchone()[0] == 3


@pytest.mark.slow
def test_a_journal_of_json_and_logfmt_records_reads_each_line_by_its_own_syntax(tmp_path):
    messages = ['{"ts": "2026-11-28T09:00:00Z", "event": "send", "email": "a@x.co", "msg_id": "m1"}',
                "ts=2026-11-28T09:00:01Z event=send email=b@x.co msg_id=m2",
                ' \u3000{"ts": "2026-11-28T09:00:02Z", "event": "send", "email": "c@x.co", "msg_id": "m3"}',
                "ts=2026-11-28T09:00:03Z event=send email=d@x.co msg_id=m4"]
    journal = tmp_path / "mixed.json"
    journal.write_text("".join(json.dumps({"__REALTIME_TIMESTAMP": f"179585768{n}000000", "_HOSTNAME": "h",
                                           "MESSAGE": message}) + "\n" for n, message in enumerate(messages)),
                       encoding="utf-8")
    case = read(tmp_path, journal)
    assert [(r["line_no"], r["recipient"]) for r in records(case)] == [(1, "a@x.co"), (2, "b@x.co"), (4, "d@x.co")]
    # a record after Unicode spaces is taken for JSON, which the JSON Lines parser does not read past them
    assert case.con.execute("SELECT line_no, reason FROM skipped").fetchall() == [(3, "not valid JSON")]


def test_an_envelope_holding_no_mail_send_record_says_what_it_holds(tmp_path):
    journal = tmp_path / "sshd.json"
    journal.write_text("".join(json.dumps({"__REALTIME_TIMESTAMP": "1795857686000000", "_HOSTNAME": "h",
                                           "MESSAGE": f"Accepted publickey for root port {port}"}) + "\n"
                               for port in (22, 23)), encoding="utf-8")
    with pytest.raises(InputError) as raised:
        load_case([str(journal)])
    assert str(raised.value) == (
        f"no mail-send records found. {journal}: journald JSON envelope recognised (2 entries), but no mail-send "
        "record inside: the messages are plain text, not key=value pairs or JSON, e.g. "
        "'Accepted publickey for root port 22'")


@pytest.mark.slow
def test_a_partly_empty_case_notes_the_file_without_records(tmp_path):
    journal = tmp_path / "sshd.json"
    journal.write_text(json.dumps({"__REALTIME_TIMESTAMP": "1795857686000000", "MESSAGE": '{"user": "root"}'})
                       + "\n", encoding="utf-8")
    case = read(tmp_path, journal, FIXTURES / "loki" / "mailer.jsonl")
    assert case.inputs[0].note.endswith("the messages are JSON objects without an event or message id, "
                                        "e.g. '{\"user\": \"root\"}'")
    assert case.inputs[1].note is None


def test_a_plain_jsonl_record_with_a_message_is_not_taken_for_an_envelope():
    line = b'{"@timestamp": "2026-11-28T09:00:00Z", "message": "sent a=b", "event": "send", "to": "a@b.co"}\n'
    assert detect.detect_envelope(line * 3) is None


def test_sample_logs_have_no_envelope():
    root = Path(__file__).resolve().parent.parent / "sample_logs"
    for path in root.rglob("worker-*"):
        head = path.read_bytes() if path.suffix != ".gz" else __import__("gzip").decompress(path.read_bytes())
        assert detect.detect_envelope(head[:65536], str(path)) is None, path


@pytest.mark.slow
def test_diagnose_shows_each_files_envelope_and_the_zone(cli):
    result = cli("diagnose", str(FIXTURES / "python-logging" / "mailer.log"), str(FIXTURES / "loki" / "mailer.jsonl"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].split()[:3] == ["file", "envelope", "syntax"]
    assert [line.split()[1] for line in lines[2:4]] == ["python-logging", "loki"]
    assert "Times without a zone (Python logging) were read as UTC (change with --tz)." in result.stdout
    document = json.loads(cli("diagnose", str(FIXTURES / "loki" / "mailer.jsonl"), "--format", "json").stdout)
    assert document["inputs"][0]["envelope"] == "loki"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["docker-json", "cri", "journald"])
def test_a_line_the_platform_never_finished_is_a_truncated_last_line(tmp_path, name):
    log = tmp_path / f"cut.{name}.log"
    log.write_text(wrap(name, [f"ts=2026-11-28T09:00:00Z {A}", ""], last="ts=2026-11-28T09:00:01Z event=send email=c"),
                   encoding="utf-8")
    case = load_case([str(log)])
    assert case.records == 1
    assert case.con.execute("SELECT line_no, reason, text FROM skipped WHERE reason <> 'blank line'").fetchall() == [
        (3, "truncated last line (no newline at end of file)", "ts=2026-11-28T09:00:01Z event=send email=c")]


def test_a_damaged_first_entry_does_not_make_a_file_one_json_document():
    entry = b'{"log":"event=send email=a@b.co msg_id=<x>\\n","stream":"stdout","time":"2026-11-28T09:00:00Z"}\n'
    found = detect.detect_envelope(b'{"log":"event=se\n' + entry * 4)
    assert found.name == "docker-json" and not found.document


# --- the lines inside an envelope on both parser paths -----------------------------------------------

def _logfmt_envelopes():
    return [name for name in NAMES if name not in JSON_ONLY]


@st.composite
def enveloped_logfmt(draw) -> tuple[str, str]:
    """(envelope, file): random logfmt lines (blank, junk, hostile values, long ones that Docker splits) wrapped
    by a platform, perhaps with a last line it never finished."""
    name = draw(st.sampled_from(_logfmt_envelopes()))
    lines = [line.decode("utf-8", "replace") for line in draw(st.lists(logfmt_line(), min_size=1, max_size=25))]
    last = draw(st.sampled_from(["", "", "ts=2026-11-28T09:00:01Z event=send email=c"]))
    return name, flavoured(draw, name, wrap(name, lines, last=last))


def flavoured(draw, name: str, text: str) -> str:
    """The file in another form real files of its envelope take (FLAVOURS), now and then."""
    return FLAVOURS[name](text) if name in FLAVOURS and draw(st.booleans()) else text


@needs_c
@pytest.mark.slow
@READ_EVERY_WAY
@given(enveloped_logfmt())
def test_the_lines_inside_an_envelope_read_alike_on_both_parser_paths(file):
    name, body = file
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / file_name(name)
        path.write_text(body, encoding="utf-8")
        sql, compiled = read_both(path)
    assert compiled == sql


def file_name(envelope: str) -> str:
    """What a file of this envelope is called: CloudWatch's S3 export is told by its objects' names (000000)."""
    return "000000" if envelope == "cloudwatch-export" else "case.log"


def read_both(path: Path) -> tuple:
    """The events, skips, summaries and staged rows (each with its `env`) of one file, SQL path then C."""
    return read_with_parser(path, "sql"), read_with_parser(path, "c")


@pytest.mark.slow
@needs_c
def test_the_lines_inside_an_envelope_go_through_the_compiled_tokenizer(tmp_path, monkeypatch):
    from forensics.ingest.readers import logfmt, runtime

    staged, stage_lines = [], logfmt.stage_lines
    monkeypatch.setattr(logfmt, "stage_lines",
                        lambda *args, **kwargs: staged.append(stage_lines(*args, **kwargs)) or staged[-1])
    monkeypatch.setitem(runtime.BUILT, "unwrap", None)  # DuckDB takes the envelope off (tests/test_unwrapper.py: C)
    log = tmp_path / "docker.log"
    log.write_text(wrap("docker-json", [f"ts=2026-11-28T09:00:00Z {A}", "", "not a record"]), encoding="utf-8")
    sql, compiled = read_both(log)
    assert staged == [True] and compiled == sql and len(compiled[0]) == 1


# --- the JSON records inside an envelope on both parser paths ----------------------------------------

def _json_envelopes():
    return [name for name in NAMES if name not in LOGFMT_ONLY]


@st.composite
def enveloped_jsonl(draw) -> tuple[str, str]:
    """(envelope, file): random JSON lines (escapes, nesting, keys twice, numbers of every form, broken JSON,
    blank, junk, a CR kept inside, long ones that Docker splits), now and then among logfmt ones (a journal of
    several programs), wrapped by a platform, perhaps as its JSON document, perhaps with a last line it never
    finished."""
    name = draw(st.sampled_from(_json_envelopes()))
    lines = [FIRST.decode()]
    some_logfmt = draw(st.integers(0, 3)) == 0
    for line in draw(st.lists(st.one_of(json_line(), logfmt_line()) if some_logfmt else json_line(),
                              min_size=1, max_size=25)):
        text = line.decode("utf-8", "replace")
        if draw(st.integers(0, 30)) == 0 and text.endswith("}"):  # a very long record
            text = text[:-1] + ("" if text == "{}" else ",") + '"error":"' + "x" * 70_000 + '"}'
        lines.append(text + draw(st.sampled_from(["", "", "", "\r"])))
    last = draw(st.sampled_from(["", "", '{"ts":"2026-11-28T09:00:01Z","evt":"send","email":"c', FIRST.decode()]))
    document = name in DOCUMENTS and draw(st.booleans())
    return name, flavoured(draw, name, wrap(name, lines, last="" if document else last, document=document))


@needs_c
@pytest.mark.slow
@READ_EVERY_WAY
@given(enveloped_jsonl())
def test_the_json_lines_inside_an_envelope_read_alike_on_both_parser_paths(file):
    name, body = file
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / file_name(name)
        # a lone surrogate escape the platform's JSON decoded (Cloud Logging's jsonPayload) cannot be written
        path.write_bytes(body.encode("utf-8", "replace"))
        sql, compiled = read_both(path)
    for at, part in enumerate(["events", "skips", "file summaries", "staged rows"]):
        assert compiled[at] == sql[at], f"{part} differ"


@pytest.mark.slow
@needs_c
def test_the_json_lines_inside_an_envelope_go_through_the_compiled_reader(tmp_path, monkeypatch):
    from forensics.ingest.readers import jsonl

    staged, stage_lines = [], jsonl.stage_lines
    monkeypatch.setattr(jsonl, "stage_lines",
                        lambda *args, **kwargs: staged.append(stage_lines(*args, **kwargs)) or staged[-1])
    codes, read_lines = [], jsonl._jsonl.read_lines
    monkeypatch.setattr(jsonl._jsonl, "read_lines",
                        lambda *args: codes.extend((result := read_lines(*args))[2]) or result)
    # a JSON document (an `aws logs` page), which DuckDB takes apart (files of one entry per line are the C
    # unwrapper's: tests/test_unwrapper.py)
    log = tmp_path / "events.json"
    log.write_text(wrap("cloudwatch", [json.dumps({"ts": "2026-11-28T09:00:00Z", **json.loads(B)}), "",
                                       '{"not": "a record"', B], document=True), encoding="utf-8")
    sql, compiled = read_both(log)
    assert staged == [True] and compiled == sql and len(compiled[0]) == 2
    assert codes == [0, 1, 2, 0]  # read in C, blank, deferred to SQL, read in C (its time is the envelope's)


@pytest.mark.slow
@needs_c
def test_a_journal_of_json_and_logfmt_records_reads_each_through_its_compiled_reader(tmp_path, monkeypatch):
    from forensics.ingest.readers import jsonl, logfmt

    staged = []
    for module in (jsonl, logfmt):
        def spy(*args, stage_lines=module.stage_lines, **kwargs):
            staged.append(stage_lines(*args, **kwargs))
            return staged[-1]
        monkeypatch.setattr(module, "stage_lines", spy)
    log = tmp_path / "journal.json"
    log.write_text(wrap("journald", [B, f"ts=2026-11-28T09:00:00Z {A}", "not a record", B.replace("b2", "b3")]),
                   encoding="utf-8")
    sql, compiled = read_both(log)
    assert staged == [True, True] and compiled == sql and len(compiled[0]) == 3
    assert compiled[2][0][:3] == (4, 3, 1)  # lines, records, skipped


@needs_c
@pytest.mark.slow
def test_an_inner_json_line_over_the_compiled_readers_limit_sends_the_file_to_sql(tmp_path, monkeypatch):
    from forensics.ingest.readers import jsonl

    staged, stage_lines = [], jsonl.stage_lines
    monkeypatch.setattr(jsonl, "stage_lines",
                        lambda *args, **kwargs: staged.append(stage_lines(*args, **kwargs)) or staged[-1])
    long = B[:-1] + ',"error":"' + "x" * jsonl._jsonl.MAX_LINE + '"}'  # Docker writes it in pieces
    log = tmp_path / "docker.log"
    log.write_text(wrap("docker-json", [B, long, B.replace("b2", "b3")]), encoding="utf-8")
    sql, compiled = read_both(log)
    assert staged == [False] and compiled == sql and len(compiled[0]) == 3


# What follows an application's prefix is read from its first key=value pair on (or the bare ISO time just before
# it): the rule, as one regex; mm_pairs finds the first key without it where it can (the regex costs 3x).
PAYLOAD_RULE = r"""regexp_replace(rest, '^(?:.*?\s)??((?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?\s+)?[^\s="]+=)', '\1')"""
PAYLOAD_PIECES = [" ", "  ", "\t", "\r", "\x0c", "\x0b", "=", "==", '"', "k", "evt", "é", "\u00a0", "\u3000", ":", "-", "[",
                  "2026-11-28T09:00:00Z", "2026-11-28 09:00:00", "2026-11-28T09:00:00.5+01:00", "2026-11-28", "12:00",
                  "level=info", 'msg="a b=c"', "{", "}", '{"a": 1}', "x=", "=y", "INFO name:"]


@pytest.mark.slow
@SETTINGS
@given(st.lists(st.lists(st.sampled_from(PAYLOAD_PIECES), max_size=12).map("".join), min_size=1, max_size=30))
def test_the_record_after_a_prefix_is_found_as_the_one_regex_finds_it(rests):
    import duckdb

    import queries

    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    queries.script(con, "envelope_macros")
    con.execute("CREATE TABLE r AS SELECT unnest($rests) AS rest", {"rests": rests})
    found = con.execute(f"SELECT rest, mm_pairs(rest, mm_first_key(rest)), {PAYLOAD_RULE} FROM r").fetchall()
    assert [(rest, rule) for rest, _, rule in found] == [(rest, payload) for rest, payload, _ in found]


@pytest.mark.slow
def test_an_elastic_hit_is_told_by_its_source_key_escaped_or_not_and_a_nested_source_is_no_hit(tmp_path):
    # a hit is read through _source (its key may be escaped, and _source may hold none of the platform's fields);
    # a bare document whose inner object has a `_source` key is read as it is
    record = json.dumps({"ts": "2026-11-28T09:00:00Z", "event": "send", "email": "a@x.co", "msg_id": "m1"})
    lines = ['{"_index": "l", "\\u005fsource": {"@timestamp": "2026-11-28T09:00:01Z", "event": "send", '
             '"email": "b@x.co", "msg_id": "m2"}, "message": %s}' % json.dumps(record),
             json.dumps({"@timestamp": "2026-11-28T09:00:02Z", "message": "copied", "meta": {"_source": "crm"},
                         "event": "send", "email": "c@x.co", "msg_id": "m3"}),
             json.dumps({"_index": "l", "_source": {"ts": "2026-11-28T09:00:03Z", "event": "send", "email": "d@x.co",
                                                    "msg_id": "m4"}, "message": record}),
             json.dumps({"_index": "l", "_source": {"@timestamp": "2026-11-28T09:00:04Z", "message": record}})]
    log = tmp_path / "hits.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    case = read(tmp_path, log, envelope="elastic")
    assert [(r["line_no"], r["recipient"], r["msg_id"]) for r in records(case)] == [
        (1, "b@x.co", "m2"), (2, "c@x.co", "m3"), (3, "d@x.co", "m4"), (4, "a@x.co", "m1")]


@pytest.mark.slow
@pytest.mark.parametrize("name,entries", [
    ("elastic", [{"_index": "l", "_id": "1", "_source": {"@timestamp": "2026-11-28T09:00:01Z", "message": "{record}",
                                                         "host": {"name": "h1"}}},
                 {"_index": "l", "_id": "2", "_source": {"@timestamp": "2026-11-28T09:00:02Z", "message": "sent it",
                                                         "event": "send", "email": "b@x.co", "msg_id": "m2"}},
                 {"@timestamp": "2026-11-28T09:00:03Z", "message": "done", "log": {"original": "{record}"}},
                 {"_index": "l", "_id": "4", "_source": None}]),
    ("datadog", [{"date": "2026-11-28T09:00:01Z", "host": "h1", "message": "{record}", "attributes": {"x": 1}},
                 {"date": "2026-11-28T09:00:02Z", "host": "h1", "message": "sent it",
                  "attributes": {"event": "send", "email": "b@x.co", "msg_id": "m2"}},
                 {"date": "2026-11-28T09:00:03Z", "host": "h1", "attributes": {"event": "send", "email": "c@x.co",
                                                                               "msg_id": "m3"}},
                 {"date": "2026-11-28T09:00:04Z", "host": "h1", "message": "prose only"}]),
    ("cloud-logging", [{"insertId": "1", "logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:01Z",
                        "textPayload": "{record}"},
                       {"insertId": "2", "logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:02Z",
                        "jsonPayload": {"event": "send", "email": "b@x.co", "msg_id": "m2"}},
                       {"insertId": "3", "logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:03Z",
                        "json\\u0050ayload": {"event": "send", "email": "c@x.co", "msg_id": "m3"}},
                       {"insertId": "4", "logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:04Z"}]),
])
def test_a_json_platforms_record_is_its_message_else_its_object_of_fields(tmp_path, name, entries):
    # the record is the message where it is one, else the platform's object of fields: a hit's _source, Datadog's
    # attributes, Cloud Logging's jsonPayload (its key escaped or not); an entry holding none is no record
    record = "event=send email=a@x.co msg_id=m1"
    log = tmp_path / f"{name}.log"
    log.write_text("".join(json.dumps(entry).replace("{record}", record).replace("\\\\u", "\\u") + "\n"
                           for entry in entries), encoding="utf-8")
    case = read(tmp_path, log)
    assert case.inputs[0].envelope == name
    assert [(r["line_no"], r["recipient"], r["msg_id"]) for r in records(case)] == [
        (1, "a@x.co", "m1"), (2, "b@x.co", "m2"), (3, "c@x.co" if name != "elastic" else "a@x.co",
                                                   "m3" if name != "elastic" else "m1")]
    assert [row[0] for row in case.con.execute("SELECT line_no FROM skipped").fetchall()] == [4]


@pytest.mark.slow
@pytest.mark.parametrize("parser_path", ["sql", "c"])
def test_a_cloud_logging_entry_is_named_by_its_log_or_insert_id_and_timed_by_its_receipt_without_a_timestamp(
        tmp_path, parser_path):
    entries = [{"insertId": "1", "logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:01Z",
                "jsonPayload": {"event": "send", "email": "a@x.co", "msg_id": "m1"}},
               {"insertId": "2", "receiveTimestamp": "2026-11-28T09:00:02Z",
                "resource": {"labels": {"pod_name": "mailer-1"}},
                "jsonPayload": {"event": "send", "email": "b@x.co", "msg_id": "m2"}},
               {"logName": "p/logs/stdout", "timestamp": "2026-11-28T09:00:03Z",
                "receiveTimestamp": "2026-11-28T09:59:59Z",
                "textPayload": '{"event": "send", "email": "c@x.co", "msg_id": "m3"}'},
               {"event": "send", "email": "d@x.co", "msg_id": "m4", "receiveTimestamp": "2026-11-28T09:00:04Z"}]
    log = tmp_path / "entries.json"
    log.write_text("".join(json.dumps(entry) + "\n" for entry in entries), encoding="utf-8")
    with parser(parser_path):
        case = read(tmp_path, log)
    assert case.inputs[0].envelope == "cloud-logging"
    # the last line is no entry (neither a log name nor an insert id): its own record, without a time, is skipped
    assert [(r["line_no"], r["ts"], r["worker"], r["msg_id"]) for r in records(case)] == [
        (1, utc("2026-11-28T09:00:01"), None, "m1"), (2, utc("2026-11-28T09:00:02"), "mailer-1", "m2"),
        (3, utc("2026-11-28T09:00:03"), None, "m3")]
    assert case.con.execute("SELECT line_no, reason FROM skipped").fetchall() == [(4, "no readable timestamp")]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cri", "syslog", "rsyslog", "rfc5424", "docker-logs", "python-logging", "structlog",
                                  "zap", "slog", "logrus"])
def test_a_line_that_is_no_entry_and_starts_with_a_wide_character_is_passed_on_whole(tmp_path, name):
    # the SQL blocks cut a line after its header by bytes: a line without the header (its first character two
    # bytes wide) is passed on whole, and a message whose first character is wide is cut before it
    body = wrap(name, [f"ts=2026-11-28T09:00:00Z {A}", f"ts=2026-11-28T09:00:01Z é {A.replace('a1', 'a2')}"])
    log = tmp_path / "case.log"
    log.write_text(body + "é not an entry\nüber event=send\n", encoding="utf-8")
    sql, compiled = read_both(log)
    assert compiled == sql
    events, skipped = sql[0], sql[1]
    assert len(events) == 2 and [row for row in skipped if "not an entry" in str(row)]


# --- the worker is the most specific sender the platform names ----------------------------------------------

def _journal(unit: str, pid: str, second: int, email: str, **more) -> str:
    return json.dumps({"__REALTIME_TIMESTAMP": str(1764320400_000000 + second * 1_000000), "__CURSOR": f"s={second}",
                       "_HOSTNAME": "mail-1", "_SYSTEMD_UNIT": unit, "_PID": pid, "SYSLOG_IDENTIFIER": "mailer",
                       "MESSAGE": f"event=send campaign=c step=1 email={email} msg_id={unit}-{second}", **more})


@pytest.mark.slow
def test_two_units_of_one_host_are_two_workers_and_what_was_read_names_the_fields(tmp_path):
    # mailer@1 and mailer@2 on one host sending the same list at once: two workers (parallel-worker), not one worker
    # whose pids 4100 → 4101 read as a restart
    from forensics.findings import build_document

    people = ["a@x.co", "b@x.co", "c@x.co"]
    lines = [_journal(f"mailer@{n}.service", f"410{n}", 2 * i + n, email)
             for i, email in enumerate(people) for n in (1, 2)]
    log = tmp_path / "mail-1.json"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    document = build_document(load_case([str(log)]))
    [incident] = document["incidents"]
    assert (incident["kind"], incident["people"]) == ("parallel-worker", 3)
    assert incident["workers"] == ["mail-1/mailer@1.service", "mail-1/mailer@2.service"]
    assert document["inputs"][0]["sender"] == ("worker ← _HOSTNAME/_SYSTEMD_UNIT|SYSLOG_IDENTIFIER, "
                                               "incarnation ← _PID")


def test_a_records_own_worker_wins_over_the_envelopes_and_what_was_read_says_so(tmp_path):
    log = tmp_path / "mail-1.json"
    log.write_text(json.dumps({"__REALTIME_TIMESTAMP": "1764320400000000", "__CURSOR": "s=1", "_HOSTNAME": "mail-1",
                               "_SYSTEMD_UNIT": "mailer@1.service",
                               "MESSAGE": "event=send worker=w-9 email=a@x.co msg_id=m1"}) + "\n", encoding="utf-8")
    case = load_case([str(log)])
    assert case.con.execute("SELECT worker FROM events").fetchall() == [("w-9",)]
    assert case.inputs[0].sender == "worker ← the records' own key"


# --- envelopes are told by entries, not lines ------------------------------------------------------------

TRACEBACK = ["Traceback (most recent call last):", '  File "/app/send.py", line 3, in send', "TimeoutError: timeout"]


def _python_logging(messages: list[str], after: list[str]) -> str:
    lines = [f"2026-11-28 09:21:{26 + i:02d},123 INFO mailer.send: {m}" for i, m in enumerate(messages)]
    return "\n".join(TRACEBACK * 4 + [part for line in lines for part in [line, *after]]) + "\n"


@pytest.mark.slow
def test_a_python_logging_file_of_tracebacks_and_two_line_messages_is_told_by_its_entries(tmp_path):
    # 12 traceback lines first, then every message followed by a line of its own: a third of the lines are stamped,
    # every entry is
    sends = [f"event=send campaign=c step=1 email=p{i}@x.co msg_id=m{i}" for i in range(12)]
    log = tmp_path / "mailer.log"
    log.write_text(_python_logging(sends, ["  (delivered in 1.2 s)"]), encoding="utf-8")
    assert detect.detect_envelope(log.read_bytes()).name == "python-logging"
    assert load_case([str(log)]).records == 12


def test_a_file_a_known_envelope_fits_in_part_is_named_with_the_envelope_to_force(tmp_path):
    sends = [f"event=send campaign=c step=1 email=p{i}@x.co msg_id=m{i}" for i in range(6)]
    log = tmp_path / "mailer.log"  # each message followed by two lines of pairs of its own: a third of the entries
    log.write_text(_python_logging(sends, ["retry_policy=default backoff=2s", "pool=a queue=b"]), encoding="utf-8")
    with pytest.raises(InputError) as refused:
        load_case([str(log)])
    assert str(refused.value).startswith("no mail-send records found. ")
    assert (f"{log}: 6 of its first 18 entries look like Python logging, too few to read it as that; if it is, force "
            "it with --envelope python-logging") in str(refused.value)
    assert load_case([str(log)], reading=Reading(envelope="python-logging")).records == 6


@pytest.mark.slow
def test_docker_compose_logs_without_timestamps_name_each_records_container(tmp_path):
    case = read(tmp_path, FIXTURES / "compose" / "compose-logs.log")
    assert case.inputs[0].envelope == "compose"
    assert [(r["line_no"], r["worker"], r["recipient"]) for r in records(case)] == [
        (1, "mailer-1", "ana@example.com"), (2, "mailer-2", "cy@example.com"), (7, "mailer-2", "ben@example.com")]
    assert [r["envelope"]["ts"] for r in records(case)] == [None] * 3  # without -t the records' own times
