"""requeue-stale on a real PostgreSQL: plan, guarded apply, locks, renewals, sent-log, remapped names."""

from __future__ import annotations

import re
import threading
import time

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.errors import ConfigError
from remediation.errors import RefusedError
from remediation import audit, claims, requeue_apply, sentlog
from remediation.identifiers import parse_mapping, parse_name, parse_table

STALE = "now() - interval '2 hours'"
LEADS = f"""VALUES
  (1, ' Sent.Already@Example.com ', 'in-progress', 'w1', {STALE}),
  (2, 'b@example.com', 'in-progress', 'w2', {STALE}),
  (3, 'c@example.com', 'in-progress', 'w3', now() - interval '5 minutes'),
  (4, 'd@example.com', 'queued', NULL, NULL),
  (5, 'e@example.com', 'sent', 'w1', {STALE}),
  (6, 'f@example.com', 'in-progress', 'w4', {STALE} - interval '1 minute'),
  (7, 'g@example.com', 'in-progress', 'w5', NULL);
"""
HOUR = 3600.0


@pytest.fixture()
def db(leads):
    conn = psycopg.connect(leads(LEADS, sent=[("c-1", "1", "sent.already@example.com", "m-1")]))
    yield conn
    conn.close()


def snapshot(conn) -> list[tuple]:
    rows = conn.execute("SELECT lead_id, status, claimed_by, claimed_at FROM leads ORDER BY lead_id").fetchall()
    conn.rollback()
    return rows


def other_session(dsn):
    return psycopg.connect(dsn, autocommit=False)


def test_plan_is_a_pure_ordered_list_of_statements():
    def lead(key, sent):
        return claims.StaleLead(key, str(key), f"p{key}@x.co", "w1", None, "1764489600.5", 7200.0, sent)

    table = claims.leads_table(queued="ready")
    plan = claims.requeue_plan(table, [lead(1, True), lead(2, False), lead(3, False)], 60.0, "run-1")
    assert [s.query for s in plan.steps] == ["requeue_sent_log_wait", "requeue_lock_sent_log", "requeue_apply_settings",
                                             "requeue_planned_create", "requeue_planned_copy",
                                             "requeue_planned_analyze", "requeue_lock_planned",
                                             "requeue_to_sent", "requeue_to_queued"]
    assert plan.steps[0].params == {"sent_log_wait": claims.SENT_LOG_WAIT}
    assert plan.steps[4].copy_rows == (("1", "w1", "1764489600.5", "p1@x.co", True),
                                       ("2", "w1", "1764489600.5", "p2@x.co", False),
                                       ("3", "w1", "1764489600.5", "p3@x.co", False))
    to_sent, to_queued = plan.steps[7:]
    assert (to_sent.rows, to_queued.rows) == (1, 2) and to_queued.params["new_status"] == "ready"
    assert to_queued.params["run_id"] == "run-1" and to_sent.params["new_status"] == "sent"
    assert plan.counts == {"stale": 3, "to_sent": 1, "to_queued": 2}
    assert claims.requeue_plan(table, [], 60.0, "run-2").steps == ()


def test_dry_run_plans_and_changes_nothing(db):
    before = snapshot(db)
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR)
    assert result is None
    assert plan.counts == {"stale": 3, "to_sent": 1, "to_queued": 2}
    assert [r["lead_id"] for r in plan.rows()] == ["6", "1", "2"]  # oldest claim first
    assert {r["lead_id"]: r["new_status"] for r in plan.rows()} == {"1": "sent", "2": "queued", "6": "queued"}
    assert snapshot(db) == before
    assert not audit.table_exists(db)


