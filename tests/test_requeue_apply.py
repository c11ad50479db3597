"""requeue-stale --apply against a backfill in flight (real PostgreSQL, a real backfill in another thread).

A backfill holds its sent-log rows uncommitted; a requeue planned before they commit must wait for them
and then find them, so nobody whose send the backfill records is put back in the queue.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from remediation import audit, claims, sentlog
from remediation.errors import RefusedError

STALE = "now() - interval '2 hours'"
LEADS = f"SELECT n, 'p' || n || '@x.co', 'in-progress', 'w' || n, {STALE} FROM generate_series(1, 6) AS n"
HOUR = 3600.0
WAIT = 60.0  # a bound on each wait for an event, never a pause: the tests go on as soon as it happens
# The backfill's sends: leads 1 and 2 in a (campaign, step) the sent-log already holds, lead 3 in a step it has
# never held (a plan built before the backfill does not count that step as proof of a send yet).
SENDS = {"campaign": ["c-1", "c-1", "c-1"], "step": ["1", "1", "2"], "recipient": ["p1@x.co", " P2@X.co", "p3@x.co"],
         "msg_id": ["m-1", "m-2", "m-3"]}


@pytest.fixture()
def dsn(leads):
    dsn = leads(LEADS, sent=[("c-1", "1", "someone.else@x.co", "m-0")])
    with psycopg.connect(dsn) as conn:
        audit.ensure_table(conn)  # as after any earlier remediation run
    return dsn


class BackfillInFlight(threading.Thread):
    """`sentlog.backfill` of SENDS on its own connection, held open after its sent-log rows are inserted
    (before its audit row and commit) until `commit` is set."""

    def __init__(self, dsn: str, monkeypatch):
        super().__init__(daemon=True)
        self.dsn, self.inserted, self.commit, self.error = dsn, threading.Event(), threading.Event(), None
        real = audit.record_backfill

        def record_backfill(conn, run_id):
            self.inserted.set()
            assert self.commit.wait(WAIT), "the test never let the backfill commit"
            real(conn, run_id)

        monkeypatch.setattr(audit, "record_backfill", record_backfill)

    def run(self) -> None:
        import pyarrow as pa

        try:
            with psycopg.connect(self.dsn) as conn:
                sentlog.backfill(conn, pa.table(SENDS))
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def waiting_on_the_sent_log(observer, application_name: str) -> bool:
    """Does a session of that application name wait for a lock on sent_log?"""
    return observer.execute("SELECT EXISTS (SELECT 1 FROM pg_locks AS l JOIN pg_stat_activity AS a USING (pid) "
                            "WHERE a.application_name = %s AND NOT l.granted "
                            "AND l.relation = to_regclass('sent_log'))", (application_name,)).fetchone()[0]


def race(dsn: str, monkeypatch, requeue, application_name: str):
    """Start the backfill, hold it after its inserts, run `requeue()` in a thread, and commit the backfill once
    the requeue's session (`application_name`) waits for the sent-log, or the requeue has finished without waiting.
    Returns what the requeue returned."""
    backfill = BackfillInFlight(dsn, monkeypatch)
    backfill.start()
    assert backfill.inserted.wait(WAIT), f"the backfill never inserted its rows: {backfill.error!r}"
    done = []
    requeuer = threading.Thread(target=lambda: done.append(requeue()), daemon=True)
    deadline = time.monotonic() + WAIT
    try:
        with psycopg.connect(dsn, autocommit=True) as observer:
            requeuer.start()
            while requeuer.is_alive() and not waiting_on_the_sent_log(observer, application_name):
                assert time.monotonic() < deadline, "the requeue neither waited for the sent-log nor finished"
                requeuer.join(0.02)  # polls pg_locks until the requeue waits, or returns as soon as it finished
        backfill.commit.set()
        backfill.join(WAIT)
        requeuer.join(WAIT)
    finally:
        backfill.commit.set()
    assert backfill.error is None and not backfill.is_alive() and not requeuer.is_alive()
    assert done, "the requeue raised (see the thread's traceback above)"
    return done[0]


def statuses(dsn: str) -> dict:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute("SELECT lead_id, status FROM leads").fetchall())


@pytest.mark.slow
def test_a_requeue_started_during_a_backfill_requeues_none_of_the_sends_it_records(dsn, monkeypatch):
    with psycopg.connect(dsn, application_name="requeue-under-test") as conn:
        plan, result = race(dsn, monkeypatch, lambda: claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True),
                            "requeue-under-test")
    assert plan.counts == {"stale": 6, "to_sent": 0, "to_queued": 6}  # planned before the backfill committed
    assert statuses(dsn) == {1: "in-progress", 2: "in-progress", 3: "in-progress", 4: "queued", 5: "queued",
                             6: "queued"}
    assert sorted(result.sent_since_plan) == ["1", "2", "3"] and sorted(result.to_queued) == ["4", "5", "6"]
    assert result.counts == {"to_sent": 0, "to_queued": 3, "skipped_locked": 0, "left_changed": 0,
                             "sent_since_plan": 3}
    with psycopg.connect(dsn) as conn:
        assert sorted(r["row_key"] for r in audit.run_rows(conn, plan.run_id)) == ["4", "5", "6"]
        again, second = claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
    assert {r["lead_id"]: r["new_status"] for r in again.rows()} == {"1": "sent", "2": "sent", "3": "sent"}
    assert sorted(second.to_sent) == ["1", "2", "3"] and second.sent_since_plan == []


@pytest.mark.slow
def test_the_cli_names_the_leads_a_backfill_in_flight_recorded(dsn, monkeypatch, cli):
    import json

    def requeue():
        return cli("requeue-stale", "--db", dsn, "--older-than", "45m", "--apply", "--format", "jsonl")

    result = race(dsn, monkeypatch, requeue, "mailmortem")  # the command's sessions are named so
    assert result.exit_code == 0, result.stderr
    assert "3 re-queued; 0 skipped (locked by a live transaction), 0 left alone (claim renewed or finished " \
           "since the plan), 3 left in progress: sent since the plan (the sent-log now holds them; the next " \
           "run marks them sent)." in result.stderr
    outcomes = {row["lead_id"]: row["outcome"] for row in map(json.loads, result.stdout.splitlines())}
    assert outcomes == {"1": "sent-since-plan", "2": "sent-since-plan", "3": "sent-since-plan", "4": "queued",
                        "5": "queued", "6": "queued"}
    assert statuses(dsn) == {1: "in-progress", 2: "in-progress", 3: "in-progress", 4: "queued", 5: "queued",
                             6: "queued"}


def test_without_a_backfill_the_requeue_applies_and_a_second_run_finds_nothing(dsn):
    with psycopg.connect(dsn) as conn:
        sentlog.record_send(conn, "c-1", "1", "p1@x.co", "m-1")
        conn.commit()
        plan, result = claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
        assert result.counts == {"to_sent": 1, "to_queued": 5, "skipped_locked": 0, "left_changed": 0,
                                 "sent_since_plan": 0}
        assert len(audit.run_rows(conn, plan.run_id)) == 6
        again, second = claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
        assert again.counts["stale"] == 0 and second.counts == dict.fromkeys(result.counts, 0)
        # the sent-log lock went with the transaction: a writer records a send at once
        conn.execute("SET lock_timeout = '1s'")
        assert sentlog.record_send(conn, "c-1", "1", "p9@x.co", "m-9")
        conn.commit()
    assert statuses(dsn) == {1: "sent", 2: "queued", 3: "queued", 4: "queued", 5: "queued", 6: "queued"}


def test_a_sent_log_writer_that_outlasts_the_wait_refuses_the_requeue_and_changes_nothing(dsn, monkeypatch):
    monkeypatch.setattr(claims, "SENT_LOG_WAIT", "50ms")
    with psycopg.connect(dsn) as writer, psycopg.connect(dsn) as conn:
        writer.execute("LOCK TABLE sent_log IN SHARE ROW EXCLUSIVE MODE")  # as a backfill holds it
        with pytest.raises(RefusedError, match=r"another transaction kept writing sent_log \(a backfill-sentlog in "
                                               r"flight\?\) for 50ms: .* nothing changed"):
            claims.requeue_stale(conn, claims.LeadsTable(), HOUR, apply=True)
        writer.rollback()
    assert set(statuses(dsn).values()) == {"in-progress"}
