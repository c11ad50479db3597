"""Line envelopes taken off in C (forensics.ingest.readers.unwrap: Docker json-file, CRI, docker logs --timestamps,
CloudWatch's S3 export, syslog, rsyslog, RFC 5424, journald, the prefixes of Python logging, structlog, zap, slog
and logrus, and Loki, Cloud Logging, CloudWatch events, Datadog and Elasticsearch one entry per line), logfmt or
JSON records inside: every file it reads gives the staged rows, events, skips and summaries that DuckDB's
unwrapping gives (queries/envelopes.sql, with the same compiled tokenizer or JSON Lines reader after it, and the
SQL path), and every file it cannot read exactly goes back to DuckDB."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forensics.ingest.readers import logfmt, runtime, unwrap
from forensics.ingest.case import load_case
from forensics.simulate.envelopes import wrap
from tests.test_envelopes import file_name
from tests.test_jsonl_reader_properties import CLEAN, FIRST, _object, json_line
from tests.test_tokenizer_properties import READ_EVERY_WAY, logfmt_line, parser
from tests.test_tokenizer_properties import read as read_with_parser

needs_unwrapper = pytest.mark.skipif(unwrap._unwrap is None, reason="the compiled unwrapper was not built")
A = "ts=2026-11-28T09:00:00Z event=send campaign=c-7 step=1 email=ana@example.com msg_id=<a1@mail.example.com>"


@pytest.fixture
def taken(monkeypatch) -> list[bool]:
    """Whether each read the unwrapper was asked for went through it (True) or back to DuckDB (False)."""
    seen, stage = [], unwrap.stage

    def spied(*args, **kwargs):
        result = stage(*args, **kwargs)
        seen.append(result is not None)
        return result

    monkeypatch.setattr(unwrap, "stage", spied)
    return seen


def read_three(path: Path, range_bytes: int = runtime.RANGE_BYTES) -> tuple:
    """(SQL path, C tokenizer after DuckDB's unwrapping, C unwrapper) readings of one file, the compiled readers
    taking it `range_bytes` at a time."""
    sql = read_with_parser(path, "sql")
    kept, runtime.BUILT["unwrap"] = runtime.BUILT["unwrap"], None
    try:
        duckdb_unwrapped = read_with_parser(path, "c", range_bytes)
    finally:
        runtime.BUILT["unwrap"] = kept
    return sql, duckdb_unwrapped, read_with_parser(path, "c", range_bytes)


def _file(tmp: str, body: str, name: str = "case.log") -> Path:
    path = Path(tmp) / name
    path.write_text(body, encoding="utf-8")
    return path


# JSON lines of the platforms' shapes, some entries of them and some not: missing fields, nesting, escapes
JSON_NOT_QUITE = [
    '{"line":"a=b"}', '{"line":"k=v","timestamp":"2026-11-28T09:00:00.5+01:00","labels":{"stream":"stderr","pod":"p"}}',
    '{"labels":{"host":"h","app":"a"},"line":"\\u00e9 k=v \\ud83d\\ude00","timestamp":"2026-11-28T09:00:00Z"}',
    '{"labels":"x","line":"k=v","timestamp":"2026-11-28T09:00:00Z"}', '{"logName":"p/logs/stderr","textPayload":"a=b"}',
    '{"insertId":"1","textPayload":"k=v \\" q","receiveTimestamp":"2026-11-28T09:00:01Z","resource":{"labels":{}}}',
    '{"insertId":7,"jsonPayload":{"event":"send","n":[1,true,null,"\\u001b\\/"]},"logName":"l/logs/stdout"}',
    '{"message":"k=v","timestamp":1764320400123}', '{"message":"k=v","timestamp":"1764320400"}',
    '{"message": "k=v" , "timestamp": 1764320400123, "logGroupName": "g", "logStreamName": "s" }',
    '{"message":"no pairs","attributes":{}}', '{"message":"prose","attributes":{"a":{"b":[1,-2,"x"]},"c":false}}',
    '{"message":null,"attributes":"k=v","date":"2026-11-28T09:00:00Z","host":"h","service":"s"}',
    '{"message":"  {\\"a\\":1}","date":1764320400}', '{"message":"\\u00a0prose","host":{"name":"h"}}',
    '{"_source":{"message":"a=b","@timestamp":"2026-11-28T09:00:00.5+01:00","kubernetes":{"pod":{"name":"p"}}}}',
    '{"_source":{"message":"prose","log":{"original":"k=v"},"service":{"name":"s"}},"_id":"1"}',
    '{"@timestamp":"2026-11-28T09:00:00Z","message":"prose \\t tab","host":{"hostname":"h"},"n":12345678901234567890}',
    '{"_index":"i","_source":{"event":{"original":"x=1 \\u2028"},"container":{"name":"c"}}}', "{ }", "{x",
]


@st.composite
def line_log(draw) -> tuple[str, str]:
    """(envelope, file): random logfmt lines, hostile values and all but none Docker would split, as one of the
    platforms the C module reads writes them, with lines that are no entry of it among them."""
    name = draw(st.sampled_from(sorted(unwrap.KINDS)))
    lines = [line.decode("utf-8", "replace") for line in draw(st.lists(logfmt_line(), min_size=1, max_size=25))
             if len(line) < 16_000]
    body = wrap(name, lines or [A]).split("\n")
    for _ in range(draw(st.integers(0, 3))):  # not entries: passed on whole, without an envelope
        body.insert(draw(st.integers(0, len(body) - 1)), draw(st.sampled_from(
            ["", "not json", "{}", '{"time":"x"}', "2026-11-28T09:00:00Z stdout Fx no head", " stdout F x",
             "2026-11-28T09:00:00Z stdin F a=b", "{\"log\":\"a=b\\n\"}", "2026-11-28T09:00:00Z stderr F:x k=v",
             "2026-11-28T09:00:00Z", "2026-11-28T09:00:00+0100 a=b", "2026-11-28T09:00:00. a=b",
             "Nov 28 09:21:26 host", "<13>Nov  2 09:21:26 h app: a=b", "Nov 28 09:21:26 h app[x]: a=b",
             "2026-11-28T09:21:26Z h app[7] a=b", "Nov 128 09:21:26 h a: b=c", '{"MESSAGE":"a=b"}',
             "2026-11-28 09:21:26,123 INFO x: no pairs", "2026-11-28 09:21:26,123 - a 2026-11-28 09:00:00Z b=c",
             "2026-11-28 09:21:26 [info] x", "2026-11-28 09:21:26+01:00 [ warn ] ev\tk=v", "time=x level=info msg=",
             'time="2026-11-28T09:00:00Z" level=info source=a.go:1 msg="a \\" b" k=v', "time=t level= msg=x",
             "2026-11-28T09:00:00Z\tINFO\tmsg a=b", "1764321686.1\tINFO\ta=b", "9\t\tx",
             "<13>1 2026-11-28T09:00:00Z h - - - [a@1 b][c@2]x k=v", "<13>1 2026-11-28T09:00:00Z h a p m [a@1",
             "<13>1 2026-11-28T09:00:00.5+01:00 - - - - -", "<13>1 2026-11-28T09:00:00Z h a 7 m [x][y] \ufeffk=v",
             *JSON_NOT_QUITE])))
    return name, "\n".join(body)


def assert_read_alike(name: str, body: str) -> None:
    """A file of `name`'s envelope reads alike unwrapped in C, by DuckDB, and on the SQL path."""
    with tempfile.TemporaryDirectory() as tmp:
        sql, duckdb_unwrapped, unwrapped = read_three(_file(tmp, body, file_name(name)))
    assert unwrapped == duckdb_unwrapped
    assert unwrapped == sql


@needs_unwrapper
@pytest.mark.slow
@READ_EVERY_WAY
@given(line_log())
def test_a_line_envelope_reads_alike_unwrapped_in_c_or_in_duckdb(file):
    assert_read_alike(*file)


# Datadog's and Elasticsearch's text for a line that is no record is JSON (the attributes, the document): in the
# sample, that makes the records both JSON and logfmt, DuckDB's to read (see the next test instead)
RENDERING_PROSE = ("datadog", "elastic")


# What may follow an application's prefix: JSON tails mm_json_object takes (valid, perhaps before spaces) or not (a
# tab or a Unicode space after it, something after the object, not valid), key=value pairs beside braces.
PREFIXED_JSON = ['sent {"evt":"send","email":"a@b.co","messageid":"m1","timestamp":"2026-11-28T09:00:00Z"}',
                 '{"evt":"send","email":"a@b.co","messageid":"m2"}   ', '{"evt":"send","messageid":"m3"}\t',
                 'msg {"evt":"send"} evt=send msg_id=m4', "a {b} c=d", "x={", '{"a": [1, {"b": null}], "c": true}',
                 '{"a":"\\ud83d\\ude00 \\u00e9 \\n"}', '{"a":1} }', '{"a":1}\u00a0', '{"a":1}\u3000 ', "{}", "{ }",
                 '{"evt":"send","evt":"claim","messageid":"m5"}', '{"a":-0.5e+3,"b":1E2}', '[{"a":1}]']


@st.composite
def clean_json_line(draw) -> bytes:
    """A strict JSON object (escapes, unicode, nesting, spaces and tabs around it): a prefix's tail the C module
    judges itself, where the hostile lines of json_line mostly send a prefixed file back to DuckDB."""
    members, _scalar, space, _value = CLEAN
    return (draw(space) + _object(draw(members), [draw(space) for _ in range(4)]) + draw(space)).encode()


@st.composite
def json_log(draw) -> tuple[str, str]:
    """(envelope, file): random JSON lines (escapes, unicode, nesting, keys twice, lines that are no object or no
    JSON; or strict objects only) and the JSON tails an application's prefix may end with, as one of the
    platforms the C module reads writes them, a record first (the file is told JSON inside)."""
    name = draw(st.sampled_from(sorted(unwrap.KINDS)))
    line = clean_json_line() if draw(st.booleans()) else json_line()
    lines = [line.decode("utf-8", "replace") for line in draw(st.lists(line, min_size=1, max_size=25))]
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(PREFIXED_JSON)))
    body = wrap(name, [FIRST.decode(), *lines]).split("\n")
    for _ in range(draw(st.integers(0, 2))):  # not entries: passed on whole, without an envelope
        body.insert(draw(st.integers(1, len(body) - 1)), draw(st.sampled_from(["", "not json", '{"time":"x"}',
                                                                               FIRST.decode(), "{}"])))
    return name, "\n".join(body)