def test_apply_changes_exactly_the_planned_rows_and_audits_each(db):
    before = {row[0]: row for row in snapshot(db)}
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    after = {row[0]: row for row in snapshot(db)}
    assert result.counts == {"to_sent": 1, "to_queued": 2, "skipped_locked": 0, "left_changed": 0,
                             "sent_since_plan": 0}
    assert after[1][1:3] == ("sent", "w1") and after[1][3] == before[1][3]  # sent: the claim is kept as history
    assert after[2][1:] == ("queued", None, None) and after[6][1:] == ("queued", None, None)
    assert {k: after[k] for k in (3, 4, 5)} == {k: before[k] for k in (3, 4, 5)}
    rows = audit.run_rows(db, plan.run_id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ-[0-9a-f]{4}", plan.run_id)
    assert sorted(r["row_key"] for r in rows) == ["1", "2", "6"]
    queued = next(r for r in rows if r["row_key"] == "2")
    assert queued["old_values"]["status"] == "in-progress" and queued["old_values"]["claimed_by"] == "w2"
    assert queued["new_values"] == {"status": "queued", "claimed_by": None, "claimed_at": None}
    assert queued["db_user"] == "postgres" and queued["os_user"] and queued["table_name"] == "leads"


def test_in_progress_rows_without_claim_time_are_reported_not_touched(db):
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    assert plan.without_claim_time == 1 and "7" not in [r["lead_id"] for r in plan.rows()]
    assert snapshot(db)[6] == (7, "in-progress", "w5", None)


def test_second_apply_changes_nothing(db):
    claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    before = snapshot(db)
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    assert plan.counts["stale"] == 0 and result.counts["to_queued"] == result.counts["to_sent"] == 0
    assert snapshot(db) == before
    assert audit.run_rows(db, plan.run_id) == []


def test_row_locked_by_another_transaction_is_skipped_and_reported(db, pg_dsn):
    holder = other_session(pg_dsn)
    holder.execute("SELECT * FROM leads WHERE lead_id = 6 FOR UPDATE")
    try:
        done = []
        worker = threading.Thread(target=lambda: done.append(
            claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)))
        worker.start()
        worker.join(timeout=20)
        assert done, "apply waited on a locked row instead of skipping it"
        _, result = done[0]
    finally:
        holder.rollback()
        holder.close()
    assert result.skipped_locked == ["6"]
    assert sorted(result.to_queued) == ["2"] and result.to_sent == ["1"]
    assert snapshot(db)[5][1] == "in-progress"


def test_claim_renewed_between_plan_and_apply_is_left_alone(db, pg_dsn):
    plan = claims.requeue_plan(claims.LeadsTable(), claims.scan_stale(db, claims.LeadsTable(), HOUR), HOUR, "r-1")
    with psycopg.connect(pg_dsn, autocommit=True) as worker:
        worker.execute("UPDATE leads SET claimed_at = now() WHERE lead_id = 2")  # heartbeat
        worker.execute("UPDATE leads SET claimed_by = 'w9' WHERE lead_id = 6")  # re-claimed, still old stamp
    result = claims.apply_plan(db, plan)
    assert sorted(result.left_changed) == ["2", "6"] and result.to_sent == ["1"] and result.to_queued == []
    rows = {row[0]: row for row in snapshot(db)}
    assert rows[2][1:3] == ("in-progress", "w2") and rows[6][1:3] == ("in-progress", "w9")


def test_address_changed_between_plan_and_apply_is_left_alone(db, pg_dsn):
    """The apply checks the sent-log by the address the lead was planned with: the guard holds it unchanged."""
    plan = claims.requeue_plan(claims.LeadsTable(), claims.scan_stale(db, claims.LeadsTable(), HOUR), HOUR, "r-3")
    with psycopg.connect(pg_dsn, autocommit=True) as editor:
        editor.execute("UPDATE leads SET email = 'Sent.Already@example.com' WHERE lead_id = 2")
    result = claims.apply_plan(db, plan)
    assert result.left_changed == ["2"] and result.to_sent == ["1"] and result.to_queued == ["6"]
    assert snapshot(db)[1][1:3] == ("in-progress", "w2")


def test_lead_recorded_in_sent_log_after_planning_is_not_requeued(db, pg_dsn):
    plan = claims.requeue_plan(claims.LeadsTable(), claims.scan_stale(db, claims.LeadsTable(), HOUR), HOUR, "r-2")
    with psycopg.connect(pg_dsn) as late:
        sentlog.record_send(late, "c-1", "1", "B@example.com", "m-2")
        late.commit()
    result = claims.apply_plan(db, plan)
    assert result.sent_since_plan == ["2"] and result.left_changed == [] and result.to_queued == ["6"]
    again, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR)
    assert {r["lead_id"]: r["new_status"] for r in again.rows()} == {"2": "sent"}


