"""The audit trail and undo on a real PostgreSQL, including hostile names stored in it."""

from __future__ import annotations

import datetime as dt
import re

import psycopg
import pytest

from forensics.errors import ConfigError
from remediation.errors import RefusedError
from remediation import audit, claims, sentlog

SETUP = """
CREATE TABLE leads (lead_id BIGINT PRIMARY KEY, email TEXT, status TEXT, claimed_by TEXT, claimed_at TIMESTAMPTZ);
INSERT INTO leads SELECT g, 'p' || g || '@example.com', 'in-progress', 'w' || (g % 3),
                         now() - make_interval(mins => 60 + g) FROM generate_series(1, 20) AS g;
"""


@pytest.fixture()
def conn(pg_dsn):
    with psycopg.connect(pg_dsn) as c:
        c.execute(SETUP)
        sentlog.ensure_schema(c)
        c.commit()
        yield c


def table(conn):
    rows = conn.execute("SELECT * FROM leads ORDER BY lead_id").fetchall()
    conn.rollback()
    return rows


def test_run_id_shape_and_uniqueness():
    at = dt.datetime(2026, 11, 30, 10, 12, 3, tzinfo=dt.timezone.utc)
    ids = {audit.new_run_id(at) for _ in range(50)}
    assert all(re.fullmatch(r"2026-11-30T10:12:03Z-[0-9a-f]{4}", i) for i in ids) and len(ids) > 40


def test_reports_are_empty_without_an_audit_table(conn):
    assert audit.recent_runs(conn) == [] and audit.run_rows(conn, "x") == []
    with pytest.raises(RefusedError, match="no audit table"):
        audit.undo(conn, "x", apply=True)


def test_recent_runs_lists_each_run_once(conn):
    first, _ = claims.requeue_stale(conn, claims.LeadsTable(), 70 * 60.0, apply=True)
    second, _ = claims.requeue_stale(conn, claims.LeadsTable(), 60 * 60.0, apply=True)
    runs = {r["run_id"]: r for r in audit.recent_runs(conn)}
    assert runs[first.run_id]["rows_changed"] == 11 and runs[second.run_id]["rows_changed"] == 9
    assert runs[first.run_id]["command"] == "requeue-stale"


def test_unknown_run_is_refused(conn):
    claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    with pytest.raises(RefusedError, match="no audit rows for run nope"):
        audit.undo(conn, "nope")


def test_undo_dry_run_changes_nothing(conn):
    plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    before = table(conn)
    preview = audit.undo(conn, plan.run_id)
    assert preview.summary == {"restorable": 20} and not preview.applied
    assert table(conn) == before


def test_undo_is_audited_and_can_itself_be_undone(conn):
    original = table(conn)
    plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    requeued = table(conn)
    undone = audit.undo(conn, plan.run_id, apply=True)
    assert table(conn) == original
    redone = audit.undo(conn, undone.undo_run_id, apply=True)
    assert len(redone.restored) == 20 and table(conn) == requeued


def test_row_deleted_since_the_run_is_reported_gone(conn):
    plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    conn.execute("DELETE FROM leads WHERE lead_id = 3")
    conn.commit()
    result = audit.undo(conn, plan.run_id, apply=True)
    assert {"table": "leads", "row_key": "3", "state": "row gone"} in result.left
    assert len(result.restored) == 19


def test_undo_is_one_transaction(conn, pg_dsn):
    plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    before = table(conn)
    with psycopg.connect(pg_dsn, autocommit=True) as other:  # make the second statement fail
        other.execute("INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values,"
                      " new_values) VALUES (%s, 'x', 'missing_table', 'id', '1', '{}', '{}')", (plan.run_id,))
    with pytest.raises(Exception, match="rolled back, nothing changed"):
        audit.undo(conn, plan.run_id, apply=True)
    assert table(conn) == before


@pytest.mark.parametrize("table_name,key_column", [('leads"; DROP TABLE leads; --', "lead_id"),
                                                    ("leads", "lead_id; DROP TABLE leads")])
def test_hostile_names_stored_in_the_audit_table_are_refused(conn, table_name, key_column):
    plan, _ = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    conn.execute("INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values,"
                 " new_values) VALUES ('evil', 'x', %s, %s, '1', '{\"status\": \"x\"}', '{}')",
                 (table_name, key_column))
    conn.commit()
    with pytest.raises(ConfigError, match="refusing"):
        audit.undo(conn, "evil", apply=True)
    assert len(table(conn)) == 20


def test_hostile_column_names_in_stored_values_are_refused(conn):
    claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True)
    conn.execute("INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values,"
                 " new_values) VALUES ('evil2', 'x', 'leads', 'lead_id', '1', %s, '{}')",
                 ('{"status = NULL; DROP TABLE leads; --": 1}',))
    conn.commit()
    with pytest.raises(ConfigError, match="refusing column name"):
        audit.undo(conn, "evil2", apply=True)
    assert len(table(conn)) == 20
