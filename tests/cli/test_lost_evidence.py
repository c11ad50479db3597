"""A run that lost evidence says so first, in the headline and the JSON, and never exits as if all-clear."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SEND = "2026-11-28T09:1{n}:00.000Z evt=sent worker=w{w} campaign=c-1 step=1 recipient={who} msg_id=m{n}{w}"
NOISE = ["", '10.0.0.1 - - [28/Nov/2026:08:49:33 +0000] "GET /healthz HTTP/1.1" 200 2 "-" "kube-probe/1.29"',
         "Traceback (most recent call last):", '  File "/app/sender.py", line 214, in deliver',
         "TimeoutError: timeout waiting for ack"]
BROKEN_SEND = '{"ts": "2026-11-28T09:19:00Z", "action": "sent", "to": "bob@acme.com'  # cut mid-record


def _log(tmp_path, lines):
    path = tmp_path / "mail-send.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sends(duplicated: bool):
    people = ["ann@acme.com", "ann@acme.com" if duplicated else "cy@acme.com"]
    return [SEND.format(n=n, w=n, who=who) for n, who in enumerate(people)]


@pytest.mark.slow
@pytest.mark.parametrize("duplicated,code", [(False, 0), (True, 3)])
def test_noise_loses_nothing(cli, tmp_path, duplicated, code):
    path = _log(tmp_path, _sends(duplicated)[:1] + NOISE + _sends(duplicated)[1:])
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is True and doc["lost_evidence"]["lines"] == 0
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == code


@pytest.mark.slow
@pytest.mark.parametrize("duplicated", [False, True])
def test_a_skipped_send_line_makes_the_run_incomplete(cli, tmp_path, duplicated):
    path = _log(tmp_path, _sends(duplicated) + [BROKEN_SEND] + NOISE)
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is False
    assert doc["lost_evidence"]["by_file"] == [{"path": str(path), "lines": 1, "first_lines": [3]}]
    table = cli("diagnose", path)
    assert table.stdout.startswith("INCOMPLETE: 1 skipped line(s) look like mail-send records")
    assert f"{path}:3" in table.stdout.splitlines()[0]
    assert "No duplicates: every person" not in table.stdout
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == 4  # wins over 3


def test_a_line_naming_an_address_is_evidence(cli, tmp_path):
    path = _log(tmp_path, _sends(False) + ["garbled: delivered to dee@acme.com?"])
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is False and doc["lost_evidence"]["lines"] == 1


def _rotating(monkeypatch, rotate):
    """Make the logs change between the look that told their syntax and the read (logrotate during the run)."""
    from forensics.ingest import load

    read = load._load_all

    def rotated_then_read(con, files, *args):
        for file in files:
            rotate(Path(file.source.path))
        return read(con, files, *args)

    monkeypatch.setattr(load, "_load_all", rotated_then_read)


def test_a_log_truncated_during_the_run_is_refused_not_read_short(cli, tmp_path, monkeypatch):
    # copytruncate: the duplicate sends at the end would be lost and the run would look all-clear
    path = _log(tmp_path, NOISE + _sends(True))
    _rotating(monkeypatch, lambda log: os.truncate(log, 100))
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert f"{path}: the file shrank from " in result.stderr
    assert "to 100 bytes (rotated or truncated?) while it was being read; copy the logs and run again on the copy" \
        in result.stderr


def test_a_log_truncated_and_written_again_during_the_run_is_refused(cli, tmp_path, monkeypatch):
    # copytruncate, then the agent logs on: the file is longer than it was, yet not the log that was looked at
    path = _log(tmp_path, _sends(True))
    again = "\n".join(NOISE * 20) + "\n"
    _rotating(monkeypatch, lambda log: (os.truncate(log, 0), log.write_text(again)))
    assert len(again) > os.path.getsize(path)
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (f"Error: {path}: the file was emptied and written again (its first bytes changed: "
                             "truncated by a rotation?) while it was being read; copy the logs and run again on "
                             "the copy\n")


def test_a_log_renamed_away_during_the_run_is_refused(cli, tmp_path, monkeypatch):
    path = _log(tmp_path, _sends(True))
    _rotating(monkeypatch, lambda log: (log.rename(log.with_suffix(".1")), log.write_text(SEND.format(
        n=9, w=9, who="new@acme.com") + "\n")))
    result = cli("diagnose", path)
    assert result.exit_code == 1
    assert f"{path}: the file was replaced or removed (rotated?) while it was being read" in result.stderr


def test_a_live_log_that_grows_during_the_run_is_read_as_it_was(cli, tmp_path, monkeypatch):
    path = _log(tmp_path, _sends(True))
    _rotating(monkeypatch, lambda log: log.write_text(log.read_text() + "\n".join(NOISE) + "\n"))
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.exit_code == 3


# A send record too long to read (forensics.ingest.repair.MAX_LINE_BYTES): one whose fields run on past a long
# value, and one written behind a long run of other output without a line end. Ann is sent twice.
FIRST_SEND = {"logfmt": "2026-11-28T09:10:00.000Z evt=sent worker=w1 campaign=c-1 step=1 recipient=ann@acme.com "
                        "msg_id=m1",
              "jsonl": '{"ts": "2026-11-28T09:10:00Z", "evt": "sent", "worker": "w1", "campaign": "c-1", "step": 1, '
                       '"recipient": "ann@acme.com", "msg_id": "m1"}'}
LONG_SEND = {"logfmt": '2026-11-28T09:11:00.000Z evt=sent worker=w2 note="{pad}" campaign=c-1 step=1 '
                       "recipient=ann@acme.com msg_id=m2",
             "jsonl": '{{"ts": "2026-11-28T09:11:00Z", "evt": "sent", "worker": "w2", "note": "{pad}", "campaign": '
                      '"c-1", "step": 1, "recipient": "ann@acme.com", "msg_id": "m2"}}'}
GLUED_SEND = {"logfmt": "{pad} 2026-11-28T09:11:00.000Z evt=sent worker=w2 campaign=c-1 step=1 recipient=ann@acme.com "
                        "msg_id=m2",
              "jsonl": '{pad}{{"ts": "2026-11-28T09:11:00Z", "evt": "sent", "worker": "w2", "campaign": "c-1", '
                       '"step": 1, "recipient": "ann@acme.com", "msg_id": "m2"}}'}


def _with_long_send(tmp_path, syntax: str, shape: dict, pad: int) -> Path:
    path = tmp_path / f"mail-send.{syntax}"
    path.write_text(FIRST_SEND[syntax] + "\n" + shape[syntax].format(pad="x" * pad) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("parser", ["c", "sql"])
@pytest.mark.parametrize("syntax", ["logfmt", "jsonl"])
@pytest.mark.parametrize("shape", [LONG_SEND, GLUED_SEND], ids=["fields-past-a-long-value", "glued-behind-output"])
def test_a_send_too_long_to_read_is_lost_evidence_on_both_paths(cli, tmp_path, monkeypatch, parser, syntax, shape):
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = _with_long_send(tmp_path, syntax, shape, 9_000_000)
    doc = json.loads(cli("diagnose", path, "--format", "json").stdout)
    assert doc["complete"] is False
    assert doc["lost_evidence"]["by_file"] == [{"path": str(path), "lines": 1, "first_lines": [2]}]
    assert doc["inputs"][0]["records"] == 1 and doc["inputs"][0]["first_skipped_lines"] == [2]
    result = cli("diagnose", path, "--fail-on-duplicates")
    assert result.stdout.splitlines()[0] == (f"INCOMPLETE: 1 skipped line(s) look like mail-send records ({path}:2). "
                                             "Duplicates among them cannot be seen.")
    assert "No duplicates: every person" not in result.stdout
    assert result.exit_code == 4


@pytest.mark.slow
@pytest.mark.parametrize("parser", ["c", "sql"])
@pytest.mark.parametrize("syntax", ["logfmt", "jsonl"])
def test_a_long_send_within_the_readers_limit_is_read_whole(cli, tmp_path, monkeypatch, parser, syntax):
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    path = _with_long_send(tmp_path, syntax, LONG_SEND, 1_000_000)
    assert json.loads(cli("diagnose", path, "--format", "json").stdout)["complete"] is True
    assert cli("diagnose", path, "--fail-on-duplicates").exit_code == 3  # Ann, twice


@pytest.mark.slow
def test_a_file_whose_send_lines_were_all_lost_is_named_in_the_headline(cli, tmp_path):
    # worker 2 logs through Python logging, each message followed by two lines of pairs: too few stamped entries to
    # tell the envelope, so every send of it is skipped; "No duplicates" must name that file, not only the first line
    one = _log(tmp_path, _sends(False))
    two = tmp_path / "worker-2.log"
    two.write_text("\n".join(f"2026-11-28 09:21:{i:02d},123 INFO mailer: event=send campaign=c-1 step=1 "
                             f"email=p{i}@acme.com msg_id=m{i}\nretry_policy=default backoff=2s\npool=a queue=b"
                             for i in range(5)) + "\n", encoding="utf-8")
    table = cli("diagnose", one, two)
    assert table.exit_code == 0, table.stderr
    assert (f"No duplicates among the records read, but every send-looking line of {two} was lost (5; see the first "
            "line and the notes): its sends were not compared.") in table.stdout
    assert "force it with --envelope python-logging" in table.stdout