def test_sent_log_scoped_to_campaign(db):
    plan, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, campaign="other", no_sends_yet=True,
                                   all_campaigns=True)  # the leads table has no campaign column
    assert plan.counts == {"stale": 3, "to_sent": 0, "to_queued": 3}


def test_undo_restores_rows_nobody_touched(db, pg_dsn):
    before = snapshot(db)
    plan, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    with psycopg.connect(pg_dsn, autocommit=True) as worker:
        worker.execute("UPDATE leads SET status = 'in-progress', claimed_by = 'w7', claimed_at = now() "
                       "WHERE lead_id = 2")
    preview = audit.undo(db, plan.run_id)
    assert preview.summary == {"restorable": 2, "changed since the run": 1}
    undone = audit.undo(db, plan.run_id, apply=True)
    assert sorted(r["row_key"] for r in undone.restored) == ["1", "6"]
    assert undone.left == [{"table": "leads", "row_key": "2", "state": "changed since the run"}]
    after = {row[0]: row for row in snapshot(db)}
    expected = {row[0]: row for row in before}
    assert after[1] == expected[1] and after[6] == expected[6]  # exact, timestamps included
    assert after[2][2] == "w7"
    assert audit.undo(db, plan.run_id, apply=True).summary["already restored"] == 2
    assert {r["undoes"] for r in audit.run_rows(db, undone.undo_run_id)} == {plan.run_id}


# How a lead the run changed is claimed again before the undo: holding the values the run found is no restore.
RE_CLAIMS = {
    "its stale worker writes its claim back": (2, "UPDATE leads SET status = 'in-progress', claimed_by = %(by)s, "
                                                  "claimed_at = %(at)s WHERE lead_id = 2"),
    "a worker claims the lead the run marked sent": (1, "UPDATE leads SET status = 'in-progress', claimed_by = 'w7', "
                                                        "claimed_at = now() WHERE lead_id = 1"),
}


@pytest.mark.parametrize("re_claim", list(RE_CLAIMS))
def test_undo_labels_a_lead_claimed_again_since_the_run_changed_and_leaves_it(db, pg_dsn, re_claim):
    lead, statement = RE_CLAIMS[re_claim]
    before = {row[0]: row for row in snapshot(db)}
    plan, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    with psycopg.connect(pg_dsn, autocommit=True) as worker:
        worker.execute(statement, {"by": before[2][2], "at": before[2][3]})
    claimed = {row[0]: row for row in snapshot(db)}
    preview = audit.undo(db, plan.run_id)
    assert preview.summary == {"restorable": 2, "changed since the run": 1}
    assert {"table": "leads", "row_key": str(lead), "state": "changed since the run"} in preview.preview
    undone = audit.undo(db, plan.run_id, apply=True)
    assert undone.left == [{"table": "leads", "row_key": str(lead), "state": "changed since the run"}]
    assert len(undone.restored) == 2 and snapshot(db)[lead - 1] == claimed[lead]  # exact, timestamps included
    again = audit.undo(db, plan.run_id)  # the two it restored are: an undo of this run wrote their values
    assert again.summary == {"already restored": 2, "changed since the run": 1}


def test_undo_leaves_a_lead_another_run_re_queued_since(db, pg_dsn):
    first, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    with psycopg.connect(pg_dsn, autocommit=True) as worker:  # claimed again, and that claim went stale too
        worker.execute(f"UPDATE leads SET status = 'in-progress', claimed_by = 'w7', claimed_at = {STALE} "
                       "WHERE lead_id = 2")
    second, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True)
    assert second.counts["to_queued"] == 1
    undone = audit.undo(db, first.run_id, apply=True)
    assert undone.left == [{"table": "leads", "row_key": "2", "state": "changed since the run"}]
    assert snapshot(db)[1][1:3] == ("queued", None)  # as the second run left it, not w2's stale claim back
    assert [r["row_key"] for r in audit.undo(db, second.run_id, apply=True).restored] == ["2"]
    assert snapshot(db)[1][1:3] == ("in-progress", "w7")


VARIANTS = ["Jane Doe <jane@acme.com>", "jane@acme.com\t", "\u00a0jane@acme.com", "jane@acme.com\n",
            " JANE@Acme.com "]


