"""What `mailmortem watch` shows where: events on stdout, lost evidence at once on stderr in either format, the
status line on stderr; text from the logs escaped."""

from __future__ import annotations

import json

from mailmortem.cli.watch_view import View

LOST = {"event": "lost", "source": "w1.log", "what": "unreadable", "detail": "permission denied"}


def test_lost_evidence_is_said_on_stderr_in_text_and_in_json_lines_too(capsys):
    View("jsonl").emit(LOST)
    out, err = capsys.readouterr()
    assert json.loads(out) == LOST
    assert err == "LOST EVIDENCE w1.log: unreadable: permission denied (exit code 4)\n"
    View("text").emit(LOST)
    assert capsys.readouterr() == ("", err)


def test_the_status_line_names_sends_per_worker_people_files_and_idle_seconds_escaped(capsys):
    View("text").status({"sends_per_minute": {"w1\x1b[2J": 120, None: 3}, "duplicated_people": 2, "files": 3,
                         "idle_s": {"a.log": 0.5, "b.log": 61.0}, "lost": 1})
    out, err = capsys.readouterr()
    assert out == "" and "\x1b" not in err.replace("\\x1b", "")
    assert err == ("sends in the last minute: w1\\x1b[2J 120/min, - 3/min | duplicated people: 2 | files followed: 3 | "
                   "since the last line: a.log 0.5s, b.log 61s | LOST: 1\n")


def test_a_duplicate_is_one_line_on_stdout_and_a_rotation_a_note_on_stderr(capsys):
    send = {"msg_id": "m1@x", "worker": "w1", "ts": "2026-11-28T09:00:00.000Z", "source": "a.log", "line": 3}
    view = View("text")
    view.emit({"event": "duplicate", "recipient": "ana@example.com", "campaign": "c-7", "step": "1", "sends": 2,
               "kind": None, "first": send, "second": {**send, "msg_id": "m2@x", "worker": "w2", "line": 9}})
    view.emit({"event": "rotated", "source": "a.log", "detail": "rename"})
    out, err = capsys.readouterr()
    assert out == ("DUPLICATE ana@example.com (campaign c-7, step 1): "
                   "m1@x by w1 at 2026-11-28T09:00:00.000Z (a.log:3), "
                   "then m2@x by w2 at 2026-11-28T09:00:00.000Z (a.log:9)\n")
    assert err == "a.log rotated (rename): read from its start\n"