@needs_unwrapper
@pytest.mark.slow
@READ_EVERY_WAY
@given(json_log())
def test_json_records_in_a_line_envelope_read_alike_unwrapped_in_c_or_in_duckdb(file):
    assert_read_alike(*file)


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", sorted(set(unwrap.KINDS) - set(RENDERING_PROSE)))
def test_a_clean_log_of_each_line_envelope_is_unwrapped_in_c(tmp_path, taken, name):
    body = wrap(name, [A, "", "not a record", 'event=send email=b@example.com msg_id=m2 error="a \\"q\\" é"'])
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), body, file_name(name)))
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) == 2


JSON_PLATFORMS = ("loki", "cloud-logging", "cloudwatch", "datadog", "elastic")


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", JSON_PLATFORMS)
def test_a_json_platforms_simulated_log_is_unwrapped_in_c_rendering_what_it_must(tmp_path, taken, name):
    """Past the sample of 200 lines (which says logfmt), a line that is no record makes Datadog's and
    Elasticsearch's text the attributes or the document as DuckDB renders them."""
    lines = [f"event=send email=p{i}@example.com msg_id=m{i} note=\"é \\\" \\u00e9 😀\"" for i in range(250)]
    body = wrap(name, lines + ["", "Traceback (most recent call last):", '  File "a\\b.py", line 2\x1b', A])
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), body))
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) == 251


