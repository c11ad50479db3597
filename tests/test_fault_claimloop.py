"""Fault test: 8 worker processes run the reference claim loop over 5,000 leads with short
leases; the test SIGKILLs workers mid-batch (starting replacements) and SIGSTOPs others
past their lease (then resumes them) while `requeue-stale --apply` runs concurrently. At the end every lead was sent exactly once and none is stuck.

The fake provider is honest about the one window a database cannot close: it accepts
the message on its OWN connection, committed at once (the email is out, whatever
happens to the worker's transaction), then sleeps a little before replying — a SIGKILL
there loses the worker's sent-log record. What prevents the double send is, first, the
sent-log check under the row lock and the fencing token, and for that last window the
idempotency key: like a real provider honouring one, a second call with the same key
delivers nothing and answers with the first message id. The test counts both the
deliveries (must be exactly one per lead) and the attempts (the key's work shows there).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time

import psycopg
import pytest

pytestmark = pytest.mark.slow  # fault injection: worker processes killed and stopped for real

N_LEADS = 5000
WORKERS = 8
KILLS = 6
STALLS = 2  # SIGSTOP a worker past its lease (heartbeat included), then SIGCONT: it must be fenced out
STALL_S = 3.5
LEASE_S = 1.5
HEARTBEAT_S = 0.4
STALE_AFTER_S = 2.0  # requeue-stale --older-than: above the lease
DEADLINE_S = 90

QUEUED = f"(lead_id, email) SELECT g, 'person' || g || '@example.com' FROM generate_series(1, {N_LEADS}) g"
PROVIDER_TABLES = """
CREATE TABLE provider_messages (idempotency_key TEXT PRIMARY KEY, lead_id INT NOT NULL, msg_id TEXT NOT NULL,
                                worker TEXT NOT NULL, accepted_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
CREATE TABLE provider_attempts (id BIGSERIAL PRIMARY KEY, idempotency_key TEXT NOT NULL, lead_id INT NOT NULL,
                                worker TEXT NOT NULL);
"""
ACCEPT = """INSERT INTO provider_messages (idempotency_key, lead_id, msg_id, worker) VALUES (%s, %s, %s, %s)
            ON CONFLICT (idempotency_key) DO NOTHING RETURNING msg_id"""
ATTEMPT = "INSERT INTO provider_attempts (idempotency_key, lead_id, worker) VALUES (%s, %s, %s)"
FIRST_MSG_ID = "SELECT msg_id FROM provider_messages WHERE idempotency_key = %s"


class FakeProvider:
    """The email API: its own autocommit connection; deduplicates on the idempotency key."""

    def __init__(self, dsn: str, worker: str):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.worker = worker

    def __call__(self, lead) -> str:
        key = lead.idempotency_key
        time.sleep(random.uniform(0.002, 0.010))  # request on the wire
        self.conn.execute(ATTEMPT, (key, lead.key, self.worker))
        row = self.conn.execute(ACCEPT, (key, lead.key, f"<{key}@provider>", self.worker)).fetchone()
        row = row or self.conn.execute(FIRST_MSG_ID, (key,)).fetchone()
        time.sleep(random.uniform(0.0, 0.004))  # reply on the wire: a SIGKILL here loses our record
        return row[0]


def _worker(dsn: str, name: str) -> None:
    from remediation import claimloop

    cfg = claimloop.LoopConfig(campaign="fault", step="1", worker=name, batch_size=20, lease_s=LEASE_S,
                               heartbeat_s=HEARTBEAT_S, provider="fake")
    provider = FakeProvider(dsn, name)
    with psycopg.connect(dsn, autocommit=True) as watch:
        while True:
            claimloop.run(dsn, cfg, provider)
            if watch.execute("SELECT count(*) FROM leads WHERE status <> 'sent'").fetchone()[0] == 0:
                return
            time.sleep(0.2)  # leads of dead workers come back once requeue-stale returns them


class Requeuer(threading.Thread):
    """`requeue-stale --apply` (the library call) every 0.25 s while the workers run."""

    def __init__(self, dsn: str):
        super().__init__(daemon=True)
        self.dsn, self.stop, self.error = dsn, threading.Event(), None
        self.totals = {"runs": 0, "to_sent": 0, "to_queued": 0, "skipped_locked": 0, "left_changed": 0}

    def run(self) -> None:
        from remediation import claims

        try:
            with psycopg.connect(self.dsn) as conn:
                while not self.stop.wait(0.25):
                    _, result = claims.requeue_stale(conn, claims.LeadsTable(), STALE_AFTER_S, apply=True,
                                                     campaign="fault", step="1")
                    self.totals["runs"] += 1
                    for key, value in result.counts.items():
                        self.totals[key] += value
        except Exception as exc:  # surfaced by the test
            self.error = exc


def _setup(leads) -> str:
    from remediation import claimloop

    dsn = leads(QUEUED)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(PROVIDER_TABLES)
        claimloop.ensure_claim_schema(conn, claimloop.LoopConfig(campaign="fault"))
    return dsn


def _holder(conn, procs: dict, stalled: set) -> str | None:
    """A live, running worker that holds claimed leads right now (so the fault lands mid-batch)."""
    holders = [r[0] for r in conn.execute("SELECT DISTINCT claimed_by FROM leads WHERE status = 'in-progress'")]
    victims = [name for name in holders if name in procs and procs[name].is_alive() and name not in stalled]
    return random.choice(victims) if victims else None


def _stall(conn, procs: dict, stalled: set) -> str | None:
    """SIGSTOP a worker holding leads for longer than its lease; SIGCONT it later."""
    victim = _holder(conn, procs, stalled)
    if victim:
        stalled.add(victim)
        os.kill(procs[victim].pid, signal.SIGSTOP)
        threading.Timer(STALL_S, _resume, (procs[victim], victim, stalled)).start()
    return victim


def _resume(proc, name: str, stalled: set) -> None:
    if proc.is_alive():
        os.kill(proc.pid, signal.SIGCONT)
    stalled.discard(name)


def _kill_mid_batch(conn, procs: dict, ctx, dsn: str, serial: list, stalled: set) -> str | None:
    """SIGKILL a worker that holds claimed leads right now, and start a replacement."""
    victim = _holder(conn, procs, stalled)
    if not victim:
        return None
    os.kill(procs[victim].pid, signal.SIGKILL)
    procs[victim].join(5)
    serial[0] += 1
    name = f"w{serial[0]}"
    procs[name] = ctx.Process(target=_worker, args=(dsn, name), daemon=True)
    procs[name].start()
    return victim


def _count(conn, query: str) -> int:
    return conn.execute(query).fetchone()[0]


def test_sigkilled_workers_and_concurrent_requeue_send_each_lead_exactly_once(leads):
    dsn = _setup(leads)
    ctx = multiprocessing.get_context("spawn")
    procs = {f"w{i}": ctx.Process(target=_worker, args=(dsn, f"w{i}"), daemon=True) for i in range(WORKERS)}
    serial = [WORKERS - 1]
    for proc in procs.values():
        proc.start()
    requeuer = Requeuer(dsn)
    requeuer.start()
    started, killed, stalls, stalled = time.monotonic(), [], [], set()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while (len(killed) < KILLS or len(stalls) < STALLS) and time.monotonic() - started < DEADLINE_S / 2:
                time.sleep(random.uniform(0.4, 0.8))
                if _count(conn, "SELECT count(*) FROM leads WHERE status = 'sent'") < N_LEADS * 0.05:
                    continue  # let the workers get going first
                if len(stalls) < STALLS and len(stalls) * 3 <= len(killed):
                    victim = _stall(conn, procs, stalled)
                    stalls += [victim] if victim else []
                else:
                    victim = _kill_mid_batch(conn, procs, ctx, dsn, serial, stalled)
                    killed += [victim] if victim else []
        for proc in list(procs.values()):
            proc.join(max(1.0, DEADLINE_S - (time.monotonic() - started)))
    finally:
        requeuer.stop.set()
        requeuer.join(10)
        for proc in procs.values():
            if proc.is_alive():
                proc.kill()
    elapsed = time.monotonic() - started
    assert requeuer.error is None, requeuer.error

    with psycopg.connect(dsn, autocommit=True) as conn:
        by_status = dict(conn.execute("SELECT status, count(*) FROM leads GROUP BY status").fetchall())
        delivered = _count(conn, "SELECT count(*) FROM provider_messages")
        delivered_leads = _count(conn, "SELECT count(DISTINCT lead_id) FROM provider_messages")
        attempts = _count(conn, "SELECT count(*) FROM provider_attempts")
        sent_log = _count(conn, "SELECT count(*) FROM sent_log WHERE campaign = 'fault'")
        sent_log_people = _count(conn, "SELECT count(DISTINCT recipient) FROM sent_log WHERE campaign = 'fault'")
        max_token = _count(conn, "SELECT max(claim_token) FROM leads")

    print(f"\nfault test: {N_LEADS} leads, {WORKERS} workers, lease {LEASE_S}s, {len(killed)} SIGKILLs "
          f"({', '.join(killed)}), {len(stalls)} stalls of {STALL_S}s ({', '.join(stalls)}), {elapsed:.1f}s")
    print(f"  leads by status: {by_status}")
    print(f"  provider deliveries: {delivered} ({delivered_leads} distinct leads); send attempts: {attempts} "
          f"({attempts - delivered} deduplicated by the idempotency key)")
    print(f"  sent_log rows: {sent_log} ({sent_log_people} people); claims (fencing tokens): {max_token}")
    print(f"  requeue-stale: {requeuer.totals}")

    assert len(killed) == KILLS and len(stalls) == STALLS, "the workers finished before every fault landed"
    assert by_status == {"sent": N_LEADS}, "some leads are stuck"
    assert delivered == delivered_leads == N_LEADS, "a lead was emailed twice or never"
    # The provider's key only has to catch what no database can: a worker killed between the
    # provider's accept and its commit — at most one in-flight send per SIGKILL. Stalled
    # workers whose leases ran out are fenced out and must not have tried again.
    assert attempts - N_LEADS <= len(killed), "the loop re-sent more than the crash window explains"
    assert sent_log == sent_log_people == N_LEADS
    assert requeuer.totals["to_queued"] + requeuer.totals["to_sent"] > 0, "requeue-stale never had work"
