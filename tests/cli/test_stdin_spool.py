"""`diagnose -` spools standard input to a file DuckDB can read; that copy never outlives the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

LOG = (Path(__file__).resolve().parents[2] / "sample_logs" / "parallel-worker" / "worker-sender-1.log").read_bytes()


def _run(tmp_path, data: bytes, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mailmortem", "diagnose", "-", *args], input=data,
                          capture_output=True, env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=300)


def _spools(tmp_path) -> list[Path]:
    return list(tmp_path.glob("mailmortem-stdin-*"))


@pytest.mark.slow
@pytest.mark.parametrize("data,code", [(LOG, 0), (b"\x00\x01binary\x00", 1), (b"no records here\n", 1)])
def test_the_copy_is_removed_after_success_and_error(tmp_path, data, code):
    assert _run(tmp_path, data).returncode == code
    assert _spools(tmp_path) == []


def _default_stopping_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _reading_stdin(tmp_path) -> subprocess.Popen:
    """A `diagnose -` that has copied part of its input and waits for the rest (standard input stays open)."""
    # started as a shell starts a command, each stopping signal at its default action: whoever runs the tests may
    # ignore one (nohup ignores SIGHUP), and an ignored SIGHUP is rightly left ignored by the run
    proc = subprocess.Popen([sys.executable, "-m", "mailmortem", "diagnose", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, preexec_fn=_default_stopping_signals)
    proc.stdin.write(LOG[:5000])
    proc.stdin.flush()
    # the event: the copy exists. Its folder is made, and set to be removed, before the copy is written in it; a
    # copy made before its removal was set up (a signal between the two kept it) would make this flaky
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("mailmortem-stdin-*/stdin.log")) and proc.poll() is None:
        assert time.monotonic() < deadline, "the copy was never written"
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read()
    return proc


@pytest.mark.slow
def test_the_copy_is_removed_on_ctrl_c(tmp_path):
    proc = _reading_stdin(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and b"interrupted" in err
    assert _spools(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_the_copy_is_removed_on_sigterm_and_sighup(tmp_path, signum):
    proc = _reading_stdin(tmp_path)
    proc.send_signal(signum)
    proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum
    assert _spools(tmp_path) == []


@pytest.mark.slow
def test_the_copy_of_a_killed_run_is_removed_by_the_next_run(tmp_path):
    proc = _reading_stdin(tmp_path)
    proc.kill()
    proc.communicate(timeout=120)
    [left] = _spools(tmp_path)  # SIGKILL: nothing in the process can run
    log = tmp_path / "mail-send.log"
    log.write_bytes(LOG)
    after = subprocess.run([sys.executable, "-m", "mailmortem", "diagnose", str(log)], capture_output=True,
                           env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=300)
    assert after.returncode == 0, after.stderr
    assert not left.exists() and _spools(tmp_path) == []