J = '{"timestamp":"2026-11-28T09:00:00Z","evt":"email_sent","email":"ana@example.com","messageid":"<a1@x>"}'


# jsonPayloads as Cloud Logging's reading renders them while it reads them (one pass), written by hand: spaces and
# tabs dropped, escapes re-rendered, nesting to the depth read, empty containers, literals and integers kept
RENDERED_PAYLOADS = [
    '{ "evt" :\t"send", "email": "d@x.co", "messageid": "m4", "n": [ 1, -20, true, false, null, [], {} ] }',
    '{"evt":"send","email":"e@x.co","messageid":"m5","note":"\\/ \\u00e9 \\ud83d\\ude00 \\u001b \\b\\f\\t \\" \\\\ é"}',
    '{"evt":"send","email":"f@x.co","messageid":"m6","deep":' + "[" * 62 + "0" + "]" * 62 + "}",
    '{"evt":"send","email":"g@x.co","messageid":"m7","meta":{"k\\u00e9y":{"a":[{"b":"c"}]}}}',
    '[{"evt":"send"}]', "{}",
]


@pytest.mark.slow
@needs_unwrapper
def test_cloud_loggings_json_payload_is_rendered_as_duckdb_renders_it(tmp_path, taken):
    entries = [f'{{"insertId":"{k}","jsonPayload":{payload},"logName":"p/logs/stdout",'
               f'"timestamp":"2026-11-28T09:00:0{k}Z"}}' for k, payload in enumerate(RENDERED_PAYLOADS)]
    body = wrap("cloud-logging", [J]) + "\n" + "\n".join(entries) + "\n"
    log = _file(str(tmp_path), body)
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    in_c, in_duckdb = saved_both_ways(tmp_path, log)  # the records' kept text, as rendered
    assert taken == [True, True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) == 5
    assert in_c == in_duckdb and '{"evt":"send","email":"d@x.co","messageid":"m4","n":[1,-20,true,false,null,[],{}]}' \
        in [row[-2] for row in in_c]


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", sorted(set(unwrap.KINDS) - {"cloud-logging"}))
def test_json_records_of_each_line_envelope_are_unwrapped_and_read_in_c(tmp_path, taken, name):
    # a blank line, one that is no record, one the JSON reader leaves to SQL (a number with an exponent, which
    # in Cloud Logging's jsonPayload, rendered as DuckDB renders it, sends the file back to DuckDB)
    records = [J, "", '{"note": "no record"}', '{"evt":"send","email":"b@x.co","messageid":"m2","attempt":1e0}',
               '{"evt": "send", "email": "c@x.co", "messageid": "m3", "meta": {"to": "\\u00e9@x.co"}}']
    body = wrap(name, records)
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), body, file_name(name)))
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) == 3


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", sorted(unwrap.KINDS))
def test_the_simulators_json_lines_in_each_line_envelope_are_read_in_c(tmp_path, taken, name):
    from forensics.simulate.run import simulate

    result = simulate("mixed", 40, tmp_path / "sim", seed=1, syntax="jsonl", split_workers=False)
    lines = result.files[0].read_text(encoding="utf-8").split("\n")[:-1]
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), wrap(name, lines), file_name(name)))
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) > 40


