"""Issue 12 item 9: one remediation protocol — plans of what *will* change, runs `audit` knows, hints that work."""

from __future__ import annotations

import json
import re

from tests.cli.test_ab_cli import TEST, write_log
from tests.cli.test_claims_cli import LEADS


def test_a_second_ab_apply_plans_zero_changes(cli, tmp_path):
    logs, db = write_log(tmp_path / "w.log", clean_a=45, clean_b=43, mixed=12), tmp_path / "ab.duckdb"
    first = cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--apply")
    assert "+ 12 contaminated" in first.stderr and "+ 100 sticky" in first.stderr
    again = cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--apply", "--format", "json")
    assert again.exit_code == 0, again.stderr
    assert "ab_exclusions   + 0 contaminated" in again.stderr
    assert "ab_assignments  + 0 sticky assignments from each person's first-seen variant; 100 already stored, kept" \
        in again.stderr
    doc = json.loads(again.stdout)
    assert (doc["plan"]["exclusions"], doc["plan"]["assignments"], doc["plan"]["assignments_kept"]) == (0, 0, 100)
    assert (doc["applied"]["exclusions_written"], doc["applied"]["assignments_written"]) == (0, 0)


def test_the_hint_after_requeue_stale_keeps_an_explicit_db(cli, leads):
    db = leads(LEADS, sent=[("c-1", "1", "done@example.com", "m-1")])
    applied = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply")
    run_id = re.search(r"Applied (\S+):", applied.stderr)[1]
    assert f"Audit: mailmortem audit --run {run_id} --db {db}   (add --undo to revert)" in applied.stderr


def test_requeue_stale_help_names_no_duckdb_default(cli):
    result = cli("requeue-stale", "--help")
    assert result.exit_code == 0 and "duckdb" not in result.stdout.lower()
