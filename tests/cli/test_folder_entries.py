"""A folder is read whole: its symlinked subfolders are followed (a loop ends, and is said), and whatever in it is not
a regular file (a dangling symlink, a FIFO) is listed as not read, never dropped without a word."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SEND = "2026-11-28T09:1{n}:00.000Z evt=sent worker=w{n} campaign=c-1 step=1 recipient=ann@acme.com msg_id=m{n}\n"
SKIP_HINT = ", or pass --skip-unreadable to read the rest and list it as not read)\n"


@pytest.fixture()
def logs(tmp_path):
    """logs/a/w1.log holds the first send to ann; elsewhere/w2.log, outside logs/, the second."""
    (tmp_path / "logs" / "a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "logs" / "a" / "w1.log").write_text(SEND.format(n=1))
    (tmp_path / "elsewhere" / "w2.log").write_text(SEND.format(n=2))
    return tmp_path / "logs"


def _document(cli, *args) -> dict:
    return json.loads(cli("diagnose", *args, "--format", "json").stdout)


@pytest.mark.slow
def test_a_symlinked_subfolder_is_read(cli, logs):
    (logs / "second").symlink_to(logs.parent / "elsewhere", target_is_directory=True)
    result = cli("diagnose", logs, "--fail-on-duplicates")
    assert result.exit_code == 3, result.stdout
    doc = _document(cli, logs)
    assert doc["complete"] is True
    assert [i["path"] for i in doc["inputs"]] == [str(logs / "a" / "w1.log"), str(logs / "second" / "w2.log")]


@pytest.mark.slow
def test_a_symlink_loop_ends_and_is_listed(cli, logs):
    (logs / "a" / "up").symlink_to("..", target_is_directory=True)
    (logs / "second").symlink_to(logs.parent / "elsewhere", target_is_directory=True)
    refused = cli("diagnose", logs)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert refused.stderr == f"Error: {logs / 'a' / 'up'}: symlink loop: leads back to {logs}, which is read once " \
                             f"(remove the link{SKIP_HINT}"
    doc = _document(cli, logs, "--skip-unreadable")
    assert doc["complete"] is False
    assert doc["lost_evidence"]["files_not_read"] == [
        {"path": str(logs / "a" / "up"), "reason": f"symlink loop: leads back to {logs}, which is read once"}]
    assert len(doc["inputs"]) == 2  # each file read once, not once per turn of the loop
    assert cli("diagnose", logs, "--skip-unreadable", "--fail-on-duplicates").exit_code == 4


@pytest.mark.slow
def test_a_dangling_symlink_is_listed_and_makes_the_run_incomplete(cli, logs):
    (logs / "w3.log").symlink_to("rotated-away.log")
    refused = cli("diagnose", logs)
    assert refused.exit_code == 1
    assert refused.stderr == f"Error: {logs / 'w3.log'}: dangling symlink to rotated-away.log " \
                             f"(remove it or move it out of the folder{SKIP_HINT}"
    doc = _document(cli, logs, "--skip-unreadable")
    assert doc["complete"] is False
    assert doc["lost_evidence"]["files_not_read"] == [
        {"path": str(logs / "w3.log"), "reason": "dangling symlink to rotated-away.log"}]
    table = cli("diagnose", logs, "--skip-unreadable")
    assert table.stdout.startswith(f"INCOMPLETE: 1 file(s) or folder(s) not read ({logs / 'w3.log'})")
    assert cli("diagnose", logs, "--skip-unreadable", "--fail-on-duplicates").exit_code == 4


def _mailmortem(*args) -> subprocess.CompletedProcess:
    # a process of its own, with a timeout: were the FIFO opened, the read would wait for a writer for ever
    return subprocess.run([sys.executable, "-m", "mailmortem", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("named", ["folder", "glob"])
def test_a_fifo_is_listed_never_opened(logs, named):
    os.mkfifo(logs / "a" / "w9.log")
    given = logs if named == "folder" else logs / "a" / "*.log"
    doc = json.loads(_mailmortem("diagnose", given, "--skip-unreadable", "--format", "json").stdout)
    assert doc["complete"] is False
    assert doc["lost_evidence"]["files_not_read"] == [
        {"path": str(logs / "a" / "w9.log"), "reason": "a FIFO (named pipe), not a regular file"}]
    assert _mailmortem("diagnose", given, "--skip-unreadable", "--fail-on-duplicates").returncode == 4


def test_entries_left_out_as_not_logs_stay_left_out(cli, logs):
    os.mkfifo(logs / ".pipe")
    (logs / "README.md").symlink_to("gone.md")
    doc = _document(cli, logs)
    assert doc["complete"] is True and doc["lost_evidence"]["files_not_read"] == []