@pytest.mark.slow
@needs_unwrapper
def test_a_saved_case_keeps_every_json_record_as_duckdb_does(tmp_path, taken):
    log = _file(str(tmp_path), wrap("journald", [J, "", '{"a": 1e5}', '"a string"', "12"]))
    in_c, in_duckdb = saved_both_ways(tmp_path, log)
    assert taken == [True] and in_c == in_duckdb and in_c[0][-2] == J


def saved_both_ways(tmp_path, log: Path) -> tuple[list, list]:
    """The staged rows of a saved case of `log`, unwrapped in C and by DuckDB (both with the compiled readers,
    whatever MAILMORTEM_PARSER says)."""
    def staged(database: str) -> list:
        with parser("c"):
            case = load_case([str(log)], database=str(tmp_path / database))
        rows = case.con.execute("SELECT * FROM staged_1 ORDER BY rowid").fetchall()
        case.con.close()
        return rows

    in_c = staged("c.duckdb")
    kept, runtime.BUILT["unwrap"] = runtime.BUILT["unwrap"], None
    try:
        return in_c, staged("duckdb.duckdb")
    finally:
        runtime.BUILT["unwrap"] = kept


def docker_entry(log: str, **extra) -> str:
    return json.dumps({"log": log, "stream": "stdout", "time": "2026-11-28T09:00:00.123456789Z", **extra},
                      separators=(",", ":"), ensure_ascii=False)


