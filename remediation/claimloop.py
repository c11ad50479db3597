"""The reference claim loop: the fix the runbooks prescribe, as code you can adopt.

    from remediation import claimloop

    def send(lead):                       # your provider call; return its message id
        return provider.send(to=lead.email, idempotency_key=lead.idempotency_key, ...)

    cfg = claimloop.LoopConfig(campaign="c-42", step="1", lease_s=120)
    stats = claimloop.run(dsn, cfg, send)  # returns when no queued lead is left

Each round:

1. **claim** a batch atomically: `UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP
   LOCKED LIMIT n)`, stamping worker, claim time (the lease starts on the
   server's clock) and a **fencing token** from a sequence — it only grows, so a
   later claim of the same lead always carries a larger token;
2. a **heartbeat** thread renews the lease (claimed_at) of the batch's unfinished
   leads every `lease_s / 3`, so `requeue-stale` never takes a live batch;
3. per lead, in ONE transaction: lock the row *only if our token still holds it*
   (a worker whose lease expired and whose lead was re-claimed is fenced out),
   **check the durable sent-log** (`already_sent`), **send**, **record the send**
   (`record_send`) and **mark it sent**, guarded by the token;
4. **release** whatever is left (on an error or a stop) back to queued.

The one window no database can close is a crash between the provider accepting
the message and the commit: pass `lead.idempotency_key` (stable per campaign,
step and recipient) to your provider so a re-send after a crash is deduplicated
there. See docs/remediation.md.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import queries
from forensics.addresses import normalize_address
from remediation import sentlog
from remediation.claims import LeadsTable
from remediation.identifiers import parse_name


def default_worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class LoopConfig:
    campaign: str
    step: str = ""
    worker: str = field(default_factory=default_worker_name)
    table: LeadsTable = LeadsTable()
    token_column: str = "claim_token"
    sequence: str = "mailmortem_fencing_seq"
    batch_size: int = 50
    lease_s: float = 120.0
    heartbeat_s: float | None = None  # default lease_s / 3
    reclaim_expired: bool = False  # also take over expired claims (else requeue-stale does it)
    provider: str | None = None

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat_s if self.heartbeat_s else self.lease_s / 3

    def idents(self) -> dict:
        """Values for the {ident:...} placeholders of queries/claimloop.sql; hostile names are refused."""
        schema = self.table.table.schema
        seq = parse_name(self.sequence, "sequence name")
        return {**self.table.idents(), "claim_token": parse_name(self.token_column, "column name"),
                "sequence": (schema, seq) if schema else seq}

    def params(self, **extra) -> dict:
        t = self.table
        return {"status_queued": t.queued, "status_in_progress": t.in_progress, "status_sent": t.sent, **extra}


@dataclass(frozen=True)
class Lead:
    key: Any
    key_text: str
    email: str
    token: int
    campaign: str
    step: str

    @property
    def idempotency_key(self) -> str:
        """Stable per (campaign, step, recipient): a re-send after a crash carries the same key."""
        raw = "\x1f".join([self.campaign, self.step, normalize_address(self.email) or ""])
        return hashlib.sha256(raw.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Batch:
    token: int | None
    leads: tuple[Lead, ...]

    @property
    def keys(self) -> list:
        return [lead.key for lead in self.leads]


@dataclass
class RunStats:
    batches: int = 0
    sent: int = 0
    already_sent: int = 0  # found in the sent-log: marked sent, not sent again
    fenced: int = 0  # our claim was lost (lease expired and the lead re-queued / re-claimed)
    released: int = 0
    renewals: int = 0
    heartbeat_error: str | None = None  # the heartbeat stopped: leases then expire, the fence still holds


def ensure_claim_schema(conn, cfg: LoopConfig) -> None:
    """Add the fencing-token column and sequence if missing (the leads table must exist).

    Cheap when they exist: the catalog is read first, because ALTER TABLE would take
    an exclusive lock on a table live workers are using.
    """
    idents = cfg.idents()
    params = {"table": queries.quote_ident(idents["table"]), "column": cfg.token_column,
              "sequence": queries.quote_ident(idents["sequence"])}
    with conn.transaction():
        if queries.run(conn, "claimloop_token_column_exists", params).fetchone()[0] and \
                queries.run(conn, "claimloop_sequence_exists", params).fetchone()[0]:
            return
        queries.run(conn, "claimloop_ddl_lock")
        queries.run(conn, "claimloop_add_token_column", **idents)
        queries.run(conn, "claimloop_create_sequence", **idents)


def claim_batch(conn, cfg: LoopConfig) -> Batch:
    """Claim up to batch_size leads under one new fencing token (its own transaction)."""
    sequence = queries.quote_ident(cfg.idents()["sequence"])
    params = cfg.params(reclaim_expired=cfg.reclaim_expired, lease_s=cfg.lease_s, batch_size=cfg.batch_size,
                        sequence=sequence, worker=cfg.worker)
    with conn.transaction():
        rows = queries.run(conn, "claimloop_claim_batch", params, **cfg.idents()).fetchall()
    leads = tuple(Lead(key, text, email, token, cfg.campaign, cfg.step) for key, text, email, token in rows)
    return Batch(leads[0].token if leads else None, leads)


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


def process_lead(conn, cfg: LoopConfig, lead: Lead, send: Callable[[Lead], str]) -> str:
    """Check, send, record and mark one lead in ONE transaction: 'sent', 'already-sent' or 'fenced'."""
    idents, params = cfg.idents(), cfg.params(key=lead.key, token=lead.token)
    with conn.transaction():
        if queries.run(conn, "claimloop_lock_lead", params, **idents).fetchone() is None:
            return "fenced"
        outcome = "already-sent"
        if not sentlog.already_sent(conn, cfg.campaign, cfg.step, lead.email):
            msg_id = send(lead)
            sentlog.record_send(conn, cfg.campaign, cfg.step, lead.email, msg_id,
                                candidate=lead.key_text, provider=cfg.provider)
            outcome = "sent"
        queries.run(conn, "claimloop_mark_sent", params, **idents)
    return outcome


def process_batch(conn, cfg: LoopConfig, batch: Batch, send: Callable[[Lead], str], stats: RunStats) -> None:
    for lead in batch.leads:
        outcome = process_lead(conn, cfg, lead, send)
        if outcome == "sent":
            stats.sent += 1
        elif outcome == "already-sent":
            stats.already_sent += 1
        else:
            stats.fenced += 1


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

        try:
            with psycopg.connect(self.dsn, autocommit=True, application_name="mailmortem-heartbeat") as conn:
                while not self._stop.wait(self.cfg.heartbeat_interval):
                    with self._lock:
                        batch = self._batch
                    if batch is not None and batch.leads:
                        self.renewals += renew(conn, self.cfg, batch)
        except Exception as exc:  # the loop goes on; leases then expire and the fence protects the leads
            self.error = exc


def run(dsn: str, cfg: LoopConfig, send: Callable[[Lead], str], max_batches: int | None = None) -> RunStats:
    """Claim and send batches until no queued lead is left (or max_batches); returns counts."""
    import psycopg

    stats = RunStats()
    with psycopg.connect(dsn, autocommit=True, application_name="mailmortem-claimloop") as conn:
        ensure_claim_schema(conn, cfg)
        with LeaseKeeper(dsn, cfg) as keeper:
            while max_batches is None or stats.batches < max_batches:
                batch = claim_batch(conn, cfg)
                if not batch.leads:
                    break
                stats.batches += 1
                _run_batch(conn, cfg, batch, send, stats, keeper)
        stats.renewals = keeper.renewals
        stats.heartbeat_error = f"{type(keeper.error).__name__}: {keeper.error}" if keeper.error else None
    return stats


def _run_batch(conn, cfg: LoopConfig, batch: Batch, send, stats: RunStats, keeper: LeaseKeeper) -> None:
    keeper.hold(batch)
    try:
        process_batch(conn, cfg, batch, send, stats)
    finally:
        keeper.hold(None)
        stats.released += release(conn, cfg, batch)
