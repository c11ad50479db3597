"""The reference claim loop on a real PostgreSQL: claim, fence, heartbeat, sent-log check, release."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psycopg
import pytest

from forensics.errors import ConfigError
from remediation import claimloop, claims, sentlog
from remediation.errors import RefusedError

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
                                   "lease_s": 30.0, "no_sends_yet": True, **kw})


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


@pytest.mark.slow
def test_run_sends_every_lead_once_and_records_it(dsn, conn):
    send = Recorder()
    stats = claimloop.run(dsn, cfg(), send)
    assert sorted(send.sent) == list(range(1, 121))
    assert (stats.sent, stats.batches, stats.already_sent, stats.fenced) == (120, 5, 0, 0)
    assert count(conn, "sent") == 120
    assert sentlog.count_rows(conn) == 120
    assert sentlog.already_sent(conn, "c-1", "1", "lead7@example.com")
    assert claimloop.run(dsn, cfg(), send).batches == 0 and len(send.sent) == 120


def run_concurrently(dsn, send, loops: int, batch_size: int, timeout: float) -> None:
    """`loops` claim loops at once (threads w0, w1, …) until each is done."""
    workers = [threading.Thread(target=claimloop.run, args=(dsn, cfg(worker=f"w{i}", batch_size=batch_size), send))
               for i in range(loops)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=timeout)


@pytest.mark.slow
def test_two_concurrent_loops_never_send_one_lead_twice(dsn, conn):
    send = Recorder()
    run_concurrently(dsn, send, loops=3, batch_size=7, timeout=60)
    assert sorted(send.sent) == list(range(1, 121)) and count(conn, "sent") == 120


@pytest.mark.slow
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
    renewed = []

    def claimed_at():
        return conn.execute("SELECT max(claimed_at) FROM leads WHERE status = 'in-progress'").fetchone()[0]

    def send_once_renewed(lead):
        # the event: the lease of the lead being sent is renewed while its send is under way (a lease far longer
        # than the wait, so a busy machine delays the renewal but never lets the lease run out)
        claimed, deadline = claimed_at(), time.monotonic() + 60
        while claimed_at() == claimed:
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease of a lead being sent"
            time.sleep(0.05)
        renewed.append(lead.key)
        return f"m-{lead.key}"

    claimloop.run(dsn, cfg(batch_size=4, heartbeat_s=0.2), send_once_renewed, max_batches=1)
    assert len(renewed) == 4 and count(conn, "sent") == 4


def test_send_failure_releases_the_unsent_leads(dsn, conn):
    def failing(lead):
        if lead.key == 3:
            raise RuntimeError("provider down")
        return f"m-{lead.key}"

    with pytest.raises(RuntimeError, match="provider down"):
        claimloop.run(dsn, cfg(batch_size=5), failing)
    assert count(conn, "sent") == 2 and count(conn, "in-progress") == 0 and count(conn, "queued") == 118
    assert conn.execute("SELECT claimed_by FROM leads WHERE lead_id = 3").fetchone()[0] is None


@pytest.mark.slow
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


# --------------------------------------------------------------------------- at most one email per person


class Deliveries:
    """A provider that does not deduplicate: every call is a delivery, counted per normal-form address."""

    def __init__(self, delay_s: float = 0.0, key=None):
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.delay_s = delay_s
        self.key = key or (lambda lead: lead.email.strip().lower().split("<")[-1].rstrip(">").strip())

    def __call__(self, lead):
        with self.lock:
            self.calls.append(self.key(lead))
        time.sleep(self.delay_s)
        return f"<{len(self.calls)}-{lead.key}@provider>"

    def per_person(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for person in self.calls:
            counts[person] = counts.get(person, 0) + 1
        return counts


class Pausing:
    """A send() that, once it has delivered to lead 1 (the email is out), waits until resumed."""

    def __init__(self, send):
        self.send = send
        self.paused, self.resume = threading.Event(), threading.Event()

    def __call__(self, lead):
        msg_id = self.send(lead)
        if lead.key == 1:
            self.paused.set()
            self.resume.wait(30)
        return msg_id


def _duplicate_people(conn, people: int, block: int) -> None:
    """Each person twice (a list imported twice, the second copy in another case and padding), the copy one
    block later, so two workers claiming neighbouring batches reach both copies at the same moment."""
    conn.execute("DELETE FROM leads")
    rows, lead_id = [], 0
    for start in range(1, people + 1, block):
        group = range(start, min(start + block, people + 1))
        for n in group:
            lead_id += 1
            rows.append((lead_id, f"p{n}@acme.com"))
        for n in group:
            lead_id += 1
            rows.append((lead_id, f" P{n}@Acme.com\t"))
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO leads (lead_id, email) VALUES (%s, %s)", rows)


@pytest.mark.slow
def test_one_person_in_two_lead_rows_is_emailed_once_by_two_workers(dsn, conn):
    _duplicate_people(conn, 200, block=10)
    send = Deliveries(delay_s=0.003)
    run_concurrently(dsn, send, loops=2, batch_size=10, timeout=120)
    claimloop.run(dsn, cfg(worker="after"), send)  # copies held while their twin's send was in flight
    twice = {p: n for p, n in send.per_person().items() if n > 1}
    assert not twice, f"{len(twice)} of 200 people emailed twice"
    assert len(send.per_person()) == 200 and count(conn, "sent") == 400
    assert sentlog.count_rows(conn) == 200


@pytest.mark.slow
def test_worker_paused_in_the_provider_call_with_its_session_ended_emails_nobody_twice(dsn, conn):
    """A worker stalls inside send() (the email is out) past its lease; its sessions are terminated; requeue-stale
    runs; another worker runs; the stalled one resumes. One delivery per person, and the first send recorded."""
    send = Deliveries()
    stalling = Pausing(send)
    slow = threading.Thread(target=claimloop.run, args=(dsn, cfg(worker="stalled", batch_size=3, lease_s=1.0,
                                                                  heartbeat_s=0.2), stalling, 1))
    slow.start()
    assert stalling.paused.wait(30)
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'mailmortem-%'")
    time.sleep(1.6)  # past the lease: nobody renews it any more
    claims.requeue_stale(conn, claims.LeadsTable(), 1.0, apply=True)
    claimloop.run(dsn, cfg(worker="other"), send)
    stalling.resume.set()
    slow.join(30)
    assert send.per_person().get("lead1@example.com") == 1, "the stalled worker's person was emailed again"
    assert max(send.per_person().values()) == 1 and len(send.per_person()) == 120
    assert sentlog.already_sent(conn, "c-1", "1", "lead1@example.com")
    assert conn.execute("SELECT count(*) FROM sent_log WHERE recipient = 'lead1@example.com'").fetchone()[0] == 1


def test_a_lost_token_after_the_send_blocks_only_the_lead_update_and_stops_the_worker(dsn, conn):
    send = Deliveries()
    slow = Pausing(send)
    result = {}
    worker = threading.Thread(target=lambda: result.update(stats=claimloop.run(dsn, cfg(batch_size=3), slow)))
    worker.start()
    assert slow.paused.wait(30)
    conn.execute("UPDATE leads SET claim_token = claim_token + 1000 WHERE lead_id = 1")  # as a later claim would
    slow.resume.set()
    worker.join(30)
    stats = result["stats"]
    assert (stats.fenced_after_send, stats.sent) == (1, 0) and "fenced after send" in stats.stopped
    assert send.calls == ["lead1@example.com"]  # the worker stopped: leads 2 and 3 were given back
    assert conn.execute("SELECT status FROM leads WHERE lead_id = 1").fetchone()[0] == "in-progress"
    assert count(conn, "queued") == 119
    assert sentlog.recorded(conn, "c-1", "1", "lead1@example.com")  # the send is recorded all the same


def test_an_empty_step_is_refused_naming_the_steps_the_sent_log_holds(dsn, conn):
    sentlog.record_send(conn, "c-1", "1", "lead5@example.com", "m-step-1")
    send = Deliveries()
    with pytest.raises(RefusedError, match=r"step is empty.*'1'"):
        claimloop.run(dsn, cfg(step=""), send)
    with pytest.raises(RefusedError, match="step is empty"):
        claimloop.run(dsn, cfg(step="  "), send)
    assert send.calls == [] and count(conn, "queued") == 120


@pytest.mark.slow
def test_run_creates_what_it_needs_on_a_database_with_only_the_leads_table(leads):
    dsn = leads(QUEUED, sent_log=False)
    with psycopg.connect(dsn, autocommit=True) as conn:
        stats = claimloop.run(dsn, cfg(), Recorder())
        assert stats.sent == 120 and sentlog.count_rows(conn) == 120
        with pytest.raises(RefusedError, match="no table outreach_leads"):
            claimloop.run(dsn, cfg(table=claims.leads_table("outreach_leads")), Recorder())


@pytest.mark.slow
def test_candidate_id_is_a_second_key_for_one_person(dsn, conn):
    conn.execute("ALTER TABLE leads ADD COLUMN person_id INT; UPDATE leads SET person_id = lead_id; "
                 "UPDATE leads SET person_id = 1 WHERE lead_id = 2")  # lead 2: person 1 at another address
    send = Deliveries()
    stats = claimloop.run(dsn, cfg(candidate_column="person_id"), send)
    assert len(send.calls) == 119 and "lead2@example.com" not in send.calls
    assert (stats.sent, stats.already_sent) == (119, 1) and count(conn, "sent") == 120


@pytest.mark.slow
def test_a_lead_held_by_an_unconfirmed_reservation_waits_and_counts_as_sent(dsn, conn):
    from remediation import reservations

    with conn.transaction():
        assert reservations.reserve(conn, "c-1", "1", "lead4@example.com", None, "dead-worker", 1).ok
    send = Deliveries()
    claimloop.run(dsn, cfg(), send)
    assert "lead4@example.com" not in send.calls and len(send.calls) == 119
    assert conn.execute("SELECT status FROM leads WHERE lead_id = 4").fetchone()[0] == "queued"
    assert sentlog.already_sent(conn, "c-1", "1", " Lead4@Example.com")
    assert [r["recipient"] for r in reservations.unconfirmed(conn)] == ["lead4@example.com"]
    plan = reservations.release_plan(conn, "c-1", "1", "lead4@example.com")
    assert reservations.release(conn, plan, "person:test", "checked the provider") == 1
    claimloop.run(dsn, cfg(), send)
    assert send.calls.count("lead4@example.com") == 1 and count(conn, "sent") == 120


@pytest.mark.slow
def test_the_docs_example_runs_as_written_on_a_database_with_only_the_leads_table(leads):
    text = (Path(__file__).resolve().parent.parent / "docs" / "remediation.md").read_text(encoding="utf-8")
    example = re.search(r"## The reference claim loop.*?```python\n(.*?)```", text, re.S).group(1)
    delivered = []

    class Provider:
        def send(self, to, idempotency_key):
            delivered.append(to)
            return f"<{idempotency_key}@provider>"

    namespace = {"dsn": leads(QUEUED, sent_log=False), "provider": Provider()}
    exec(compile(example, "docs/remediation.md", "exec"), namespace)
    assert namespace["stats"].sent == 120 and len(delivered) == 120


@pytest.mark.slow
def test_a_send_that_finds_the_job_lock_lost_gives_its_reservation_back(dsn, conn):
    from remediation import reservations
    from remediation.joblock import JobLockLost

    send = Recorder()

    def checking(lead):
        if lead.key == 3:
            raise JobLockLost("the job lock was lost")  # lock.check() before the provider call
        return send(lead)

    with pytest.raises(JobLockLost):
        claimloop.run(dsn, cfg(), checking)
    assert send.sent == [1, 2] and count(conn, "queued") == 118
    assert reservations.unconfirmed(conn) == [] and not sentlog.already_sent(conn, "c-1", "1", "lead3@example.com")
    assert claimloop.run(dsn, cfg(), send).sent == 118 and sorted(send.sent) == list(range(1, 121))


FIVE = "(lead_id, email) SELECT g, 'Lead' || g || '@Example.com' FROM generate_series(1, 5) AS g"
BACKFILLED_C_42 = [("C-42", "1", f"lead{g}@example.com", f"m-{g}") for g in range(1, 6)]


@pytest.mark.parametrize("campaign,step", [("c-42", "1"), (" c-42", "01"), ("C-42", "1")])
def test_a_loop_spelling_a_backfilled_campaign_another_way_emails_nobody_again(leads, campaign, step):
    dsn = leads(FIVE, sent=BACKFILLED_C_42)
    send = Deliveries()
    stats = claimloop.run(dsn, cfg(campaign=campaign, step=step, no_sends_yet=False), send)
    assert send.calls == [] and (stats.sent, stats.already_sent) == (0, 5)


def test_a_loop_whose_campaign_or_step_names_nothing_is_refused_unless_no_sends_yet(leads):
    dsn = leads(FIVE, sent=BACKFILLED_C_42)
    send = Deliveries()
    with pytest.raises(RefusedError, match=r"^LoopConfig.campaign 'c-24' matches no sent-log row.*campaigns: 'C-42'"):
        claimloop.run(dsn, cfg(campaign="c-24", no_sends_yet=False), send)
    with pytest.raises(RefusedError, match=r"^LoopConfig.step '2' matches no sent-log row.*campaign 'c-42': '1'\."):
        claimloop.run(dsn, cfg(campaign="c-42", step="2", no_sends_yet=False), send)
    assert send.calls == []
    assert claimloop.run(dsn, cfg(campaign="c-42", step="2"), send).sent == 5  # a new step: each person once
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert count(conn, "sent") == 5


def test_an_empty_step_names_the_steps_of_every_spelling_of_the_campaign(leads):
    dsn = leads(FIVE, sent=BACKFILLED_C_42 + [("c-42 ", "02", "lead1@example.com", "m-6")])
    with pytest.raises(RefusedError, match=r"step is empty.*'02', '1' for campaign 'c-42'"):
        claimloop.run(dsn, cfg(campaign="c-42", step=""), Deliveries())