# What the C module leaves to DuckDB: each file is then read as DuckDB reads it.
DEFERRED = {
    "a piece of a long line": docker_entry("event=send email=a@example.com ") + "\n" + docker_entry("msg_id=m1\n"),
    "an unfinished last entry": docker_entry(A + "\n") + "\n" + docker_entry("event=send"),
    "an entry of two lines": docker_entry(A + "\nevent=send email=b@example.com msg_id=m2\n"),
    "another key": docker_entry(A + "\n", attrs={"tag": "mailer"}),
    "a space in the JSON": docker_entry(A + "\n").replace(',"stream"', ', "stream"'),
    "an escaped key": docker_entry(A + "\n").replace('"stream"', '"str\\u0065am"'),
    # a raw tab in a key, after two entries that tell the envelope: DuckDB's JSON reader refuses that line
    "a key holding a tab": "\n".join([docker_entry(A + "\n")] * 2 + [docker_entry(A + "\n")[:-1] + ',"t\tg":"x"}']),
    "a journald key holding a tab": "\n".join(
        [json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A})] * 2
        + [json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A})[:-1] + ', "N\tT": "x"}']),
    "a key twice": docker_entry(A + "\n")[:-1] + ',"log":"x\\n"}',
    "a number": docker_entry(A + "\n").replace('"stdout"', "1"),
    "another stream": docker_entry(A + "\n").replace('"stdout"', '"stdin"'),
    "a time of another form": docker_entry(A + "\n").replace("2026-11-28T09:00:00.123456789Z", "1764320400"),
    "a CR": docker_entry(A + "\n") + "\r\n" + docker_entry(A + "\n") + "\r",  # CRLF ends (a mix is read with LF ends)
    "a CRI piece": "2026-11-28T09:00:00.1Z stdout P event=send\n2026-11-28T09:00:00.1Z stdout F  msg_id=m1 email=a@b.c",
    "a time of ten digits": "2026-11-28T09:00:00.123456789Z " + A + "\n2026-11-28T09:00:00.1234567891Z " + A,
    "a syslog date that is none": "Feb 30 09:21:26 host app[1]: " + A,
    "an rsyslog time DuckDB reads its own way": "2026-11-28T09:21:26.1234567890123+00:00 host app: " + A,
    "a cut journald message": json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A,
                                          "_LINE_BREAK": "eof"}),
    "a journald message of bytes": json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456",
                                               "MESSAGE": [101, 118, 101, 110, 116, 61, 120]}),
    "a journald entry without its time": json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A})
                                         + "\n" + json.dumps({"MESSAGE": A, "_HOSTNAME": "h"}),
    "a journald message of two lines": json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456",
                                                   "MESSAGE": A + "\n" + A}),
    "json-seq": "\x1e" + json.dumps({"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A}),
    "a prefix ending in JSON DuckDB's reader alone takes": "2026-11-28 09:21:26,123 INFO mailer: " + A
                                                           + ' {"a": 1,}',
    "a prefix's JSON tail before a Unicode space": '2026-11-28T09:00:00.123Z\tinfo\tsent\t{"evt":"send"}\u2000',
    "a lone surrogate in a prefix's JSON tail": '2026-11-28 09:21:26 [info     ] sent {"evt":"send","a":"\\ud800"}',
    "records both JSON and logfmt": docker_entry(J + "\n") + "\n" + docker_entry(A + "\n"),
    "a JSON record with a line of two": docker_entry(J + "\n" + J + "\n"),
    "a Python logging date that is none": "2026-02-30 09:21:26,123 INFO mailer: " + A,
    "an slog time of another form": "time=1764321686 level=INFO msg=sent " + A,
    "a logrus time with an escape": 'time="2026-11-28T09:00:00\\Z" level=info msg="sent" ' + A,
    "an RFC 5424 nil time": "<134>1 2026-11-28T09:00:00Z h app 1 - - " + A + "\n<134>1 - h app 1 - - " + A,
    "RFC 5424 structured data with a quote": '<134>1 2026-11-28T09:00:00Z h app 1 - [x@1 a="b"] ' + A,
    "a zap epoch time": "1764321686.123\tinfo\tsent\t" + A + "\n2026-11-28T09:00:00.123Z\tinfo\tsent\t" + A,
    "a prefix's JSON tail that does not parse, among JSON records":
        "2026-11-28 09:21:26,123 INFO mailer: " + J + "\n2026-11-28 09:21:27,123 INFO é: retry {later} " + J,
    "a zap time holding a brace, among JSON records":
        "2026-11-28T09:00:00.123Z\tinfo\tsent\t" + J + "\n1{\tinfo\tsent\t" + J,
    **{f"{name}: {case}": wrap(name, [A]) + line for name, case, line in [
        ("loki", "another stream", '{"labels":{"stream":"stdin"},"line":"k=v","timestamp":"2026-11-28T09:00:00Z"}'),
        ("loki", "a wanted key twice", '{"line":"k=v","line":"k=w","timestamp":"2026-11-28T09:00:00Z"}'),
        ("loki", "a label twice", '{"labels":{"host":"a"},"labels":{},"line":"k=v","timestamp":"2026-11-28T09:00:00Z"}'),
        ("loki", "an escaped key", '{"li\\u006ee":"k=v","timestamp":"2026-11-28T09:00:00Z"}'),
        ("loki", "a line of two lines", '{"line":"k=v\\nk=w","timestamp":"2026-11-28T09:00:00Z"}'),
        ("loki", "a time of another form", '{"line":"k=v","timestamp":"1764320400123456789"}'),
        ("loki", "a trailing comma", '{"line":"k=v","timestamp":"2026-11-28T09:00:00Z",}'),
        ("loki", "NaN", '{"line":"k=v","timestamp":"2026-11-28T09:00:00Z","n":NaN}'),
        ("loki", "a line that is no JSON", '{"line":"k=v"'),
        ("cloud-logging", "no payload", '{"insertId":"1","protoPayload":{"a":"b"}}'),
        ("cloud-logging", "a fraction rendered", '{"insertId":"1","jsonPayload":{"n":1.50}}'),
        ("cloud-logging", "a fraction deep in the payload", '{"insertId":"1","jsonPayload":{"a":[{"b":[1, -2.5]}]}}'),
        ("cloud-logging", "a payload nested past the depth read", '{"insertId":"1","jsonPayload":{"a":' + "[" * 64
         + "]" * 64 + "}}"),
        ("cloud-logging", "a raw control character in the payload", '{"insertId":"1","jsonPayload":{"a":"x\x01"}}'),
        ("cloud-logging", "a lone surrogate in the payload", '{"insertId":"1","jsonPayload":{"a":"\\udc00"}}'),
        ("cloudwatch", "epoch seconds with a fraction", '{"message":"k=v","timestamp":1764320400.5}'),
        ("cloudwatch", "too few digits", '{"message":"k=v","timestamp":17643204}'),
        ("datadog", "a record past a Unicode space", '{"message":"\\u00a0{\\"a\\":1}","date":"2026-11-28T09:00:00Z"}'),
        ("datadog", "an exponent rendered", '{"message":"prose","attributes":{"n":1e5}}'),
        ("elastic", "a _source of another kind", '{"_source":"k=v"}'),
        ("elastic", "a null _source", '{"_source":null,"message":"k=v"}'),
        ("elastic", "-0 rendered", '{"message":"prose","n":-0}'),
    ]},
}


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("case", list(DEFERRED))
def test_what_the_c_module_cannot_read_exactly_goes_back_to_duckdb(tmp_path, taken, case):
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), DEFERRED[case] + "\n"))
    assert taken == [False] and unwrapped == duckdb_unwrapped == sql


