"""Issue 12 item 9: one remediation protocol — plans of what *will* change, runs `audit` knows, hints that work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.test_ab_cli import TEST, write_log
from tests.cli.test_claims_cli import LEADS


@pytest.mark.slow
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


SG = str(Path(__file__).resolve().parent.parent / "fixtures" / "providers" / "sendgrid-events.jsonl")


def _run_id(result, command: str) -> str:
    return re.search(rf"(?:Applied|Audit: mailmortem audit --run) (\S+?):? ", result.stderr)[1]


def _shown(cli, db, run_id) -> list[dict]:
    shown = cli("audit", "--db", db, "--run", run_id, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    return json.loads(shown.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["duckdb", "postgres"])
def test_ab_and_backfill_runs_are_audited_and_a_backfill_undo_is_refused(cli, tmp_path, request, kind):
    db = str(tmp_path / "state.duckdb") if kind == "duckdb" else request.getfixturevalue("pg_dsn")
    logs = write_log(tmp_path / "w.log", clean_a=45, clean_b=43, mixed=12)
    applied = cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--apply")
    rows = _shown(cli, db, _run_id(applied, "ab"))
    assert {r["table_name"]: len(r["new_values"]["inserted"]) for r in rows} == {"ab_exclusions": 12,
                                                                               "ab_assignments": 100}
    again = cli("ab-contamination", "--test-id", TEST, logs, "--db", db, "--apply")
    assert all(r["new_values"]["inserted"] == [] for r in _shown(cli, db, _run_id(again, "ab")))

    first = cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--db", db)
    assert first.exit_code == 0, first.stderr
    run_id = _run_id(first, "backfill")
    assert f"Audit: mailmortem audit --run {run_id} --db {db}" in first.stderr
    [row] = _shown(cli, db, run_id)
    assert row["command"] == "backfill-sentlog" and len(row["new_values"]["inserted"]) == 4
    assert ["AAAAAAAAAAAAAAAAAAAAAA", "bob@acme.com"] in row["new_values"]["inserted"]
    second = cli("backfill-sentlog", "--provider-export", SG, "--no-step", "--db", db)
    assert _shown(cli, db, _run_id(second, "backfill"))[0]["new_values"]["inserted"] == []
    listed = {r["run_id"] for r in json.loads(cli("audit", "--db", db, "--format", "json").stdout)}
    assert {run_id, _run_id(applied, "ab")} <= listed

    for run in (run_id, _run_id(applied, "ab")):
        refused = cli("audit", "--db", db, "--run", run, "--undo", "--apply")
        assert refused.exit_code == 1 and "undo is refused" in refused.stderr
        assert ("run backfill-sentlog again with the options that read more" in refused.stderr) == (run == run_id)
    assert cli("sentlog", "check", "--db", db, "--campaign", "c-42", "--step", "1",
               "--recipient", "bob@acme.com").exit_code == 3
