"""Fault tests of the reference claim loop on a real PostgreSQL.

The first: 8 worker processes run the reference claim loop over 5,000 leads with short
leases; the test SIGKILLs workers mid-batch (starting replacements) and SIGSTOPs others
past their lease (then resumes them) while `requeue-stale --apply` runs concurrently.
A worker killed between its reservation and its record leaves an unconfirmed reservation
(its person counts as sent); a provider backfill then settles those, requeue-stale
returns the leads it released, and one more run sends them. At the end every lead was
sent exactly once and none is stuck.

The fake provider is honest about the one window a database cannot close: it accepts
the message on its OWN connection, committed at once (the email is out, whatever
happens to the worker's transaction), then sleeps a little before replying — a SIGKILL
there loses the worker's sent-log record. What prevents the double send is, first, the
sent-log check under the row lock and the fencing token, and for that last window the
idempotency key: like a real provider honouring one, a second call with the same key
delivers nothing and answers with the first message id. The test counts both the
deliveries (must be exactly one per lead) and the attempts (the key's work shows there).

The second (the chaos test) takes the provider's key away: a stub that records EVERY call
as a delivery. People appear in up to four lead rows (the list imported twice, case and
whitespace variants, a display name, a second address under the same person id), workers
are SIGKILLed and SIGSTOPped past their lease with their database sessions terminated.
Per person: never more than one delivery; everyone delivered once or listed as an
unconfirmed reservation; after a backfill from the stub's record releases the unconfirmed
that were never delivered, running again delivers the rest, still at most one each.
"""

from __future__ import annotations

import csv
import multiprocessing
import os
import random
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

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
                               heartbeat_s=HEARTBEAT_S, provider="fake", no_sends_yet=True)
    _work_until_done(dsn, cfg, FakeProvider(dsn, name))


# Leads still to do: not sent, and their person holds no unconfirmed reservation (those wait for a backfill).
REMAINING = """
SELECT count(*) FROM {table} AS t
WHERE t.status <> 'sent' AND NOT EXISTS (
    SELECT 1 FROM send_reservation AS r
    WHERE r.campaign = %(campaign)s AND r.step = %(step)s AND r.msg_id IS NULL
      AND ((r.key_kind = 'address' AND r.key_value = pg_temp.mm_address(t.email))
           OR (r.key_kind = 'candidate' AND r.key_value = {candidate})))
"""


def _remaining(conn, cfg) -> int:
    from forensics.addresses import install_pg

    install_pg(conn)
    candidate = f"t.{cfg.candidate_column}::text" if cfg.candidate_column else "NULL"
    query = REMAINING.format(table=cfg.table.table, candidate=candidate)
    return conn.execute(query, {"campaign": cfg.campaign, "step": cfg.step}).fetchone()[0]


def _work_until_done(dsn: str, cfg, provider) -> None:
    """Run the loop until nothing is left to do; a session terminated under us (a stall) means start over."""
    from remediation import claimloop

    with psycopg.connect(dsn, autocommit=True) as watch:
        while True:
            try:
                if claimloop.run(dsn, cfg, provider).stopped:
                    return  # fenced after a send: the loop says stop
            except (psycopg.OperationalError, psycopg.InterfaceError):
                time.sleep(0.1)
                continue
            if _remaining(watch, cfg) == 0:
                return
            time.sleep(0.2)  # leads of dead workers come back once requeue-stale returns them


class Requeuer(threading.Thread):
    """`requeue-stale --apply` (the library call) every 0.25 s while the workers run."""

    def __init__(self, dsn: str, table: str = "leads", campaign: str = "fault"):
        super().__init__(daemon=True)
        self.dsn, self.stop, self.error = dsn, threading.Event(), None
        self.table, self.campaign = table, campaign
        self.totals = {"runs": 0, "to_sent": 0, "to_queued": 0, "skipped_locked": 0, "left_changed": 0,
                       "sent_since_plan": 0, "held": 0}

    def run(self) -> None:
        try:
            with psycopg.connect(self.dsn) as conn:
                while not self.stop.wait(0.25):
                    self.once(conn)
        except Exception as exc:  # surfaced by the test
            self.error = exc

    def once(self, conn) -> None:
        from remediation import claims

        plan, result = claims.requeue_stale(conn, claims.leads_table(self.table), STALE_AFTER_S, apply=True,
                                            campaign=self.campaign, step="1", no_sends_yet=True,
                                            all_campaigns=True)  # one campaign's leads: no campaign column
        self.totals["runs"] += 1
        self.totals["held"] = max(self.totals["held"], len(plan.held))  # most leads held at once
        for key, value in result.counts.items():
            self.totals[key] += value


