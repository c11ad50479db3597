"""`mailmortem requeue-stale` and `mailmortem audit` end to end on a real PostgreSQL."""

from __future__ import annotations

import csv
import io
import json

import psycopg
import pytest

LEADS = """VALUES
  (1, 'done@example.com', 'in-progress', 'w1', now() - interval '2 hours'),
  (2, '=HYPERLINK("http://evil")', 'in-progress', 'w2', now() - interval '2 hours'),
  (3, 'fresh@example.com', 'in-progress', 'w3', now() - interval '1 minute'),
  (4, 'q@example.com', 'queued', NULL, NULL);
"""


@pytest.fixture()
def db(leads):
    return leads(LEADS, sent=[("c-1", "1", "done@example.com", "m-1")])


def statuses(dsn) -> dict:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT lead_id, status FROM leads").fetchall())


def test_dry_run_prints_plan_and_changes_nothing(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m")
    assert result.exit_code == 0, result.stderr
    assert "2 claims in 'in-progress' older than 2700s (server clock): 1 → 'sent' (in the sent-log), 1 → 'queued'" \
        in result.stderr
    assert "Dry run: nothing changed" in result.stderr
    assert "done@example.com" in result.stdout
    assert statuses(db) == {1: "in-progress", 2: "in-progress", 3: "in-progress", 4: "queued"}


def test_apply_then_audit_then_undo(cli, db):
    applied = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--format", "json")
    assert applied.exit_code == 0, applied.stderr
    document = json.loads(applied.stdout)
    assert document["applied"] and document["result"] == {"to_sent": 1, "to_queued": 1, "skipped_locked": 0,
                                                          "left_changed": 0, "sent_since_plan": 0}
    assert {c["lead_id"]: c["outcome"] for c in document["changes"]} == {"1": "sent", "2": "queued"}
    assert statuses(db) == {1: "sent", 2: "queued", 3: "in-progress", 4: "queued"}
    run = document["run_id"]
    assert f"mailmortem audit --run {run}" in applied.stderr

    shown = cli("audit", "--db", db, "--run", run, "--format", "json")
    assert shown.exit_code == 0 and {r["row_key"] for r in json.loads(shown.stdout)} == {"1", "2"}
    listed = cli("audit", "--db", db, "--format", "json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == [run]

    preview = cli("audit", "--db", db, "--run", run, "--undo")
    assert preview.exit_code == 0 and "2 restorable" in preview.stderr and statuses(db)[2] == "queued"
    undone = cli("audit", "--db", db, "--run", run, "--undo", "--apply")
    assert undone.exit_code == 0 and "2 restored" in undone.stderr
    assert statuses(db) == {1: "in-progress", 2: "in-progress", 3: "in-progress", 4: "queued"}


def test_undo_says_a_lead_claimed_again_since_the_run_changed_and_leaves_it(cli, db):
    applied = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--format", "json")
    run = json.loads(applied.stdout)["run_id"]
    with psycopg.connect(db, autocommit=True) as worker:  # the lead the run marked sent is claimed again
        worker.execute("UPDATE leads SET status = 'in-progress', claimed_by = 'w7', claimed_at = now() "
                       "WHERE lead_id = 1")
    preview = cli("audit", "--db", db, "--run", run, "--undo", "--format", "json")
    assert preview.exit_code == 0
    assert f"Undo plan for {run}: 1 changed since the run, 1 restorable." in preview.stderr
    assert {r["row_key"]: r["state"] for r in json.loads(preview.stdout)} == {"1": "changed since the run",
                                                                           "2": "restorable"}
    undone = cli("audit", "--db", db, "--run", run, "--undo", "--apply")
    assert undone.exit_code == 0 and ": 1 changed since the run, 1 restored." in undone.stderr
    assert statuses(db) == {1: "in-progress", 2: "in-progress", 3: "in-progress", 4: "queued"}
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT claimed_by FROM leads WHERE lead_id = 1").fetchone() == ("w7",)


def test_show_sql_prints_the_plan_statements_with_quoted_names(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--show-sql", "--col", "status=status")
    assert result.exit_code == 0
    assert "-- 8. requeue_to_sent (1 rows)" in result.stderr and "-- 9. requeue_to_queued (1 rows)" in result.stderr
    assert "-- 2. requeue_lock_sent_log: " in result.stderr and "LOCK TABLE sent_log IN SHARE MODE" in result.stderr
    assert 'UPDATE "leads" AS t' in result.stderr and "FOR UPDATE SKIP LOCKED" in result.stderr
    assert statuses(db)[2] == "in-progress"


def test_max_changes_refuses_a_plan_larger_than_reviewed(cli, db):
    refused = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--max-changes", "1")
    assert refused.exit_code == 1
    assert refused.stderr == ("Error: the plan would change 2 rows, more than --max-changes 1: nothing changed; "
                              "review the plan again\n")
    assert statuses(db)[2] == "in-progress"
    assert cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--max-changes", "2").exit_code == 0
    assert statuses(db)[2] == "queued"


def test_second_apply_changes_nothing(cli, db):
    cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply")
    again = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply")
    assert again.exit_code == 0 and "0 marked sent, 0 re-queued" in again.stderr


def test_csv_is_spreadsheet_safe(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert {r["email"] for r in rows} == {"done@example.com", "'=HYPERLINK(\"http://evil\")"}


@pytest.mark.parametrize("args", [("--table", 'leads"; DROP TABLE leads; --'), ("--table", "leads;"),
                                  ("--col", 'status=x"; DROP TABLE leads; --'), ("--col", "claimed_at=a b")])
def test_hostile_identifiers_are_refused_and_never_executed(cli, db, args):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: refusing") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert len(statuses(db)) == 4


def test_bad_password_is_never_printed(cli, pg_dsn):
    host = pg_dsn.split("@", 1)[1]
    result = cli("requeue-stale", "--db", f"postgresql://nosuchuser:Sup3rS3cret!@{host}", "--older-than", "45m")
    assert result.exit_code == 1 and result.stderr.startswith("Error: cannot connect")
    assert "Sup3rS3cret" not in result.stderr + result.stdout and "***" in result.stderr
    audit = cli("audit", "--db", f"postgresql://nosuchuser:Sup3rS3cret!@{host}")
    assert audit.exit_code == 1 and "Sup3rS3cret" not in audit.stderr + audit.stdout


def test_bad_duration_is_a_usage_error(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "soon")
    assert result.exit_code == 2 and "bad duration 'soon'" in result.stderr


def test_duckdb_target_is_refused_without_creating_a_file(cli, tmp_path):
    target = tmp_path / "local.duckdb"
    result = cli("requeue-stale", "--db", target, "--older-than", "45m")
    assert result.exit_code == 1 and "need PostgreSQL" in result.stderr and not target.exists()


def test_missing_table_is_one_line(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--table", "nope")
    assert result.exit_code == 1 and result.stderr == 'Error: cannot read stale claims from nope: relation "nope" ' \
                                                      'does not exist\n'


def test_audit_flag_combinations(cli, db):
    assert cli("audit", "--db", db, "--undo").exit_code == 2
    assert cli("audit", "--db", db, "--run", "x", "--apply").exit_code == 2
    unknown = cli("audit", "--db", db, "--run", "nope")
    assert unknown.exit_code == 1 and "no audit rows for run nope" in unknown.stderr


def test_logs_report_worst_batch_and_warn_on_short_lease(cli, db, tmp_path):
    log = tmp_path / "send.log"
    log.write_text("\n".join([
        "2026-11-28T09:00:00.000Z event=claim worker=w1 shard=s1 lease=600s",
        "2026-11-28T09:01:00.000Z event=send worker=w1 shard=s1 campaign=c-1 email=a@x.co msg_id=<m1@x>",
        "2026-11-28T09:08:00.000Z event=release worker=w1 shard=s1",
    ]) + "\n")
    result = cli("requeue-stale", "--db", db, "--older-than", "10m", "--logs", log)
    assert result.exit_code == 0, result.stderr
    assert "Worst batch in the logs: 480s" in result.stderr
    assert "Warning: --older-than 600s is under 1.5× the worst batch (480s)" in result.stderr
    assert "Warning: the lease in the logs (600s)" in result.stderr


def test_logs_are_read_with_the_reading_options_diagnose_takes(cli, db, tmp_path):
    """requeue-stale --logs reads the logs as diagnose does (the lease-expiry next step repeats how they were read):
    here the shard under the team's own name, and only the incident's window, whose batch took 60 s."""
    log = tmp_path / "send.log"
    log.write_text("\n".join([
        "2026-11-28T09:00:00.000Z event=claim worker=w1 lane=s1 lease=600s",
        "2026-11-28T09:08:00.000Z event=release worker=w1 lane=s1",
        "2026-11-28T11:00:00.000Z event=claim worker=w1 lane=s2 lease=600s",
        "2026-11-28T11:00:30.000Z event=send worker=w1 lane=s2 campaign=c-1 email=a@x.co msg_id=<m1@x>",
        "2026-11-28T11:01:00.000Z event=release worker=w1 lane=s2",
    ]) + "\n")
    result = cli("requeue-stale", "--db", db, "--older-than", "10m", "--logs", log, "--field", "shard=lane",
                 "--since", "2026-11-28T10:00Z")
    assert result.exit_code == 0, result.stderr
    assert "Worst batch in the logs: 60s (worker w1, shard s2" in result.stderr


@pytest.mark.parametrize("command", ["requeue-stale", "audit"])
def test_help_has_examples(cli, command):
    result = cli(command, "--help")
    assert result.exit_code == 0 and "Examples:" in result.stdout and f"mailmortem {command}" in result.stdout


def test_a_lead_held_by_an_unconfirmed_reservation_is_listed_and_left_alone(cli, db):
    from remediation import reservations

    with psycopg.connect(db) as conn:
        conn.execute("INSERT INTO leads VALUES (5, 'Held <held@example.com>', 'in-progress', 'w5', "
                     "now() - interval '2 hours')")
        reservations.reserve(conn, "c-1", "1", "held@example.com", None, "w5", 3)
        conn.commit()
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--format", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [h["lead_id"] for h in document["held"]] == ["5"] and document["unconfirmed_reservations"] == 1
    assert "5" not in {c["lead_id"] for c in document["changes"]}
    assert "1 stale claims are held" in result.stderr and "mailmortem sentlog unconfirmed" in result.stderr
    assert statuses(db)[5] == "in-progress"
    table = cli("requeue-stale", "--db", db, "--older-than", "45m")
    assert "Held: unconfirmed send reservation" in table.stdout and "Held <held@example.com>" in table.stdout


def test_a_campaign_matching_no_sent_log_row_is_refused_unless_no_sends_yet(cli, db):
    refused = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply", "--campaign", "C1")
    assert refused.exit_code == 1 and "the sent-log's campaigns: 'c-1'" in refused.stderr
    assert statuses(db)[2] == "in-progress"
    allowed = cli("requeue-stale", "--db", db, "--older-than", "45m", "--campaign", "C1", "--no-sends-yet",
                  "--all-campaigns")
    assert allowed.exit_code == 0 and "No sends yet: --campaign 'C1' matches no sent-log row" in allowed.stderr


def test_naive_claim_time_needs_its_zone(cli, leads):
    dsn = leads(schema="CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT, claimed_by TEXT, "
                       "claimed_at TIMESTAMP); INSERT INTO leads VALUES (1, 'a@x.co', 'in-progress', 'w', "
                       "(now() AT TIME ZONE 'UTC') - interval '5 seconds')")
    refused = cli("requeue-stale", "--db", dsn, "--older-than", "45m", env={"PGTZ": "America/Los_Angeles"})
    assert refused.exit_code == 1 and "pass --claimed-at-zone ZONE" in refused.stderr
    given = cli("requeue-stale", "--db", dsn, "--older-than", "45m", "--claimed-at-zone", "UTC", "--apply",
                env={"PGTZ": "America/Los_Angeles"})
    assert given.exit_code == 0 and "0 claims" in given.stderr and statuses(dsn) == {1: "in-progress"}


def test_the_run_id_is_printed_right_after_commit(cli, db):
    result = cli("requeue-stale", "--db", db, "--older-than", "45m", "--apply")
    assert result.exit_code == 0
    committed = result.stderr.index("Committed ")
    assert committed < result.stderr.index("Applied ")
