"""The reference claim loop: at most one email per (campaign, step, person), and nobody lost silently.

    from remediation import claimloop

    def send(lead):                       # your provider call; return its message id
        return provider.send(to=lead.email, idempotency_key=lead.idempotency_key)

    stats = claimloop.run(dsn, claimloop.LoopConfig(campaign="c-42", step="1"), send)

`run` creates what it needs and refuses an empty campaign or step, and a campaign or step the sent-log
holds no row of (compared in normal form, remediation.labels) unless `no_sends_yet=True` says it is new.
Each round:

1. **claim** a batch atomically (`FOR UPDATE SKIP LOCKED`), stamping worker, claim
   time (the lease starts on the server's clock) and a **fencing token** from a
   sequence; a lead whose person holds an unconfirmed reservation is not claimed;
2. a **heartbeat** thread renews the lease of the batch's unfinished leads;
3. per lead, **reserve** in one committed transaction: lock the row only while our
   token holds it, check the sent-log, and take the person's reservation keys
   (normal-form address, and the candidate id when `candidate_column` names one);
   only when every key was free does the **send** happen;
4. **record**: the send in sent_log, the reservation confirmed and the lead marked
   sent, in one transaction that re-checks the token (re-connecting if the session
   died during the provider call). A stale token blocks only the lead update: it
   counts as fenced-after-send and stops the worker;
5. **release** whatever is left back to queued.

A worker that dies between reserving and recording leaves an unconfirmed reservation:
its person counts as sent until a backfill or a person settles it (docs/safety.md).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import queries
from forensics.addresses import install_pg, normalize_address, normalize_msg_id
from forensics.errors import InputError
from remediation import labels, reservations, sentlog
from remediation.claims import LeadsTable
from remediation.errors import RefusedError
from remediation.identifiers import parse_name
from remediation.joblock import JobLockLost

RECORD_ATTEMPTS = 6  # re-connections tried to record a send whose session died during the provider call


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class LoopConfig:
    campaign: str
    step: str = ""  # refused when empty: a send needs its step
    worker: str = field(default_factory=default_worker_name)
    table: LeadsTable = LeadsTable()
    token_column: str = "claim_token"
    sequence: str = "mailmortem_fencing_seq"
    batch_size: int = 50
    lease_s: float = 120.0
    heartbeat_s: float | None = None  # default lease_s / 3
    reclaim_expired: bool = False  # also take over expired claims (else requeue-stale does it)
    provider: str | None = None
    candidate_column: str | None = None  # a person's id on the lead (not the lead row's id): a second key
    no_sends_yet: bool = False  # run a campaign/step the sent-log holds no row of (a new one) instead of refusing

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_s if self.heartbeat_s else self.lease_s / 3

    def idents(self) -> dict:
        """Values for the {ident:...} and {frag:...} placeholders of queries/claimloop.sql; bad names are refused."""
        schema = self.table.table.schema
        seq = parse_name(self.sequence, "sequence name")
        candidate = (queries.fragment("claimloop_candidate_column",
                                      candidate_column=parse_name(self.candidate_column, "column name"))
                     if self.candidate_column else "NULL")
        return {**self.table.idents(), "claim_token": parse_name(self.token_column, "column name"),
                "sequence": (schema, seq) if schema else seq, "candidate": candidate}

    def params(self, **extra) -> dict:
        t = self.table
        return {"status_queued": t.queued, "status_in_progress": t.in_progress, "status_sent": t.sent,
                "campaign": self.campaign, "step": self.step, **labels.label_keys(self.campaign, self.step), **extra}


@dataclass(frozen=True)
class Lead:
    key: Any
    key_text: str
    email: str
    token: int
    campaign: str
    step: str
    candidate: str | None = None  # the person's id, when the leads table carries one

    @property
    def address(self) -> str | None:
        return normalize_address(self.email)

    @property
    def reservation(self) -> str:
        return reservations.reservation_id(self.campaign, self.step, self.address or "", self.candidate)

    @property
    def idempotency_key(self) -> str:
        """The reservation's id: stable per (campaign, step, person), so every retry carries the same key."""
        return self.reservation