def _setup(leads) -> str:
    from remediation import claimloop

    dsn = leads(QUEUED)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(PROVIDER_TABLES)
        claimloop.ensure_claim_schema(conn, claimloop.LoopConfig(campaign="fault"))
    return dsn


class Workers:
    """The worker processes of a fault test, named PREFIX0, PREFIX1, …: SIGKILLed and replaced, SIGSTOPped
    past their lease and resumed, always one that holds claimed leads right now (the fault lands mid-batch)."""

    def __init__(self, target, dsn: str, prefix: str, count: int, table: str, end_sessions: bool = False):
        self.ctx = multiprocessing.get_context("spawn")
        self.target, self.dsn, self.prefix, self.table = target, dsn, prefix, table
        self.end_sessions = end_sessions  # a stall also terminates the worker's database sessions
        self.procs: dict = {}
        self.stalled: set = set()
        for _ in range(count):
            self._spawn()

    def _spawn(self) -> None:
        name = f"{self.prefix}{len(self.procs)}"
        self.procs[name] = self.ctx.Process(target=self.target, args=(self.dsn, name), daemon=True)
        self.procs[name].start()

    def _holder(self, conn) -> str | None:
        query = f"SELECT DISTINCT claimed_by FROM {self.table} WHERE status = 'in-progress'"
        holders = [r[0] for r in conn.execute(query)]
        victims = [name for name in holders
                   if name in self.procs and self.procs[name].is_alive() and name not in self.stalled]
        return random.choice(victims) if victims else None

    def kill(self, conn) -> str | None:
        """SIGKILL a worker that holds claimed leads right now, and start a replacement."""
        victim = self._holder(conn)
        if victim:
            os.kill(self.procs[victim].pid, signal.SIGKILL)
            self.procs[victim].join(5)
            self._spawn()
        return victim

    def stall(self, conn) -> str | None:
        """SIGSTOP a worker holding leads for longer than its lease; SIGCONT it later."""
        victim = self._holder(conn)
        if victim:
            self.stalled.add(victim)
            os.kill(self.procs[victim].pid, signal.SIGSTOP)
            if self.end_sessions:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE application_name IN (%s, %s)",
                             (f"mailmortem-claimloop {victim}", f"mailmortem-heartbeat {victim}"))
            threading.Timer(STALL_S, self._resume, (victim,)).start()
        return victim

    def _resume(self, name: str) -> None:
        if self.procs[name].is_alive():
            os.kill(self.procs[name].pid, signal.SIGCONT)
        self.stalled.discard(name)

    def wait(self, started: float) -> None:
        for proc in list(self.procs.values()):
            proc.join(max(1.0, DEADLINE_S - (time.monotonic() - started)))

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.is_alive():
                proc.kill()


@dataclass(frozen=True)
class Faults:
    kills: int
    stalls: int
    kills_per_stall: int  # a stall comes after this many kills
    progress: str  # a count query: no fault lands before it reaches warm_up
    warm_up: float
    pause: tuple[float, float]  # seconds between two faults, drawn at random


def _with_faults(workers: Workers, requeuer: Requeuer, faults: Faults) -> tuple[list, list, float]:
    """Run the workers with requeue-stale beside them, land the faults (within half the deadline), then wait
    for the workers. Returns (killed, stalled, seconds)."""
    requeuer.start()
    started, killed, stalled = time.monotonic(), [], []
    try:
        with psycopg.connect(workers.dsn, autocommit=True) as conn:
            while (len(killed) < faults.kills or len(stalled) < faults.stalls) and \
                    time.monotonic() - started < DEADLINE_S / 2:
                time.sleep(random.uniform(*faults.pause))
                if _count(conn, faults.progress) < faults.warm_up:
                    continue  # let the workers get going first
                if len(stalled) < faults.stalls and len(stalled) * faults.kills_per_stall <= len(killed):
                    victim = workers.stall(conn)
                    stalled += [victim] if victim else []
                else:
                    victim = workers.kill(conn)
                    killed += [victim] if victim else []
        workers.wait(started)
    finally:
        requeuer.stop.set()
        requeuer.join(10)
        workers.kill_all()
    return killed, stalled, time.monotonic() - started


