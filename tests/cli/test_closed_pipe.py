"""A closed output pipe (`| head`, `| true`) keeps the command's exit code: the answer is what the code says, and
"already sent" (3) or "duplicates" (3) must not read as 0 because the reader went away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SG = ROOT / "tests" / "fixtures" / "providers" / "sendgrid-events.jsonl"


def run_into_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run mailmortem with stdout a pipe whose read end is already closed: every write meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "mailmortem", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=300)
    finally:
        os.close(write_end)


@pytest.mark.slow
def test_sentlog_check_keeps_already_sent_through_a_closed_pipe(tmp_path):
    db = str(tmp_path / "s.duckdb")
    wrote = subprocess.run([sys.executable, "-m", "mailmortem", "backfill-sentlog", "--provider-export", str(SG),
                            "--no-step", "--db", db], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert wrote.returncode == 0, wrote.stderr
    check = run_into_closed_pipe("sentlog", "check", "--db", db, "--campaign", "c-42", "--step", "1",
                                 "--recipient", "jane@acme.com", cwd=tmp_path)
    assert check.returncode == 3, check.stderr
    assert "Traceback" not in check.stderr and "Broken pipe" not in check.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [("diagnose", "--fail-on-duplicates", "--format", "table"),
                                  ("diagnose", "--fail-on-duplicates", "--format", "json"),
                                  ("affected", "--format", "jsonl"), ("affected", "--format", "csv")])
def test_a_closed_pipe_keeps_the_exit_code_of_every_format(tmp_path, args):
    command, logs = args[0], str(ROOT / "sample_logs" / "retry")
    piped = run_into_closed_pipe(command, logs, *args[1:], cwd=tmp_path)
    plain = subprocess.run([sys.executable, "-m", "mailmortem", command, logs, *args[1:]], capture_output=True,
                           text=True, cwd=tmp_path, timeout=300)
    assert plain.returncode in ((3, 4) if command == "diagnose" else (0,)), plain.stderr
    assert piped.returncode == plain.returncode, piped.stderr
    assert "Traceback" not in piped.stderr and "Error" not in piped.stderr