@pytest.mark.slow
@needs_unwrapper
def test_escapes_and_the_times_docker_writes_are_read_as_duckdb_reads_them(tmp_path, taken):
    logs = [A + "\r\n", "not a record\r\n", "a\rb=c\n", 'event=send email=b@example.com msg_id=m2 error="tab\\there é \\u00e9 😀 \u2028"\n',
            "event=send email=c@example.com msg_id=<m3@x> note=\"\\\\\" x=\\/\n", "\n"]
    body = "\n".join(json.dumps({"time": f"2026-11-28T09:00:0{i}.{'1234567'[:i % 4 + 4]}Z", "stream": "stderr",
                                 "log": log}, separators=(",", ":")) for i, log in enumerate(logs))
    sql, duckdb_unwrapped, unwrapped = read_three(_file(str(tmp_path), body + "\n"))
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) == 3


@pytest.mark.slow
@needs_unwrapper
def test_a_saved_case_keeps_every_line_as_duckdb_does(tmp_path, taken):
    log = _file(str(tmp_path), wrap("cri", [A, "", "not a record"]))
    in_c, in_duckdb = saved_both_ways(tmp_path, log)
    assert taken == [True] and in_c == in_duckdb and in_c[0][-2] == A


@pytest.mark.slow
@needs_unwrapper
def test_the_file_path_names_the_container_as_on_the_duckdb_path(tmp_path, taken):
    folder = tmp_path / "containers" / ("ab12" * 16)
    folder.mkdir(parents=True)
    log = folder / f"{'ab12' * 16}-json.log"
    log.write_text(wrap("docker-json", [A]), encoding="utf-8")
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    envelope = unwrapped[0][0][-1]
    assert envelope["container"] == "ab12ab12ab12" and envelope["stream"] == "stdout"