@dataclass(frozen=True)
class Batch:
    token: int | None
    leads: tuple[Lead, ...]
    # The sent-log's spellings of the campaign and step, read once per batch (not per lead); a spelling first recorded
    # later is read with the next batch, and the reservations (normal form) hold a person another loop is sending to.
    scope: labels.Scope | None = None

    @property
    def keys(self) -> list:
        return [lead.key for lead in self.leads]


@dataclass
class RunStats:
    batches: int = 0
    sent: int = 0
    already_sent: int = 0  # found in the sent-log: marked sent, not sent again
    fenced: int = 0  # our claim was lost before the send (lease expired, lead re-queued / re-claimed)
    released: int = 0
    renewals: int = 0
    heartbeat_error: str | None = None  # the heartbeat stopped: leases then expire, the fence still holds
    held: int = 0  # the person's reservation was taken (a send in flight, or unconfirmed): lead given back
    fenced_after_send: int = 0  # sent and recorded, but our claim was lost meanwhile: the worker stopped
    without_address: int = 0  # queued leads never claimed: no address to reserve
    stopped: str | None = None  # why the loop stopped early


# --------------------------------------------------------------------------- setup


def ensure_claim_schema(conn, cfg: LoopConfig) -> None:
    """Create sent_log and the send reservations, add the fencing-token column and sequence if missing
    (the leads table must exist), and this session's address function.

    Cheap when they exist: the catalog is read first, because CREATE and ALTER TABLE
    would take locks on tables live workers are using.
    """
    idents = cfg.idents()
    params = {"table": queries.quote_ident(idents["table"]), "column": cfg.token_column,
              "sequence": queries.quote_ident(idents["sequence"])}
    with conn.transaction():
        install_pg(conn)
        if not queries.run(conn, "claimloop_store_ready").fetchone()[0]:
            sentlog.ensure_schema(conn)
        if queries.run(conn, "claimloop_token_column_exists", params).fetchone()[0] and \
                queries.run(conn, "claimloop_sequence_exists", params).fetchone()[0]:
            return
        queries.run(conn, "claimloop_ddl_lock")
        queries.run(conn, "claimloop_add_token_column", **idents)
        queries.run(conn, "claimloop_create_sequence", **idents)


def prepare(conn, cfg: LoopConfig) -> None:
    """Refuse what cannot be run safely; create sent_log, the reservations and the claim schema if missing."""
    _refuse_empty_scope(conn, cfg)
    table = queries.quote_ident(cfg.idents()["table"])
    with conn.transaction():
        if not queries.run(conn, "claimloop_leads_table_exists", {"table": table}).fetchone()[0]:
            raise RefusedError(f"no table {cfg.table.table} in this database: LoopConfig.table names your leads "
                               "table (remediation.claims.leads_table(...) maps its columns)")
    ensure_claim_schema(conn, cfg)


def _refuse_empty_scope(conn, cfg: LoopConfig) -> None:
    """An empty campaign or step, or one naming nothing in the sent-log (labels.refuse_loop_scope)."""
    with conn.transaction():
        pairs = labels.sent_log_pairs(conn) if sentlog.table_present(conn) else []
    labels.refuse_loop_scope(pairs, cfg.campaign, cfg.step, cfg.no_sends_yet)


# --------------------------------------------------------------------------- claims


def claim_batch(conn, cfg: LoopConfig) -> Batch:
    """Claim up to batch_size leads under one new fencing token (its own transaction)."""
    sequence = queries.quote_ident(cfg.idents()["sequence"])
    params = cfg.params(reclaim_expired=cfg.reclaim_expired, lease_s=cfg.lease_s, batch_size=cfg.batch_size,
                        sequence=sequence, worker=cfg.worker)
    with conn.transaction():
        install_pg(conn)
        rows = queries.run(conn, "claimloop_claim_batch", params, **cfg.idents()).fetchall()
        scope = labels.sent_log_scope(conn, cfg.campaign, cfg.step) if rows else None
    leads = tuple(Lead(key, text, email, token, cfg.campaign, cfg.step, candidate)
                  for key, text, email, token, candidate in rows)
    return Batch(leads[0].token if leads else None, leads, scope)


