"""A record that carries send fields of its own beside an envelope's keys is itself the send: Fluent Bit's kubernetes
filter with Merge_Log On keeps Docker's `log`, `stream` and `time` and merges the fields it parsed out of `log`
into the same record. Such a record is never taken for a Docker json-file entry whose `log` alone would be read
(envelope_table.carries_send, envelope_docker_json's mm_carries_send, the C unwrapper deferring), on both parser paths;
a plain Docker json-file log still reads as before."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forensics.ingest import detect, envelopes
from forensics.ingest.case import load_case
from forensics.simulate.envelopes import wrap
from tests.test_tokenizer_properties import READ_EVERY_WAY, needs_c
from tests.test_tokenizer_properties import read as read_with_parser

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "envelopes"
DOCKER_ID = "3f4e8a1b2c9d" + "0" * 52
DOCKER_LOG = FIXTURES / "docker" / "containers" / DOCKER_ID / f"{DOCKER_ID}-json.log"
PARSERS = pytest.mark.parametrize("parser", ["sql", "c"])


def docker(n: int, recipient: str) -> str:
    """A line as Docker's json-file driver writes it, a logfmt send inside."""
    return json.dumps({"log": f"event=sent campaign=c-7 step=1 recipient={recipient} msg_id=<m{n}@x>\n",
                       "stream": "stdout", "time": f"2026-11-28T09:{n // 60 % 60:02d}:{n % 60:02d}Z"},
                      separators=(",", ":"))


def merged(n: int, recipient: str, log: str = "mail handed to the relay\n") -> str:
    """A line as Fluent Bit writes it with Merge_Log On: Docker's keys, and the send's fields beside them."""
    return json.dumps({"log": log, "stream": "stdout", "time": f"2026-11-28T09:{n // 60 % 60:02d}:{n % 60:02d}Z",
                       "event": "sent", "campaign": "c-7", "step": 1, "worker": "w1", "recipient": recipient,
                       "msg_id": f"<m{n}@x>"}, separators=(",", ":"))


def written(tmp_path: Path, lines: list[str], name: str = "mailer.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_record_with_send_fields_beside_dockers_keys_is_no_docker_entry():
    head = "\n".join(merged(n, f"p{n}@x.com") for n in range(3)).encode()
    assert detect.detect_envelope(head) is None
    shouted = json.dumps({"log": "sent\n", "stream": "stdout", "time": "2026-11-28T09:00:00Z", "MSG_ID": "<m@x>"})
    assert detect.detect_envelope((shouted + "\n").encode() * 3) is None  # a key in any case, as fields are read
    assert detect.detect_envelope(DOCKER_LOG.read_bytes()).name == "docker-json"


@pytest.mark.slow
@PARSERS
def test_fluent_bit_merged_records_are_read_by_their_own_fields(tmp_path, monkeypatch, parser, cli):
    """Every record is a send whose `log` is prose: read as Docker's, none was a record ('no mail-send records')."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = written(tmp_path, [merged(0, "ana@x.com"), merged(1, "ben@x.com"), merged(2, "ana@x.com")])
    case = load_case([str(path)])
    assert (case.inputs[0].envelope, case.inputs[0].syntax, case.records) == (None, "jsonl", 3)
    result = cli("diagnose", path, "--fail-on-duplicates", "--format", "json")
    assert result.exit_code == 3, result.stderr
    document = json.loads(result.stdout)
    assert document["summary"]["duplicated_people"] == 1 and document["complete"] is True


@pytest.mark.slow
@PARSERS
def test_merged_records_among_dockers_own_lines_are_read_not_skipped(tmp_path, monkeypatch, parser, cli):
    """Docker's own lines make the file Docker json-file; the merged ones among them are each the record, passed on
    whole: the second sends to ana and ben are seen (it said 'No duplicate sends', exit 0)."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = written(tmp_path, [docker(n, f"p{n}@x.com") for n in range(6)]
                   + [merged(6, "p0@x.com"), merged(7, "p1@x.com")])
    summary = load_case([str(path)]).inputs[0]
    assert (summary.envelope, summary.lines, summary.records, summary.skipped) == ("docker-json", 8, 8, 0)
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 3, result.stderr
    assert "duplicated people 2" in result.stdout