@pytest.mark.slow
@needs_unwrapper
def test_a_kubelet_log_path_names_the_pod_and_container_as_on_the_duckdb_path(tmp_path, taken):
    folder = tmp_path / "pods" / "outreach_mailer-7d9f5_0c1d2e3f-aaaa-bbbb-cccc-123456789abc" / "mailer"
    folder.mkdir(parents=True)
    log = folder / "0.log"
    log.write_text(wrap("cri", [A, "event=send email=b@example.com msg_id=m2 worker=w-2"]), encoding="utf-8")
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    assert [event[3] for event in unwrapped[0]] == ["mailer-7d9f5", "w-2"]  # the worker: the pod, else the record's


@pytest.mark.slow
@needs_unwrapper
def test_a_syslog_stamp_takes_the_year_before_for_a_month_past_the_files_last(tmp_path, taken):
    from forensics.ingest.load import Reading

    log = _file(str(tmp_path), "Dec 31 23:59:59 host app[7]: " + A.replace("ts=2026-11-28T09:00:00Z ", "") + "\n"
                + "Jan  1 00:00:01 host app[7]: event=send email=b@example.com msg_id=m2\n")
    os.utime(log, (1767225601, 1767225601))  # modified 2026-01-01: December was 2025's
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    assert [event[1].year for event in unwrapped[0]] == [2025, 2026]
    assert unwrapped[0][0][-1] == {"ts": unwrapped[0][0][1], "stream": None, "host": "host", "unit": "app",
                                   "container": None, "pid": "7"}
    with parser("c"):
        load_case([str(log)], reading=Reading(tz="Europe/Berlin"))
    assert taken == [True, ]  # a zone-less stamp read in another zone than UTC is DuckDB's: not asked at all


