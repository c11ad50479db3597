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


def test_the_copy_is_removed_on_ctrl_c(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "mailmortem", "diagnose", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    proc.stdin.write(LOG[:5000])
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not _spools(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _spools(tmp_path), "the spool was never written"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and b"interrupted" in err
    assert _spools(tmp_path) == []