def renew(conn, cfg: LoopConfig, batch: Batch) -> int:
    """Extend the lease of the batch's unfinished leads; returns how many were renewed."""
    params = cfg.params(keys=batch.keys, token=batch.token)
    with conn.transaction():
        return len(queries.run(conn, "claimloop_renew", params, **cfg.idents()).fetchall())


def release(conn, cfg: LoopConfig, batch: Batch) -> int:
    """Return the batch's leads we still hold (unsent) to queued."""
    if not batch.leads:
        return 0
    with conn.transaction():
        rows = queries.run(conn, "claimloop_release", cfg.params(keys=batch.keys, token=batch.token),
                           **cfg.idents())
        return len(rows.fetchall())


def count_without_address(conn, cfg: LoopConfig) -> int:
    with conn.transaction():
        install_pg(conn)
        return int(queries.one(conn, "claimloop_count_unaddressable", cfg.params(), **cfg.idents())["n"])


# --------------------------------------------------------------------------- one lead: reserve, send, record


def reserve_lead(conn, cfg: LoopConfig, lead: Lead, scope: labels.Scope | None = None) -> str:
    """One committed transaction: 'reserved' (send now), 'already-sent', 'held' (given back) or 'fenced'.
    `scope`: the batch's sent-log spellings (Batch.scope); read now without it."""
    idents, params = cfg.idents(), cfg.params(key=lead.key, token=lead.token)
    with conn.transaction():
        if queries.run(conn, "claimloop_lock_lead", params, **idents).fetchone() is None:
            return "fenced"
        if lead.address is None:
            raise InputError(f"lead {lead.key_text} has no address to reserve")
        if sentlog.recorded(conn, cfg.campaign, cfg.step, lead.email, scope):
            queries.run(conn, "claimloop_mark_sent", params, **idents)
            return "already-sent"
        taken = reservations.reserve(conn, cfg.campaign, cfg.step, lead.address, lead.candidate, cfg.worker,
                                     lead.token)
        if taken.ok:
            return "reserved"
        if taken.holder and taken.holder["recorded"]:  # sent under another key of the person
            queries.run(conn, "claimloop_mark_sent", params, **idents)
            return "already-sent"
        queries.run(conn, "claimloop_release", cfg.params(keys=[lead.key], token=lead.token), **idents)
        return "held"


def record_sent(conn, cfg: LoopConfig, lead: Lead, msg_id: str) -> str:
    """One transaction: record the send, confirm the reservation, mark the lead sent if our token still
    holds it. 'sent', or 'fenced-after-send' when the token (or the reservation) was lost meanwhile."""
    if not normalize_msg_id(msg_id):
        raise InputError(f"send() returned no message id for lead {lead.key_text}: its reservation stays unconfirmed")
    with conn.transaction():
        sentlog.record_send(conn, cfg.campaign, cfg.step, lead.email, msg_id, candidate=lead.candidate,
                            provider=cfg.provider)
        confirmed = reservations.confirm(conn, cfg.campaign, cfg.step, lead.reservation, lead.token,
                                         normalize_msg_id(msg_id))
        marked = queries.run(conn, "claimloop_mark_sent", cfg.params(key=lead.key, token=lead.token),
                             **cfg.idents()).fetchone()
    return "sent" if confirmed and marked else "fenced-after-send"


def process_lead(conn, cfg: LoopConfig, lead: Lead, send: Callable[[Lead], str],
                 scope: labels.Scope | None = None) -> str:
    """Reserve, send, record: 'sent', 'already-sent', 'held', 'fenced' or 'fenced-after-send'."""
    outcome = reserve_lead(conn, cfg, lead, scope)
    if outcome != "reserved":
        return outcome
    return record_sent(conn, cfg, lead, send_reserved(conn, cfg, lead, send))


def send_reserved(conn, cfg: LoopConfig, lead: Lead, send: Callable[[Lead], str]) -> str:
    """Call send() for a reserved lead. JobLockLost from it comes from lock.check() before the provider call
    (docs/remediation.md): nothing went out, so the reservation is given back before the error goes on."""
    import psycopg

    try:
        return send(lead)
    except JobLockLost:
        try:
            with conn.transaction():
                reservations.withdraw(conn, cfg.campaign, cfg.step, lead.address, lead.candidate, lead.token)
        except psycopg.Error:  # a dead session leaves it unconfirmed: listed, and nobody is emailed twice
            pass
        raise