def test_address_variants_backfilled_as_sent_are_marked_sent_not_requeued(leads):
    import pyarrow as pa

    with psycopg.connect(leads(LEADS)) as conn:
        conn.execute("DELETE FROM leads")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO leads VALUES (%s, %s, 'in-progress', 'w1', {STALE})",
                            list(enumerate(VARIANTS, 1)))
        conn.commit()
        sends = pa.table({"campaign": ["c-1"], "step": ["1"], "recipient": ["Jane Doe <Jane@Acme.com>"],
                          "msg_id": ["m-1"]})
        sentlog.backfill(conn, sends)
        plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), HOUR, campaign="c-1", step="1",
                                       all_campaigns=True)  # the leads table has no campaign column
    assert {r["email"]: r["new_status"] for r in plan.rows()} == {v: "sent" for v in VARIANTS}


def test_a_lead_whose_person_holds_an_unconfirmed_reservation_is_held_not_requeued(db, pg_dsn):
    from remediation import reservations

    with psycopg.connect(pg_dsn) as other:
        assert reservations.reserve(other, "c-1", "1", "b@example.com", None, "w2", 1).ok
        other.commit()
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True, campaign="c-1", step="1",
                                        all_campaigns=True)  # the leads table has no campaign column
    assert [lead.key_text for lead in plan.held] == ["2"] and plan.unconfirmed == 1
    assert sorted(result.to_queued) == ["6"] and snapshot(db)[1][1:3] == ("in-progress", "w2")
    assert [r["lead_id"] for r in plan.held_rows()] == ["2"]
    release = reservations.release_plan(db, "c-1", "1", "B@example.com")
    assert reservations.release(db, release, "person:test", "provider shows nothing") == 1
    again, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True, campaign="c-1", step="1",
                                         all_campaigns=True)  # the leads table has no campaign column
    assert again.held == () and result.to_queued == ["2"]


def test_requires_sent_log(leads):
    with psycopg.connect(leads(LEADS, sent_log=False)) as conn:
        with pytest.raises(RefusedError, match="no sent_log table"):
            claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
        assert snapshot(conn)[1][1] == "in-progress"


def test_duckdb_is_refused_with_one_line(tmp_path):
    import duckdb

    with pytest.raises(ConfigError, match="need PostgreSQL"):
        claims.scan_stale(duckdb.connect(str(tmp_path / "x.duckdb")), claims.LeadsTable(), HOUR)


REMAPPED = """
CREATE SCHEMA outreach;
CREATE TYPE outreach.lead_state AS ENUM ('waiting', 'claimed', 'done');
CREATE TABLE outreach."Leads" (id TEXT PRIMARY KEY, addr TEXT, state outreach.lead_state, owner INT,
                               locked_at TIMESTAMP);
INSERT INTO outreach."Leads" VALUES
  ('a-1', 'x@example.com', 'claimed', 7, localtimestamp - interval '3 hours'),
  ('a-2', 'Y@example.com', 'claimed', NULL, localtimestamp - interval '3 hours'),
  ('a-3', 'z@example.com', 'claimed', 8, localtimestamp);
"""


def test_remapped_table_columns_and_statuses(leads):
    with psycopg.connect(leads(schema=REMAPPED, sent=[("c", "", "y@example.com", "m-9")])) as conn:
        table = claims.leads_table("outreach.Leads", ("lead_id=id", "email=addr", "status=state", "claimed_by=owner",
                                                      "claimed_at=locked_at"), "waiting", "claimed", "done")
        before = conn.execute('SELECT * FROM outreach."Leads" ORDER BY id').fetchall()
        zone = conn.execute("SHOW TimeZone").fetchone()[0]  # the zone localtimestamp wrote locked_at in
        plan, result = claims.requeue_stale(conn, table, HOUR, apply=True, claimed_at_zone=zone)
        assert result.to_sent == ["a-2"] and result.to_queued == ["a-1"]
        rows = conn.execute('SELECT id, state, owner, locked_at FROM outreach."Leads" ORDER BY id').fetchall()
        assert rows[0][1:] == ("waiting", None, None) and rows[1][1] == "done" and rows[2][1] == "claimed"
        audit.undo(conn, plan.run_id, apply=True)
        assert conn.execute('SELECT * FROM outreach."Leads" ORDER BY id').fetchall() == before