FAULT_EXPORT = """SELECT l.email, m.msg_id, m.accepted_at, 'fault', '1', NULL
                  FROM provider_messages AS m JOIN leads AS l USING (lead_id)"""


def _backfill_from_provider(dsn: str, export_sql: str, path: Path) -> dict:
    """What an operator does after the incident: export the provider's own record of sends and backfill it.
    The stub stamps sends with the database's clock, so no clock margin is needed."""
    from forensics.providers import read_events
    from remediation import sentlog

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(export_sql).fetchall()
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["to", "message_id", "sent_at", "campaign", "step", "person_id"])
        writer.writerows([to, msg_id, at.isoformat(), *rest] for to, msg_id, at, *rest in rows)
    mapping = {"recipient": "to", "msg_id": "message_id", "sent_at": "sent_at", "campaign": "campaign",
               "step": "step", "candidate": "person_id"}
    read = read_events([str(path)], provider="csv", mapping=mapping)
    with psycopg.connect(dsn, autocommit=True) as conn:
        return sentlog.backfill_exports(conn, read, clock_margin_s=0.0)["reservations"]


def _finish(dsn: str, campaign: str, provider, table: str = "leads", candidate_column: str | None = None) -> None:
    """Running again after the backfill: one worker, no faults, until nothing is left."""
    from remediation import claimloop, claims

    cfg = claimloop.LoopConfig(campaign=campaign, step="1", worker="after", batch_size=50, lease_s=30.0,
                               table=claims.leads_table(table), candidate_column=candidate_column,
                               provider=type(provider).__name__, no_sends_yet=True)
    _work_until_done(dsn, cfg, provider)


def _count(conn, query: str) -> int:
    return conn.execute(query).fetchone()[0]


def test_sigkilled_workers_and_concurrent_requeue_send_each_lead_exactly_once(leads, tmp_path):
    dsn = _setup(leads)
    requeuer = Requeuer(dsn)
    faults = Faults(KILLS, STALLS, 3, "SELECT count(*) FROM leads WHERE status = 'sent'", N_LEADS * 0.05, (0.4, 0.8))
    killed, stalls, elapsed = _with_faults(Workers(_worker, dsn, "w", WORKERS, "leads"), requeuer, faults)
    assert requeuer.error is None, requeuer.error
    settled = _backfill_from_provider(dsn, FAULT_EXPORT, tmp_path / "provider.csv")
    with psycopg.connect(dsn) as conn:
        requeuer.once(conn)
    _finish(dsn, "fault", FakeProvider(dsn, "after"))

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
    print(f"  backfill settled {settled['confirmed']} reservations as sent, released {len(settled['released'])}")

    assert len(killed) == KILLS and len(stalls) == STALLS, "the workers finished before every fault landed"
    assert by_status == {"sent": N_LEADS}, "some leads are stuck"
    assert delivered == delivered_leads == N_LEADS, "a lead was emailed twice or never"
    # The provider's key only has to catch what no database can: a worker killed between the
    # provider's accept and its commit — at most one in-flight send per SIGKILL. Stalled
    # workers whose leases ran out are fenced out and must not have tried again.
    assert attempts - N_LEADS <= len(killed), "the loop re-sent more than the crash window explains"
    assert sent_log == sent_log_people == N_LEADS
    assert requeuer.totals["to_queued"] + requeuer.totals["to_sent"] > 0, "requeue-stale never had work"


# --------------------------------------------------------------------------- the chaos test

PEOPLE = 1500
CHAOS_WORKERS = 6
CHAOS_KILLS = 5
CHAOS_STALLS = 3