@pytest.mark.slow
@PARSERS
def test_a_merged_record_past_the_inner_sample_is_counted_as_lost_and_located(tmp_path, monkeypatch, parser, cli):
    """Past the lines that tell the inner syntax (logfmt), a merged record passed on whole is no logfmt record: it
    is skipped, and as it looks like a send the run is incomplete and says where, first."""
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    count = envelopes.INNER_SAMPLE_LINES + 10
    path = written(tmp_path, [docker(n, f"p{n}@x.com") for n in range(count)] + [merged(count, "p0@x.com")])
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 4, result.stderr
    assert result.stdout.splitlines()[0] == (f"INCOMPLETE: 1 skipped line(s) look like mail-send records ({path}:"
                                             f"{count + 1}). Duplicates among them cannot be seen.")


@pytest.mark.slow
@PARSERS
def test_a_docker_json_file_log_reads_as_before(tmp_path, monkeypatch, parser):
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    case = load_case([str(DOCKER_LOG)], database=str(tmp_path / "case.duckdb"))
    summary = case.inputs[0]
    assert (summary.envelope, summary.lines, case.records, summary.first_skipped_lines) == ("docker-json", 5, 3, [4])
    rows = case.con.execute("SELECT recipient, msg_id, worker FROM events ORDER BY line_no").fetchall()
    assert rows == [("ana@example.com", "a1@mail.example.com", "3f4e8a1b2c9d"),
                    ("cy@example.com", "c3@mail.example.com", "3f4e8a1b2c9d"),
                    ("ben@example.com", "b2@mail.example.com", "3f4e8a1b2c9d/mailer")]


@needs_c
def test_dockers_own_lines_are_still_unwrapped_in_c(tmp_path, monkeypatch):
    from forensics.ingest.readers import unwrap

    taken, stage = [], unwrap.stage
    monkeypatch.setattr(unwrap, "stage", lambda *args, **kwargs: taken.append(stage(*args, **kwargs)) or taken[-1])
    monkeypatch.setenv("MAILMORTEM_PARSER", "c")
    path = written(tmp_path, [docker(n, f"p{n}@x.com") for n in range(4)])
    assert load_case([str(path)]).records == 4
    assert [t is not None for t in taken] == [True]


# --- any mix of Docker's lines and records carrying send fields beside Docker's keys ----------------------------

SEND_KEYS = {"event": ["event", "Event", "EVT", "action"], "recipient": ["recipient", "email", "To", "RCPT"],
             "msg_id": ["msg_id", "Message-ID", "messageid"]}
LOGS = ["event=sent recipient=log@x.com msg_id=<log@x>\n", "mail handed to the relay\n", "", "\n", "k=v\n",
        '{"level":"info"}\n', "prose with a@x.com\n", "event=sent\r\n"]


@st.composite
def docker_lines_with_sends(draw) -> tuple[str, list[str]]:
    """(file, the msg_ids of the records carrying send fields): Docker's lines, and Docker-shaped records that
    also hold a send key (any alias, any case; some hold only one), in any order, string values or numbers."""
    lines, own = [], []
    for n in range(draw(st.integers(1, 20))):
        log, at = draw(st.sampled_from(LOGS)), f"2026-11-28T09:00:{n:02d}Z"
        record = {"log": log, "stream": draw(st.sampled_from(["stdout", "stderr"])), "time": at}
        if draw(st.booleans()):
            msg_id = f"s{n}@x"
            fields = {draw(st.sampled_from(SEND_KEYS["msg_id"])): f"<{msg_id}>"}
            for canon in draw(st.sets(st.sampled_from(["event", "recipient"]))):
                fields[draw(st.sampled_from(SEND_KEYS[canon]))] = "sent" if canon == "event" else f"p{n}@x.com"
            if draw(st.booleans()):
                fields["step"] = draw(st.sampled_from([1, "1"]))
            items = list({**record, **fields}.items())
            record = dict(draw(st.permutations(items)))
            own.append(msg_id)
        lines.append(json.dumps(record, separators=(",", ":")))
    return "\n".join(lines) + "\n", own


@needs_c
@pytest.mark.slow
@READ_EVERY_WAY
@given(docker_lines_with_sends())
def test_records_carrying_send_fields_are_read_alike_on_both_paths_and_never_dropped(file):
    body, own = file
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "case.log"
        path.write_text(body, encoding="utf-8")
        sql, compiled = read_with_parser(path, "sql"), read_with_parser(path, "c")
    for at, part in enumerate(["events", "skips", "file summaries", "staged rows"]):
        assert compiled[at] == sql[at], f"{part} differ"
    if sql[0] == "refused":
        assert not own, sql[1]
        return
    raw = [str(row) for row in sql[0]] + [str(row) for row in sql[1]]  # a record read, or a skip that says so
    for msg_id in own:
        assert any(msg_id in text for text in raw), msg_id
