"""Issue 40 item 5: `requeue-stale --campaign/--step` limit the leads too, through the leads' own columns."""

from __future__ import annotations

import psycopg

# Stale claims of two campaigns; only c-1's are the incident's.
SCHEMA = ("CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT, claimed_by TEXT, "
          "claimed_at TIMESTAMPTZ, camp TEXT, seq_step TEXT); INSERT INTO leads VALUES "
          "(1, 'a@x.co', 'in-progress', 'w1', now() - interval '2 hours', 'C-1', '1'), "
          "(2, 'b@x.co', 'in-progress', 'w1', now() - interval '2 hours', 'c-2', '1'), "
          "(3, 'c@x.co', 'in-progress', 'w1', now() - interval '2 hours', 'c-1', '2')")
SENT = [("c-1", "1", "a@x.co", "m-1"), ("c-2", "1", "z@x.co", "m-2")]
REQUEUE = ("requeue-stale", "--older-than", "45m", "--format", "json")


def _planned(result) -> dict:
    assert result.exit_code == 0, result.stderr
    import json

    return {c["lead_id"]: c["new_status"] for c in json.loads(result.stdout)["changes"]}


def test_campaign_and_step_limit_the_leads_through_their_mapped_columns(cli, leads):
    db = leads(schema=SCHEMA, sent=SENT)
    assert _planned(cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--col", "campaign=camp")) == {
        "1": "sent", "3": "queued"}  # c-2's lead 2 is left alone; the campaign compares in normal form
    assert _planned(cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--step", "1", "--col", "campaign=camp",
                        "--col", "step=seq_step")) == {"1": "sent"}


def test_a_campaign_filter_on_leads_without_a_campaign_column_is_refused_unless_all_campaigns(cli, leads):
    db = leads(schema=SCHEMA, sent=SENT)
    refused = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--apply")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert ("--campaign 'c-1' limits the sent-log, not the leads: leads has no campaign column, so stale leads of "
            "every campaign would be re-queued; pass --col campaign=COLUMN") in refused.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM leads WHERE status = 'in-progress'").fetchone()[0] == 3
    every = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--all-campaigns")
    assert _planned(every) == {"1": "sent", "2": "queued", "3": "queued"}
    assert "--all-campaigns: leads has no campaign column, so stale leads of every campaign are in the plan" \
        in every.stderr
    missing = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--col", "campaign=nope")
    assert missing.exit_code == 1 and "--col campaign=nope: leads has no column 'nope'" in missing.stderr


def test_a_step_filter_says_that_rows_without_a_step_count_for_it(cli, leads):
    no_step = ("c-1", "", "c@x.co", "m-3")  # as a backfill with --no-step stores it
    db = leads(schema=SCHEMA, sent=SENT + [no_step, ("c-1", "2", "q@x.co", "m-4")])
    result = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--step", "2", "--col", "campaign=camp",
                 "--col", "step=seq_step")
    assert _planned(result) == {"3": "sent"}
    assert "Sent-log rows without a step (backfilled with --no-step) count as proof of a send for every step, " \
        "--step '2' included." in result.stderr


def test_a_step_filter_on_leads_without_a_step_column_is_refused_unless_all_campaigns(cli, leads):
    # lead a@x.co's step-1 email went out; checked against step 2's sends alone it would be re-queued and sent again
    schema = SCHEMA.replace(", seq_step TEXT", "").replace(", '1')", ")").replace(", '2')", ")")
    db = leads(schema=schema, sent=SENT + [("c-1", "2", "q@x.co", "m-4")])
    refused = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--step", "2", "--col", "campaign=camp", "--apply")
    assert refused.exit_code == 1 and refused.stdout == ""
    assert ("--step '2' limits the sent-log, not the leads: leads has no step column, so a stale lead at another "
            "step would be checked against step '2''s sends alone; pass --col step=COLUMN") in refused.stderr
    with psycopg.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM leads WHERE status = 'in-progress'").fetchone()[0] == 3
    assert _planned(cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--col", "campaign=camp")) == {
        "1": "sent", "3": "queued"}  # without --step every step's sends count
    every = cli(*REQUEUE, "--db", db, "--campaign", "c-1", "--step", "2", "--col", "campaign=camp", "--all-campaigns")
    assert _planned(every) == {"1": "queued", "3": "queued"}
    assert "leads has no step column: --step limits the sent-log, not the leads" in every.stderr