CHAOS_SETUP = """
CREATE TABLE people_leads (lead_id INT PRIMARY KEY, email TEXT NOT NULL, person_id INT NOT NULL,
                           status TEXT NOT NULL DEFAULT 'queued', claimed_by TEXT, claimed_at TIMESTAMPTZ);
CREATE TABLE stub_deliveries (id BIGSERIAL PRIMARY KEY, person_id INT NOT NULL, lead_id INT NOT NULL,
                              recipient TEXT NOT NULL, idempotency_key TEXT NOT NULL, worker TEXT NOT NULL,
                              at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
"""
DELIVER = """INSERT INTO stub_deliveries (person_id, lead_id, recipient, idempotency_key, worker)
             VALUES (%s, %s, %s, %s, %s) RETURNING id"""
CHAOS_EXPORT = """SELECT recipient, '<d' || id || '@stub>', at, 'chaos', '1', person_id::text FROM stub_deliveries"""
VARIANTS = (lambda a, n: a, lambda a, n: " " + a.upper(), lambda a, n: f"Person {n} <{a}>",
            lambda a, n: a + "\t", lambda a, n: "\u00a0" + a.capitalize() + "\n")


class Stub:
    """An email API that does NOT deduplicate: every call is a delivery, recorded on its own connection
    (not one of the worker's sessions, which the test terminates)."""

    def __init__(self, dsn: str, worker: str):
        self.dsn, self.worker = dsn, worker
        self.conn = psycopg.connect(dsn, autocommit=True, application_name="chaos-stub")

    def __call__(self, lead) -> str:
        time.sleep(random.uniform(0.004, 0.016))  # request on the wire: a SIGKILL here sends nothing
        row = self.conn.execute(DELIVER, (int(lead.candidate), lead.key, lead.email, lead.idempotency_key,
                                          self.worker)).fetchone()
        time.sleep(random.uniform(0.0, 0.004))  # reply on the wire: a SIGKILL here loses our record
        return f"<d{row[0]}@stub>"


def _chaos_config(name: str):
    from remediation import claimloop, claims

    return claimloop.LoopConfig(campaign="chaos", step="1", worker=name, table=claims.leads_table("people_leads"),
                                candidate_column="person_id", batch_size=10, lease_s=LEASE_S,
                                heartbeat_s=HEARTBEAT_S, provider="stub", no_sends_yet=True)


def _chaos_worker(dsn: str, name: str) -> None:
    _work_until_done(dsn, _chaos_config(name), Stub(dsn, name))


def _people_rows(rng: random.Random) -> list[tuple[int, str, int]]:
    """Each person once, half of them twice, some three times (variants), some under a second address; a
    copy lands one block after the first, so neighbouring batches of two workers hold one person at once."""
    copies: list[list[tuple[str, int]]] = [[], [], [], []]
    for n in range(1, PEOPLE + 1):
        address = f"person{n}@example.com"
        copies[0].append((rng.choice(VARIANTS)(address, n), n))
        if rng.random() < 0.5:
            copies[1].append((rng.choice(VARIANTS)(address, n), n))
        if rng.random() < 0.15:
            copies[2].append((rng.choice(VARIANTS)(address, n), n))
        if rng.random() < 0.1:
            copies[3].append((f"p{n}.work@corp.example", n))
    rows = []
    for block in range(0, PEOPLE, 20):
        for copy in copies:
            rows += [row for row in copy if block < row[1] <= block + 20]
    return [(i, email, person) for i, (email, person) in enumerate(rows, 1)]


def _per_person(conn) -> dict[int, int]:
    return dict(conn.execute("SELECT person_id, count(*) FROM stub_deliveries GROUP BY person_id").fetchall())


def _unconfirmed_people(conn) -> set[int]:
    from remediation import reservations

    return {int(r["candidate"]) for r in reservations.unconfirmed(conn, "chaos", "1")}


