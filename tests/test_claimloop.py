"""The reference claim loop on a real PostgreSQL: claim, fence, heartbeat, sent-log check, release."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from forensics.errors import ConfigError
from remediation import claimloop, claims, sentlog

QUEUED = "(lead_id, email) SELECT g, 'Lead' || g || '@Example.com' FROM generate_series(1, 120) AS g"


@pytest.fixture()
def dsn(leads):
    return leads(QUEUED)


@pytest.fixture()
def conn(dsn):
    with psycopg.connect(dsn, autocommit=True) as c:
        yield c


def cfg(**kw) -> claimloop.LoopConfig:
    return claimloop.LoopConfig(**{"campaign": "c-1", "step": "1", "worker": "w-test", "batch_size": 25,
                                   "lease_s": 30.0, **kw})


class Recorder:
    def __init__(self):
        self.sent: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, lead):
        with self.lock:
            self.sent.append(lead.key)
        return f"<{lead.idempotency_key}@test>"


def count(conn, status):
    return conn.execute("SELECT count(*) FROM leads WHERE status = %s", (status,)).fetchone()[0]


def test_run_sends_every_lead_once_and_records_it(dsn, conn):
    send = Recorder()
    stats = claimloop.run(dsn, cfg(), send)
    assert sorted(send.sent) == list(range(1, 121))
    assert (stats.sent, stats.batches, stats.already_sent, stats.fenced) == (120, 5, 0, 0)
    assert count(conn, "sent") == 120
    assert sentlog.count_rows(conn) == 120
    assert sentlog.already_sent(conn, "c-1", "1", "lead7@example.com")
    assert claimloop.run(dsn, cfg(), send).batches == 0 and len(send.sent) == 120


def test_two_concurrent_loops_never_send_one_lead_twice(dsn, conn):
    send = Recorder()
    workers = [threading.Thread(target=claimloop.run, args=(dsn, cfg(worker=f"w{i}", batch_size=7), send))
               for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert sorted(send.sent) == list(range(1, 121)) and count(conn, "sent") == 120


def test_lead_already_in_sent_log_is_marked_sent_not_sent_again(dsn, conn):
    sentlog.record_send(conn, "c-1", "1", " LEAD3@example.com", "m-old")
    send = Recorder()
    stats = claimloop.run(dsn, cfg(), send)
    assert 3 not in send.sent and stats.already_sent == 1 and count(conn, "sent") == 120


def test_fencing_tokens_only_grow(conn):
    claimloop.ensure_claim_schema(conn, cfg())
    first = claimloop.claim_batch(conn, cfg(batch_size=3))
    second = claimloop.claim_batch(conn, cfg(batch_size=3))
    assert second.token > first.token
    assert {lead.token for lead in first.leads} == {first.token}
    assert not set(first.keys) & set(second.keys)


def test_worker_whose_lease_expired_is_fenced_out(dsn, conn):
    claimloop.ensure_claim_schema(conn, cfg())
    stale = claimloop.claim_batch(conn, cfg(worker="slow", batch_size=2))
    conn.execute("UPDATE leads SET claimed_at = now() - interval '1 hour' WHERE claimed_by = 'slow'")
    claims.requeue_stale(conn, claims.LeadsTable(), 600.0, apply=True)
    fresh = claimloop.claim_batch(conn, cfg(worker="fast", batch_size=2))
    assert fresh.keys == stale.keys and fresh.token > stale.token
    send = Recorder()
    assert [claimloop.process_lead(conn, cfg(), lead, send) for lead in stale.leads] == ["fenced", "fenced"]
    assert send.sent == []
    assert claimloop.release(conn, cfg(), stale) == 0  # the old token cannot release the new claim either
    assert [claimloop.process_lead(conn, cfg(), lead, send) for lead in fresh.leads] == ["sent", "sent"]


@pytest.mark.slow
def test_heartbeat_renews_the_lease_while_sending(dsn, conn):
    slow_cfg = cfg(batch_size=4, lease_s=0.9, heartbeat_s=0.2)
    seen = []

    def slow_send(lead):
        time.sleep(0.35)
        seen.append(conn.execute("SELECT max(extract(epoch FROM now() - claimed_at)) FROM leads "
                                 "WHERE status = 'in-progress'").fetchone()[0])
        return f"m-{lead.key}"

    claimloop.run(dsn, slow_cfg, slow_send, max_batches=1)
    assert len(seen) == 4 and max(float(s or 0) for s in seen) < 0.9  # without renewal the last would be ~1.4 s
    assert count(conn, "sent") == 4


def test_send_failure_releases_the_unsent_leads(dsn, conn):
    def failing(lead):
        if lead.key == 3:
            raise RuntimeError("provider down")
        return f"m-{lead.key}"

    with pytest.raises(RuntimeError, match="provider down"):
        claimloop.run(dsn, cfg(batch_size=5), failing)
    assert count(conn, "sent") == 2 and count(conn, "in-progress") == 0 and count(conn, "queued") == 118
    assert conn.execute("SELECT claimed_by FROM leads WHERE lead_id = 3").fetchone()[0] is None


def test_reclaim_expired_takes_over_dead_claims(dsn, conn):
    claimloop.ensure_claim_schema(conn, cfg())
    dead = claimloop.claim_batch(conn, cfg(worker="dead", batch_size=120))
    conn.execute("UPDATE leads SET claimed_at = now() - interval '1 hour'")
    stats = claimloop.run(dsn, cfg(reclaim_expired=True, lease_s=60.0), Recorder())
    assert stats.sent == 120 and dead.token is not None


def test_idempotency_key_is_per_person_campaign_and_step():
    lead = claimloop.Lead(1, "1", " Jane@Example.com", 5, "c-1", "1")
    same_person = claimloop.Lead(2, "2", "jane@example.com", 9, "c-1", "1")
    other_step = claimloop.Lead(1, "1", "jane@example.com", 5, "c-1", "2")
    assert lead.idempotency_key == same_person.idempotency_key != other_step.idempotency_key
    assert len(lead.idempotency_key) == 32


def test_remapped_names_and_hostile_token_column(leads):
    dsn = leads(schema="CREATE SCHEMA q; CREATE TABLE q.work (id BIGINT PRIMARY KEY, addr TEXT, state TEXT, "
                       "owner TEXT, locked_at TIMESTAMPTZ); INSERT INTO q.work SELECT g, 'a' || g || '@x.co', 'todo' "
                       "FROM generate_series(1, 10) g")
    with psycopg.connect(dsn, autocommit=True) as conn:
        table = claims.leads_table("q.work", ("lead_id=id", "email=addr", "status=state", "claimed_by=owner",
                                              "claimed_at=locked_at"), "todo", "doing", "done")
        stats = claimloop.run(dsn, cfg(table=table, token_column="fence"), Recorder())
        assert stats.sent == 10
        assert conn.execute("SELECT count(*) FROM q.work WHERE state = 'done' AND fence > 0").fetchone()[0] == 10
        with pytest.raises(ConfigError, match="refusing"):
            claimloop.ensure_claim_schema(conn, cfg(table=table, token_column='x"; DROP TABLE q.work; --'))