@pytest.mark.slow
@needs_unwrapper
def test_a_journald_entry_names_its_host_unit_and_pid_as_on_the_duckdb_path(tmp_path, taken):
    entries = [{"__REALTIME_TIMESTAMP": "1764321686123456", "MESSAGE": A, "_HOSTNAME": "mail-1", "_PID": "812",
                "SYSLOG_IDENTIFIER": "mailer", "PRIORITY": "6", "__CURSOR": "s=1;i=2"},
               {"__REALTIME_TIMESTAMP": "1764321687000000", "MESSAGE": "event=send email=b@example.com msg_id=m2",
                "_SYSTEMD_UNIT": "mailer.service", "SYSLOG_IDENTIFIER": "mailer", "CONTAINER_NAME": "c-1"}]
    log = _file(str(tmp_path), "\n".join(json.dumps(e) for e in entries) + "\n")
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    assert [event[3] for event in unwrapped[0]] == ["mail-1/mailer", "c-1"]  # the worker: container, else host/unit


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", ["docker-json", "cri"])
def test_a_line_handed_back_after_the_first_range_sends_the_whole_file_to_duckdb(tmp_path, taken, monkeypatch, name):
    monkeypatch.setattr("forensics.ingest.readers.sql.SAMPLE_LINES", 1)  # the first range holds the sample, however small
    lines = [f"event=send email=p{i}@example.com msg_id=m{i}" for i in range(40)]
    body = wrap(name, lines).split("\n")
    body[30] = wrap(name, [], last="event=send email=cut@example.com").rstrip("\n")  # a piece: handed back
    log = _file(str(tmp_path), "\n".join(body))
    sql, duckdb_unwrapped, unwrapped = read_three(log, 300)
    assert taken == [False] and unwrapped == duckdb_unwrapped == sql and len(unwrapped[0]) >= 39


@pytest.mark.slow
@needs_unwrapper
@pytest.mark.parametrize("name", ["docker-json", "loki"])
def test_the_samples_come_from_a_head_grown_past_blank_lines_as_duckdb_reads_them(tmp_path, taken, monkeypatch, name):
    """The first range is sampled from its head; a head of blank inner lines says nothing of the syntax inside, so
    it grows until it holds the non-blank sample: JSON records after 300 blank lines are read as JSON."""
    monkeypatch.setattr(unwrap, "HEAD_BYTES", 64)
    monkeypatch.setattr("forensics.ingest.readers.sql.SAMPLE_LINES", 1)
    records = [json.dumps({"event": "send", "email": f"p{i}@example.com", "msg_id": f"m{i}"}) for i in range(250)]
    log = _file(str(tmp_path), wrap(name, [""] * 300 + records), file_name(name))
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    assert len(unwrapped[0]) == 250  # every record an event: read as JSON, not as logfmt


@pytest.mark.slow
@needs_unwrapper
def test_cloud_run_instances_and_legacy_gke_pods_are_the_workers_on_both_paths(tmp_path, taken):
    # two Cloud Run instances of one service (labels.instanceId), two legacy GKE pods on one node (the pod only in the
    # entry's labels, or as resource.labels.pod_id): each its own worker, never the service or the node
    run = {"type": "cloud_run_revision", "labels": {"service_name": "mailer", "revision_name": "mailer-00042-abc"}}
    gke = {"type": "container", "labels": {"container_name": "mailer", "instance_id": "81321", "cluster_name": "c"}}
    pod_label = "container.googleapis.com/pod_name"
    entries = [
        {"insertId": "1", "logName": "projects/p/logs/run.googleapis.com%2Fstdout", "resource": run,
         "labels": {"instanceId": "00c61b117c7f"}, "textPayload": A},
        {"insertId": "2", "logName": "projects/p/logs/run.googleapis.com%2Fstdout", "resource": run,
         "labels": {"instanceId": "00c61b117c80"}, "textPayload": A},
        {"insertId": "3", "logName": "projects/p/logs/mailer", "resource": gke, "textPayload": A,
         "labels": {pod_label: "mailer-5d8f-a", "compute.googleapis.com/resource_name": "gke-node-1"}},
        {"insertId": "4", "logName": "projects/p/logs/mailer", "textPayload": A,
         "resource": {**gke, "labels": {**gke["labels"], "pod_id": "mailer-5d8f-b"}},
         "labels": {"compute.googleapis.com/resource_name": "gke-node-1"}},
    ]
    log = _file(str(tmp_path), "\n".join(json.dumps(e) for e in entries) + "\n")
    sql, duckdb_unwrapped, unwrapped = read_three(log)
    assert taken == [True] and unwrapped == duckdb_unwrapped == sql
    assert [event[3] for event in unwrapped[0]] == ["00c61b117c7f", "00c61b117c80", "mailer-5d8f-a", "mailer-5d8f-b"]