def test_chaos_duplicate_people_kills_and_stalls_through_a_provider_that_does_not_deduplicate(leads, tmp_path):
    from remediation import claimloop, claims

    rng = random.Random()
    dsn = leads(schema=CHAOS_SETUP)
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO people_leads (lead_id, email, person_id) VALUES (%s, %s, %s)",
                            _people_rows(rng))
        lead_rows = _count(conn, "SELECT count(*) FROM people_leads")
        claimloop.ensure_claim_schema(conn, _chaos_config("setup"))
    requeuer = Requeuer(dsn, "people_leads", "chaos")
    workers = Workers(_chaos_worker, dsn, "c", CHAOS_WORKERS, "people_leads", end_sessions=True)
    faults = Faults(CHAOS_KILLS, CHAOS_STALLS, 2, "SELECT count(*) FROM stub_deliveries", PEOPLE * 0.05, (0.3, 0.7))
    killed, stalls, _ = _with_faults(workers, requeuer, faults)
    assert requeuer.error is None, requeuer.error
    assert len(killed) == CHAOS_KILLS and len(stalls) == CHAOS_STALLS, "the workers finished before every fault"

    with psycopg.connect(dsn, autocommit=True) as conn:
        first = _per_person(conn)
        listed = _unconfirmed_people(conn)
        waiting = dict(conn.execute("SELECT status, count(*) FROM people_leads WHERE status <> 'sent' "
                                    "GROUP BY status").fetchall())
    never = set(range(1, PEOPLE + 1)) - set(first) - listed
    with psycopg.connect(dsn) as conn:
        time.sleep(STALE_AFTER_S)  # every lead a dead worker held is stale now
        plan, _ = claims.requeue_stale(conn, claims.leads_table("people_leads"), STALE_AFTER_S, campaign="chaos",
                                       step="1", all_campaigns=True)
        in_progress = {r[0] for r in conn.execute("SELECT lead_id FROM people_leads WHERE status = 'in-progress'")}
        held_people = {r[0] for r in conn.execute("SELECT person_id FROM people_leads WHERE lead_id = ANY(%s)",
                                                 ([lead.key for lead in plan.held],))}
    settled = _backfill_from_provider(dsn, CHAOS_EXPORT, tmp_path / "stub.csv")
    with psycopg.connect(dsn) as conn:
        requeuer.once(conn)
    _finish(dsn, "chaos", Stub(dsn, "after"), "people_leads", "person_id")
    with psycopg.connect(dsn, autocommit=True) as conn:
        final = _per_person(conn)
        by_status = dict(conn.execute("SELECT status, count(*) FROM people_leads GROUP BY status").fetchall())
        left = _unconfirmed_people(conn)
        sent_log = _count(conn, "SELECT count(*) FROM sent_log WHERE campaign = 'chaos'")

    print(f"\nchaos test: {PEOPLE} people in {lead_rows} lead rows, {CHAOS_WORKERS} workers, lease {LEASE_S}s, "
          f"{len(killed)} SIGKILLs ({', '.join(killed)}), {len(stalls)} stalls of {STALL_S}s with sessions ended "
          f"({', '.join(stalls)})")
    print(f"  after the faults: {len(first)} people delivered, max {max(first.values())} per person; "
          f"{len(listed)} listed unconfirmed ({len(listed & set(first))} of them delivered); "
          f"{len(never)} neither; lead rows not sent: {waiting}; requeue-stale lists {len(plan.held)} held")
    print(f"  backfill: {settled['confirmed']} reservations confirmed, {len(settled['released'])} released")
    print(f"  after running again: {len(final)} people delivered, max {max(final.values())} per person; "
          f"leads {by_status}; unconfirmed left {len(left)}; sent_log rows {sent_log}")
    print(f"  requeue-stale: {requeuer.totals}")

    assert max(first.values()) == 1, "a person was emailed twice"
    assert not never, f"people neither delivered nor listed unconfirmed: {sorted(never)[:10]}"
    assert {lead.key for lead in plan.held} == in_progress and held_people <= listed and not plan.leads, \
        "requeue-stale lists every lead a dead worker reserved as held, and re-queues none of them"
    assert {int(r["candidate"]) for r in settled["released"]} == listed - set(first), \
        "the backfill releases exactly the unconfirmed people the stub never delivered to"
    assert max(final.values()) == 1 and len(final) == PEOPLE, "after the backfill everyone got exactly one email"
    assert by_status == {"sent": lead_rows} and not left and sent_log == PEOPLE