@pytest.mark.parametrize("name", ['leads"; DROP TABLE leads; --', "leads;", "lea ds", "x.y.z", "'leads'", "",
                                  'a."b', "public.leads--"])
def test_hostile_table_names_are_refused(name):
    with pytest.raises(ConfigError):
        claims.leads_table(name)


@pytest.mark.parametrize("mapping", ['status=st"ate', "status=state;drop", "nope=x", "status", "status=a=b"])
def test_hostile_or_bad_column_mappings_are_refused(mapping):
    with pytest.raises(ConfigError):
        claims.leads_table("leads", (mapping,))


def test_statuses_must_differ():
    with pytest.raises(ConfigError, match="three different"):
        claims.leads_table(queued="x", sent="x")


@pytest.mark.parametrize("text,seconds", [("45m", 2700), ("2h", 7200), ("900s", 900), ("1.5h", 5400),
                                          ("250ms", 0.25), ("1d", 86400), ("90", 90), (" 3 min ", 180)])
def test_parse_duration_examples(text, seconds):
    assert claims.parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "0", "0s", "-5m", "5 weeks", "m", "1e3", "NaN", "45m;"])
def test_parse_duration_refuses(text):
    with pytest.raises(ConfigError):
        claims.parse_duration(text)


@pytest.mark.slow
@given(st.text(max_size=20))
@settings(max_examples=300)
def test_parse_duration_never_crashes(text):
    try:
        assert claims.parse_duration(text) > 0
    except ConfigError:
        pass


@pytest.mark.slow
@given(st.text(max_size=70))
@settings(max_examples=300)
def test_identifier_parsers_accept_only_plain_names(text):
    for parse in (parse_name, parse_table):
        try:
            value = parse(text)
        except ConfigError:
            continue
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?", str(value))
        assert not set(str(value)) & set("\"';- \\\x00")


@pytest.mark.slow
@given(st.text(max_size=40))
@settings(max_examples=200)
def test_column_mapping_parser_never_crashes(text):
    try:
        logical, actual = parse_mapping(text, claims.LOGICAL_COLUMNS)
    except ConfigError:
        return
    assert logical in claims.LOGICAL_COLUMNS and parse_name(actual) == actual


def _events(rows):
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE events (ts TIMESTAMPTZ, event TEXT, worker TEXT, shard TEXT, lease_s DOUBLE)")
    con.executemany("INSERT INTO events VALUES (CAST(? AS TIMESTAMPTZ), ?, ?, ?, ?)", rows)
    return con


def test_worst_batch_pairs_each_claim_with_its_own_release():
    con = _events([
        ("2026-11-30 10:00:00+00", "claim", "w1", "s1", 600.0),
        ("2026-11-30 10:05:00+00", "release", "w1", "s1", None),   # 300 s
        ("2026-11-30 10:06:00+00", "claim", "w1", "s1", 600.0),     # never released…
        ("2026-11-30 10:20:00+00", "claim", "w1", "s1", 600.0),     # …so not paired with this release
        ("2026-11-30 10:27:00+00", "release", "w1", "s1", None),   # 420 s
        ("2026-11-30 10:00:00+00", "claim", "w2", "s2", 600.0),
        ("2026-11-30 10:01:00+00", "release", "w2", "s2", None),
    ])
    worst = claims.worst_batch(con)
    assert (worst["worker"], worst["shard"], worst["batch_s"], worst["max_lease_s"]) == ("w1", "s1", 420.0, 600.0)
    warnings = claims.lease_warnings(600.0, worst)
    assert len(warnings) == 2 and "630s" in warnings[0]  # 1.5 × 420
    assert claims.lease_warnings(700.0, {**worst, "max_lease_s": 900.0}) == []


NAIVE = """
CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT, claimed_by TEXT, claimed_at TIMESTAMP);
INSERT INTO leads VALUES
  (1, 'fresh@example.com', 'in-progress', 'w1', (now() AT TIME ZONE 'UTC') - interval '10 seconds'),
  (2, 'old@example.com', 'in-progress', 'w2', (now() AT TIME ZONE 'UTC') - interval '2 hours');
"""


def _los_angeles(dsn):
    return psycopg.connect(dsn, options="-c TimeZone=America/Los_Angeles")


