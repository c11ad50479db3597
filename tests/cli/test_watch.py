"""`mailmortem watch` against a real writer process (tests/watch_writer.py): each test waits on the watch's own
JSON Lines as they come (a generous overall timeout, never a fixed sleep) and asserts its events and exit code."""

from __future__ import annotations

import json
import os
import queue
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 60
pytestmark = pytest.mark.slow  # each starts two processes (about a second)


def send(msg_id: str, to: str = "ana@example.com", worker: str = "w1", ts: str = "2026-11-28T09:00:00Z") -> str:
    return f"ts={ts} event=send worker={worker} campaign=c-7 step=1 email={to} msg_id=<{msg_id}@mail.example.com>\n"


class Writer:
    def __init__(self):
        self.process = subprocess.Popen([sys.executable, "-m", "tests.watch_writer"], cwd=REPO, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def do(self, **command) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        assert self.process.stderr.readline() == "ok\n"

    def stop(self) -> None:
        self.process.stdin.close()
        self.process.wait(TIMEOUT_S)


class Watch:
    """`mailmortem watch … --format jsonl --poll 0.05`, its events read as they come."""

    def __init__(self, *args: str, stdin=None, as_nobody=None, cwd: Path = REPO):
        """`as_nobody`: the `unprivileged` fixture, to run the watch as uid 65534 (root reads any file)."""
        args = ("watch", *args, "--format", "jsonl", "--poll", "0.05")
        command = as_nobody.command(*args) if as_nobody else [sys.executable, "-m", "mailmortem", *args]
        env = as_nobody.env() if as_nobody else {**os.environ, "PYTHONPATH": str(REPO), "HOME": tempfile.gettempdir()}
        self.process = subprocess.Popen(command, cwd=cwd, text=True, stdin=stdin or subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.events: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.started = self.wait_for("start")

    def _read(self) -> None:
        for line in self.process.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def wait_for(self, event: str, **fields) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            got = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            assert got is not None, f"the watch ended before {event} {fields}: {self.seen} {self.stderr()}"
            self.seen.append(got)
            if got["event"] == event and all(got.get(k) == v for k, v in fields.items()):
                return got

    def exit_code(self) -> int:
        return self.process.wait(TIMEOUT_S)

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        return self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(TIMEOUT_S)


@pytest.fixture()
def logs():
    root = Path(tempfile.mkdtemp(prefix="mm-watch-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    for path in root.rglob("*"):
        path.chmod(stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def writer():
    started = Writer()
    yield started
    started.stop()


@pytest.fixture()
def watches():
    made: list[Watch] = []
    yield lambda *args, **kw: made.append(Watch(*args, **kw)) or made[-1]
    for watch in made:
        watch.stop()


def test_appended_lines_make_a_duplicate_and_lines_written_before_the_watch_do_not_count(logs, writer, watches):
    log = logs / "w1.log"
    log.write_text(send("m0"))  # before the watch: not counted (--since now)
    watch = watches(str(log), "--fail-on-duplicates")
    assert "after the watch began" in watch.started["detail"]
    writer.do(open="w1", path=str(log))
    writer.do(write="w1", text=send("m1") + send("m1"))  # one send logged twice: not a duplicate
    writer.do(write="w1", text=send("m2", worker="w1", ts="2026-11-28T09:00:05Z"))
    duplicate = watch.wait_for("duplicate")
    assert (duplicate["recipient"], duplicate["campaign"], duplicate["step"], duplicate["sends"]) == \
           ("ana@example.com", "c-7", "1", 2)
    assert [duplicate["first"]["msg_id"], duplicate["second"]["msg_id"]] == \
           ["m1@mail.example.com", "m2@mail.example.com"]
    assert [duplicate["first"]["line"], duplicate["second"]["line"]] == [2, 4]  # numbered as in the file
    assert watch.wait_for("end")["exit_code"] == 3
    assert watch.exit_code() == 3


def test_a_rename_rotation_is_followed_and_the_renamed_file_is_not_read_again(logs, writer, watches):
    log = logs / "mail.log"
    log.write_text("")
    watch = watches(str(logs), "--fail-on-duplicates")
    writer.do(open="mail", path=str(log))
    writer.do(write="mail", text=send("m1"))
    writer.do(write="mail", text=send("x1", to="bo@example.com"))
    os.rename(log, logs / "mail.log.1")
    writer.do(reopen="mail")
    writer.do(write="mail", text=send("m2", worker="w2", ts="2026-11-28T09:00:09Z"))
    rotated = watch.wait_for("rotated", source=str(log))
    duplicate = watch.wait_for("duplicate")
    assert rotated["detail"] == "rename" and duplicate["sends"] == 2
    assert (duplicate["first"]["msg_id"], duplicate["second"]["source"], duplicate["second"]["line"]) == \
           ("m1@mail.example.com", str(log), 1)
    assert watch.exit_code() == 3
    assert not [e for e in watch.seen if e["event"] == "new-file"]  # mail.log.1 holds lines already read


def test_a_copytruncate_rotation_is_read_again_from_the_start(logs, writer, watches):
    log = logs / "mail.log"
    log.write_text("")
    watch = watches(str(log), "--fail-on-duplicates")
    writer.do(open="mail", path=str(log))
    writer.do(write="mail", text=send("m1"))
    watch.wait_for("new-worker", worker="w1")  # the line was read
    shutil.copy(log, logs / "mail.log.1")
    os.truncate(log, 0)
    writer.do(write="mail", text=send("m2", worker="w2"))
    assert watch.wait_for("rotated")["detail"] == "copytruncate"
    duplicate = watch.wait_for("duplicate")
    assert (duplicate["second"]["msg_id"], duplicate["second"]["line"]) == ("m2@mail.example.com", 1)
    assert watch.exit_code() == 3


def test_a_new_worker_file_in_a_watched_folder_is_read_from_its_start(logs, writer, watches):
    (logs / "w1.log").write_text("")
    watch = watches(str(logs), "--gone-after", "0.2")
    writer.do(open="w1", path=str(logs / "w1.log"))
    writer.do(write="w1", text=send("m1", worker="w1"))
    watch.wait_for("new-worker", worker="w1")
    writer.do(open="w2", path=str(logs / "w2.log"))
    writer.do(write="w2", text=send("m2", worker="w2", ts="2026-11-28T09:00:01Z"))
    assert watch.wait_for("new-file")["source"] == str(logs / "w2.log")
    watch.wait_for("new-worker", worker="w2")
    duplicate = watch.wait_for("duplicate")
    assert (duplicate["first"]["worker"], duplicate["second"]["worker"]) == ("w1", "w2")
    assert watch.wait_for("kind")["kind"] == "parallel-worker"
    writer.do(write="w1", text=send("m3", worker="w1", ts="2026-11-28T09:00:02Z").replace("event=send", "event=start"))
    os.unlink(logs / "w2.log")  # gone and not back: lost evidence
    lost = watch.wait_for("lost")
    assert (lost["source"], lost["what"]) == (str(logs / "w2.log"), "gone")


def test_a_docker_json_file_log_is_unwrapped_as_diagnose_unwraps_it(logs, writer, watches):
    log = logs / "abc-json.log"
    log.write_text("")
    watch = watches(str(log), "--fail-on-duplicates")
    writer.do(open="d", path=str(log))
    for msg_id, ts in (("m1", "2026-11-28T09:21:26.1Z"), ("m2", "2026-11-28T09:21:29.5Z")):
        inner = f"event=send campaign=c-7 step=1 email=ana@example.com msg_id=<{msg_id}@mail.example.com>\n"
        writer.do(write="d", text=json.dumps({"log": inner, "stream": "stdout", "time": ts}) + "\n")
    duplicate = watch.wait_for("duplicate")
    assert (duplicate["first"]["ts"], duplicate["second"]["msg_id"]) == ("2026-11-28T09:21:26.100Z",
                                                                          "m2@mail.example.com")
    assert watch.exit_code() == 3


def test_a_stream_on_stdin_that_closes_is_lost_evidence(writer, watches):
    stream = subprocess.Popen([sys.executable, "-m", "tests.watch_writer"], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watch = watches("-", stdin=stream.stdout)
    for command in ({"stdout": send("m1") + send("m2", worker="w2")}, {"close_stdout": True}):
        stream.stdin.write(json.dumps(command) + "\n")
        stream.stdin.flush()
        assert stream.stderr.readline() == "ok\n"
    duplicate = watch.wait_for("duplicate")
    assert duplicate["second"]["source"] == "<stdin>"
    lost = watch.wait_for("lost")
    assert (lost["source"], lost["what"]) == ("<stdin>", "stream-closed")
    assert watch.exit_code() == 4
    stream.stdin.close()
    stream.wait(TIMEOUT_S)


def test_a_file_made_unreadable_mid_watch_ends_a_quiet_period_with_exit_4(logs, writer, watches, unprivileged):
    log = logs / "mail.log"
    log.write_text("")
    log.chmod(0o644)
    watch = watches(str(log), "--expect-quiet", "10m", as_nobody=unprivileged, cwd=Path(tempfile.gettempdir()))
    log.chmod(0)
    lost = watch.wait_for("lost")
    assert (lost["what"], lost["detail"]) == ("unreadable", "permission denied")
    assert watch.wait_for("end")["exit_code"] == 4
    assert watch.exit_code() == 4


def test_expect_quiet_exits_3_at_the_first_send_and_shows_it(logs, writer, watches):
    log = logs / "mail.log"
    log.write_text(send("m0"))
    watch = watches(str(log), "--expect-quiet", "15m")
    writer.do(open="mail", path=str(log))
    writer.do(write="mail", text=send("m1", to="cy@example.com"))
    shown = watch.wait_for("send")
    assert (shown["msg_id"], shown["recipient"], shown["worker"], shown["line"]) == \
           ("m1@mail.example.com", "cy@example.com", "w1", 2)
    assert watch.exit_code() == 3


def test_expect_quiet_exits_0_when_nothing_is_sent(logs, writer, watches):
    log = logs / "mail.log"
    log.write_text(send("m0"))
    watch = watches(str(log), "--expect-quiet", "0.5")
    writer.do(open="mail", path=str(log))
    writer.do(write="mail", text="ts=2026-11-28T09:00:00Z event=claim worker=w1 shard=s1\n")
    assert watch.wait_for("end")["exit_code"] == 0
    assert watch.exit_code() == 0


def test_for_ends_with_the_diagnose_summary_and_a_failing_hook_does_not_stop_the_watch(logs, writer, watches):
    log = logs / "mail.log"
    log.write_text("")
    marker = logs / "hook-ran"
    hook = f"{sys.executable} -c \"import sys, json; open({str(marker)!r}, 'a').write(sys.stdin.read()); sys.exit(7)\""
    watch = watches(str(log), "--for", "2s", "--on-duplicate", hook)
    writer.do(open="mail", path=str(log))
    writer.do(write="mail", text=send("m1", to="$(id)&x@example.com") + send("m2", to="$(id)&x@example.com"))
    watch.wait_for("duplicate")
    failed = watch.wait_for("hook-failed")
    assert failed["reason"] == "exit code 7"
    summary = watch.wait_for("summary")["diagnosis"]
    assert summary["summary"]["duplicated_people"] == 1 and summary["complete"] is True
    assert f"mailmortem affected {log}" in summary["incidents"][0]["remediation"][2]  # the next command reads the logs
    assert watch.exit_code() == 0
    given = json.loads(marker.read_text())
    assert given["event"] == "duplicate" and given["recipient"] == "$(id)&x@example.com"
