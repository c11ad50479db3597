"""`diagnose` / `affected` with `--provider-export` (issue 14 item 2): the provider's history as a witness.

Without logs the export alone names duplicates; with logs, duplicates the provider confirms but the log
misses are said first, never after a "No duplicates".
"""

from __future__ import annotations

import json

import pytest


def _log_and_export(tmp_path, people: int = 4):
    """A log with one send per person; the export holds those sends and one more to p0 (the log lost it)."""
    log, export = tmp_path / "send.log", tmp_path / "export.csv"
    log.write_text("".join(
        f"ts=2026-11-28T09:{i:02d}:00Z event=send worker=w1 campaign=c-1 step=1 email=p{i}@example.com "
        f"msg_id=<m{i}@app.example>\n" for i in range(people)))
    rows = [f"p{i}@example.com,<m{i}@app.example>,2026-11-28T09:{i:02d}:00Z,c-1,1" for i in range(people)]
    rows.append("p0@example.com,<m99@app.example>,2026-11-28T09:40:00Z,c-1,1")
    export.write_text("recipient,msg_id,sent_at,campaign,step\n" + "\n".join(rows) + "\n")
    return log, export


def test_with_logs_provider_confirmed_duplicates_the_log_misses_come_first_and_fail(cli, tmp_path):
    log, export = _log_and_export(tmp_path)
    result = cli("diagnose", log, "--provider-export", export, "--fail-on-duplicates")
    assert result.exit_code == 3, result.stdout
    first = result.stdout.splitlines()[0]
    assert first == ("PROVIDER-CONFIRMED DUPLICATES: the provider sent 1 person a campaign step more than once, "
                     "which the log does not show (1 send missing from the log). See the reconciliation below.")
    assert "No duplicates" not in result.stdout