class Session:
    """The loop's connection. Recording a send re-opens it if the session died during the provider call:
    the email is out, so its record must not be lost with the connection."""

    def __init__(self, dsn: str, cfg: LoopConfig):
        self.dsn, self.cfg = dsn, cfg
        self.conn = self._connect()

    def _connect(self):
        import psycopg

        name = f"mailmortem-claimloop {self.cfg.worker}"[:63]
        return psycopg.connect(self.dsn, autocommit=True, application_name=name)

    def record(self, lead: Lead, msg_id: str) -> str:
        import psycopg

        for attempt in range(RECORD_ATTEMPTS):
            try:
                return record_sent(self.conn, self.cfg, lead, msg_id)
            except psycopg.OperationalError:
                if attempt == RECORD_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * 2 ** attempt)
                self.close()
                self.conn = self._connect()
        raise AssertionError("unreachable")

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # a dead connection may fail to close; it is gone either way
            pass


def process_batch(session: Session, cfg: LoopConfig, batch: Batch, send: Callable[[Lead], str],
                  stats: RunStats) -> None:
    for lead in batch.leads:
        outcome = reserve_lead(session.conn, cfg, lead, batch.scope)
        if outcome == "reserved":
            outcome = session.record(lead, send_reserved(session.conn, cfg, lead, send))
        _count(stats, outcome)
        if outcome == "fenced-after-send":
            stats.stopped = (f"fenced after send: lead {lead.key_text} was re-claimed while its email went out "
                             "(lease lost); the send is recorded, this worker stops")
            return


def _count(stats: RunStats, outcome: str) -> None:
    field_name = {"sent": "sent", "already-sent": "already_sent", "held": "held", "fenced": "fenced",
                  "fenced-after-send": "fenced_after_send"}[outcome]
    setattr(stats, field_name, getattr(stats, field_name) + 1)


# --------------------------------------------------------------------------- the loop


class LeaseKeeper:
    """Heartbeat thread with its own connection: renews the current batch every interval."""

    def __init__(self, dsn: str, cfg: LoopConfig):
        self.dsn, self.cfg = dsn, cfg
        self._batch: Batch | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-keeper", daemon=True)
        self.renewals = 0
        self.error: Exception | None = None

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def hold(self, batch: Batch | None) -> None:
        with self._lock:
            self._batch = batch

    def _run(self) -> None:
        import psycopg

        name = f"mailmortem-heartbeat {self.cfg.worker}"[:63]
        try:
            with psycopg.connect(self.dsn, autocommit=True, application_name=name) as conn:
                while not self._stop.wait(self.cfg.heartbeat_interval):
                    with self._lock:
                        batch = self._batch
                    if batch is not None and batch.leads:
                        self.renewals += renew(conn, self.cfg, batch)
        except Exception as exc:  # the loop goes on; leases then expire and the fence protects the leads
            self.error = exc


def run(dsn: str, cfg: LoopConfig, send: Callable[[Lead], str], max_batches: int | None = None) -> RunStats:
    """Claim and send batches until no claimable lead is left (or max_batches, or a stop); returns counts."""
    stats = RunStats()
    session = Session(dsn, cfg)
    try:
        prepare(session.conn, cfg)
        with LeaseKeeper(dsn, cfg) as keeper:
            while (max_batches is None or stats.batches < max_batches) and stats.stopped is None:
                batch = claim_batch(session.conn, cfg)
                if not batch.leads:
                    break
                stats.batches += 1
                _run_batch(session, cfg, batch, send, stats, keeper)
        stats.renewals = keeper.renewals
        stats.heartbeat_error = f"{type(keeper.error).__name__}: {keeper.error}" if keeper.error else None
        stats.without_address = count_without_address(session.conn, cfg)
    finally:
        session.close()
    return stats


def _run_batch(session: Session, cfg: LoopConfig, batch: Batch, send, stats: RunStats, keeper: LeaseKeeper) -> None:
    keeper.hold(batch)
    try:
        process_batch(session, cfg, batch, send, stats)
    finally:
        keeper.hold(None)
        stats.released += release(session.conn, cfg, batch)