def test_claim_time_without_zone_is_refused_unless_its_zone_is_given(leads):
    dsn = leads(schema=NAIVE)
    with _los_angeles(dsn) as conn:
        with pytest.raises(RefusedError, match="timestamp without time zone.*--claimed-at-zone"):
            claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
        assert [row[1] for row in snapshot(conn)] == ["in-progress", "in-progress"]
        plan, result = claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True, claimed_at_zone="UTC")
        assert [r["lead_id"] for r in plan.rows()] == ["2"] and result.to_queued == ["2"]
        assert 7000 < plan.rows()[0]["age_s"] < 7400  # 2 h, not 2 h + the session's 8 h
        assert [row[1] for row in snapshot(conn)] == ["in-progress", "queued"]
        with pytest.raises(ConfigError, match="not a time zone"):
            claims.requeue_stale(conn, claims.LeadsTable(), HOUR, claimed_at_zone="Mars/Olympus")


def test_claimed_at_zone_is_refused_for_a_column_that_has_zones(db):
    with pytest.raises(ConfigError, match="only for a timestamp without time zone"):
        claims.requeue_stale(db, claims.LeadsTable(), HOUR, claimed_at_zone="UTC")


@pytest.mark.slow
@pytest.mark.parametrize("campaign,step", [(" C-1 ", None), ("c-1", " 1 "), (None, "1"), ("C-1", "1"), ("c-1", "01")])
def test_campaign_and_step_compare_trimmed_and_case_folded(db, campaign, step):
    plan, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, campaign=campaign, step=step, all_campaigns=True)
    assert plan.counts == {"stale": 3, "to_sent": 1, "to_queued": 2}


_LABELS = st.sampled_from(["c-1", "C-1", " c-1", "c-2", "", "1", "01", " 1 ", "2"])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_LABELS, _LABELS), unique=True), st.none() | _LABELS, st.none() | _LABELS)
def test_the_scope_is_every_sent_log_pair_of_its_campaigns_and_steps(pairs, campaign, step):
    """requeue_in_sent_log probes campaign = ANY(campaigns) AND step = ANY(steps): that must select the scope."""
    scope = claims.resolve_scope(pairs, campaign, step, no_sends_yet=True)
    chosen = set(zip(scope.campaigns, scope.steps))
    assert chosen <= set(pairs)
    assert {(c, s) for c, s in pairs if c in scope.campaigns and s in scope.steps} == chosen


@pytest.mark.slow
@pytest.mark.parametrize("campaign,step,named", [("C1", None, "the sent-log's campaigns: 'c-1'"),
                                                 ("c-1", "2", "the sent-log's steps of campaign 'c-1': '1'")])
def test_a_filter_that_matches_no_sent_log_row_is_refused_with_the_values_that_exist(db, campaign, step, named):
    before = snapshot(db)
    with pytest.raises(RefusedError, match=re.escape(named)):
        claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True, campaign=campaign, step=step,
                             all_campaigns=True)  # the leads table has no campaign column
    assert snapshot(db) == before
    plan, _ = claims.requeue_stale(db, claims.LeadsTable(), HOUR, campaign=campaign, step=step, no_sends_yet=True,
                                   all_campaigns=True)  # the leads table has no campaign column
    assert plan.scope.no_sends_yet == (f"--step {step!r}" if step else f"--campaign {campaign!r}")
    assert plan.counts == {"stale": 3, "to_sent": 0, "to_queued": 3}


def test_run_id_is_reported_on_commit_before_any_bookkeeping(db, monkeypatch):
    events = []
    real = requeue_apply._sort_out_unchanged
    monkeypatch.setattr(requeue_apply, "_sort_out_unchanged", lambda *a: (events.append("bookkeeping"), real(*a)))
    plan, result = claims.requeue_stale(db, claims.LeadsTable(), HOUR, apply=True,
                                        on_commit=lambda r: events.append(("committed", r.run_id, len(r.to_queued))))
    assert events == [("committed", plan.run_id, 2), "bookkeeping"]
    assert result.counts == {"to_sent": 1, "to_queued": 2, "skipped_locked": 0, "left_changed": 0,
                             "sent_since_plan": 0}


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchall(self):
        return self.rows


class _Connection:
    """Just enough of a psycopg connection for apply_plan, whose statements are answered by _answer."""

    __module__ = "psycopg.fake"

    def rollback(self):
        pass

    def transaction(self):
        from contextlib import nullcontext

        return nullcontext()


def test_bookkeeping_after_commit_is_linear(monkeypatch):
    def lead(key):
        return claims.StaleLead(key, str(key), f"p{key}@x.co", "w", None, "1", 7200.0, False)

    n = 20_000
    plan = claims.requeue_plan(claims.LeadsTable(), [lead(k) for k in range(n)], 60.0, "r")
    answers = {"requeue_lock_planned": [(str(k),) for k in range(n - 1)],  # the last one held by a live worker
               "requeue_to_queued": [(str(k), "queued") for k in range(0, n, 2)]}  # the odd ones' claims were renewed
    monkeypatch.setattr(requeue_apply.queries, "run", lambda conn, name, *a, **k: _Rows(answers.get(name, [])))
    monkeypatch.setattr(requeue_apply, "_copy_rows", lambda conn, step, idents: None)
    monkeypatch.setattr(requeue_apply.audit, "ensure_table", lambda conn: None)
    monkeypatch.setattr(requeue_apply, "install_pg", lambda conn: None)
    started = time.perf_counter()
    result = claims.apply_plan(_Connection(), plan)
    assert time.perf_counter() - started < 1.0
    assert result.skipped_locked == [str(n - 1)] and len(result.left_changed) == n // 2 - 1


@pytest.mark.slow
@pytest.mark.parametrize("campaign,step,scope", [(None, None, [("c-1", ""), ("c-1", "1"), ("c-2", "1")]),
                                                 ("c-1", "1", [("c-1", "1"), ("c-1", "")])])
def test_requeue_sent_log_lookup_uses_the_index_on_an_unanalysed_sent_log(leads, campaign, step, scope):
    import queries
    from forensics.addresses import install_pg

    dsn = leads("SELECT g, 'p' || g || '@x.co', 'in-progress', 'w', now() - interval '2 hours' "
                "FROM generate_series(1, 20000) AS g")
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO sent_log (campaign, step, recipient, msg_id) "
                     "SELECT 'c-1', '1', 'p' || g || '@x.co', 'm' || g FROM generate_series(1, 20000, 2) AS g")
        conn.execute("INSERT INTO sent_log (campaign, step, recipient, msg_id) VALUES ('c-1', '', 'p2@x.co', 'u'), "
                     "('c-2', '1', 'p4@x.co', 'v')")
        conn.commit()
        install_pg(conn)
        idents = {**claims.LeadsTable().idents(), **claims.LeadScope().idents("lead_id")}  # leads of every campaign
        stale = [claims.StaleLead(k, str(k), f"p{k}@x.co", "w", None, "0", 7200.0, False) for k in range(1, 20001)]
        planned = claims.requeue_plan(claims.LeadsTable(), stale, 60.0, "r")
        for step in planned.steps[:4]:  # the planned leads in mm_requeue_planned, as apply_plan puts them there
            requeue_apply._run_step(conn, step, step.params, idents, requeue_apply.ApplyResult("r"), set())
        params = {"status_in_progress": "in-progress", "older_than_s": 60.0,
                  "claimed_at_zone": None, "new_status": "queued",
                  "scope_campaigns": [c for c, _ in scope], "scope_steps": [s for _, s in scope],
                  "campaign": campaign, "step": step, **claims.LeadScope().params(),
                  "run_id": "r", "table_name": "leads", "key_column": "lead_id", "col_status": "status",
                  "col_claimed_by": "claimed_by", "col_claimed_at": "claimed_at", "os_user": "t"}
        audit.ensure_table(conn)
        for name in ("requeue_scan_stale", "requeue_to_queued"):
            text = "EXPLAIN " + queries.sql(conn, name, **idents)
            query = queries.get(name)
            plan = "\n".join(r[0] for r in conn.execute(text, {k: params[k] for k in query.params}))
            assert "Index" in plan and "sent_log_campaign_step_recipient" in plan, plan
            assert "Seq Scan on sent_log" not in plan, plan
            # never a nested loop that walks the scope's sent-log rows for every lead (rows x sends)
            assert "Join Filter: (s.recipient" not in plan, plan
        conn.rollback()
