"""Send reservations: at most one email per (campaign, step, person), even through a provider that
does not deduplicate.

A sender reserves every key of the person — the normal form of the address, and the candidate id
when the lead carries one — in a transaction it COMMITS before calling the provider. One reservation
holds a key for every spelling of its campaign and step (compared in normal form, remediation.labels;
on PostgreSQL a transaction lock on that normal form makes a second spelling wait for the first);
a send goes ahead only when every key was free. After the call the send is recorded in sent_log and
the reservation confirmed (remediation.claimloop).

A reservation with no recorded send ("unconfirmed": its sender died or was cut off after reserving)
counts as sent for every check. It is released only by a person (`release`, `mailmortem sentlog
release`) or by a provider backfill that shows no send to that person (`reconcile_after_backfill`).
Functions take a `remediation.store.Store` or a raw psycopg / DuckDB connection and never commit,
except `release`, which is one transaction of its own.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from typing import Any

import queries
from forensics.addresses import install_sql, normalize_address, normalize_label
from forensics.errors import InputError
from remediation import labels
from remediation.errors import RefusedError
from remediation.store import connection_kind

ADDRESS, CANDIDATE = "address", "candidate"
CLOCK_MARGIN_S = 300.0  # provider clock vs database clock: how far a backfill must reach past a reservation


def reservation_id(campaign: str, step: str, address: str, candidate: str | None = None) -> str:
    """Stable per (campaign, step, person): the candidate when known, else the address. The idempotency
    key a sender passes to its provider is this id, so a retry of one reservation carries one key."""
    parts = [campaign, step, CANDIDATE, candidate] if candidate else [campaign, step, address]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def keys_of(address: str, candidate: str | None) -> list[tuple[str, str]]:
    return [(ADDRESS, address)] + ([(CANDIDATE, candidate)] if candidate else [])


def ensure_tables(conn: Any) -> None:
    """Create send_reservation (+ index) and send_reservation_released if missing; inside the caller's transaction."""
    for name in ("reservation_create_table", "reservation_create_index", "reservation_create_released"):
        queries.run(conn, name)


_TABLE_EXISTS = {"postgres": "reservation_table_exists_pg", "duckdb": "reservation_table_exists_duckdb"}


def table_exists(conn: Any) -> bool:
    return bool(queries.one(conn, _TABLE_EXISTS[queries.dialect_of(conn)])["present"])


# --------------------------------------------------------------------------- the sender's side


@dataclass(frozen=True)
class Reserved:
    ok: bool
    reservation: str
    holder: dict | None = None  # when not ok: the reservation holding a key (reservation_holder's columns)


def reserve(conn: Any, campaign: str, step: str, address: str, candidate: str | None, worker: str,
            token: int | None) -> Reserved:
    """Take every key of the person, or none: keys taken before a conflict are withdrawn. A key is taken when
    no reservation holds it in any spelling of the campaign and step. Never commits: call it in a transaction."""
    conn, kind = connection_kind(conn)
    install_sql(conn)
    rid = reservation_id(campaign, step, address, candidate)
    row = {"campaign": campaign, "step": step, "reservation": rid, "recipient": address, "candidate": candidate,
           "worker": worker, "token": token, **labels.label_keys(campaign, step)}
    taken: list[tuple[str, str]] = []
    for key_kind, key_value in keys_of(address, candidate):
        params = {**row, "key_kind": key_kind, "key_value": key_value}
        holder = _holder(conn, kind, params)
        if holder is None and queries.run(conn, "reservation_insert_key", params).fetchone() is None:
            holder = queries.one(conn, "reservation_holder", params)  # a legacy row the lock did not cover
        if holder is not None:
            _withdraw_keys(conn, row, taken)
            return Reserved(False, rid, holder)
        taken.append((key_kind, key_value))
    return Reserved(True, rid)


def _holder(conn: Any, kind: str, params: dict) -> dict | None:
    """The reservation holding this key in any spelling; on PostgreSQL first wait for whoever is reserving it."""
    if kind == "postgres":
        lock_key = "\x1f".join(("mailmortem reservation", params["campaign_key"], params["step_key"],
                                params["key_kind"], params["key_value"]))
        queries.run(conn, "reservation_lock_key", {"lock_key": lock_key})
    return queries.one(conn, "reservation_holder", params)


def withdraw(conn: Any, campaign: str, step: str, address: str, candidate: str | None, token: int | None) -> None:
    """Give back every key of our reservation whose send never started (its sender knows nothing went out).
    Never commits."""
    conn, _kind = connection_kind(conn)
    row = {"campaign": campaign, "step": step, "reservation": reservation_id(campaign, step, address, candidate),
           "token": token}
    _withdraw_keys(conn, row, keys_of(address, candidate))


def _withdraw_keys(conn: Any, row: dict, keys: list[tuple[str, str]]) -> None:
    for key_kind, key_value in keys:
        queries.run(conn, "reservation_withdraw_key", {**row, "key_kind": key_kind, "key_value": key_value})


def confirm(conn: Any, campaign: str, step: str, reservation: str, token: int | None, msg_id: str) -> bool:
    """Stamp the message id on our reservation; False when it is no longer ours (released meanwhile)."""
    conn, _kind = connection_kind(conn)
    params = {"campaign": campaign, "step": step, "reservation": reservation, "token": token, "msg_id": msg_id}
    return bool(queries.rows(conn, "reservation_confirm", params))


# --------------------------------------------------------------------------- checks and listings


def for_address(conn_or_store: Any, campaign: str, step: str | None, recipient: str) -> dict | None:
    """The newest reservation of `recipient` for the campaign (and step), recorded or not; None if none.
    Campaign and step compare in normal form."""
    conn, _kind = connection_kind(conn_or_store)
    if not table_exists(conn):
        return None
    install_sql(conn)
    params = {**labels.label_keys(campaign, step), "recipient": normalize_address(recipient) or ""}
    return queries.one(conn, "reservation_for_address", params)


def unconfirmed(conn_or_store: Any, campaign: str | None = None, step: str | None = None) -> list[dict]:
    """Unconfirmed reservations, oldest first: people who may have been emailed, nobody knows yet.
    Campaign and step compare in normal form (`normalize_label`), as requeue-stale's filters do."""
    conn, _kind = connection_kind(conn_or_store)
    if not table_exists(conn):
        return []
    install_sql(conn)
    return queries.rows(conn, "reservation_unconfirmed", labels.label_keys(campaign, step))


def count_unconfirmed(conn: Any, campaign: str | None = None, step: str | None = None) -> int:
    return len(unconfirmed(conn, campaign, step))


def listed_unconfirmed(conn_or_store: Any, campaign: str | None = None, step: str | None = None) -> list[dict]:
    """`unconfirmed` for a person asking: a store without reservations, or a filter that names no
    reservation at all, is refused (an empty list would read as "nobody may have been emailed")."""
    conn, _kind = connection_kind(conn_or_store)
    if not table_exists(conn):
        raise RefusedError("no send_reservation table here: nothing reserves sends in this store (the claim "
                           "loop creates it); pass the --db your senders use")
    install_sql(conn)
    rows = queries.rows(conn, "reservation_unconfirmed", labels.label_keys(campaign, step))  # the table is there
    if not rows and (campaign is not None or step is not None):
        _refuse_unmatched(conn, campaign, step)
    return rows


def _refuse_unmatched(conn: Any, campaign: str | None, step: str | None) -> None:
    pairs = [(r["campaign"], r["step"]) for r in queries.rows(conn, "reservation_labels")]
    wanted = (None if campaign is None else normalize_label(campaign), None if step is None else normalize_label(step))
    if any(wanted[0] in (None, normalize_label(c)) and wanted[1] in (None, normalize_label(s)) for c, s in pairs):
        return
    known = ", ".join(f"{c} step {s}" for c, s in pairs[:20]) or "none"
    raise RefusedError(f"no reservation matches {_filter_text(campaign, step)}; reservations exist for: {known}")


def _filter_text(campaign: str | None, step: str | None) -> str:
    return " ".join(part for part in (campaign and f"--campaign {campaign!r}", step and f"--step {step!r}") if part)


# --------------------------------------------------------------------------- releasing


@dataclass(frozen=True)
class ReleasePlan:
    campaign: str
    step: str
    recipient: str | None
    candidate: str | None
    reservations: tuple[dict, ...]


def release_plan(conn_or_store: Any, campaign: str, step: str, recipient: str | None = None,
                 candidate: str | None = None) -> ReleasePlan:
    """The unconfirmed reservations a person asks to release; refused when there is none or one has a send."""
    conn, _kind = connection_kind(conn_or_store)
    address = normalize_address(recipient) if recipient is not None else None
    if not (campaign.strip() and step.strip()) or (address is None and not candidate):
        raise InputError("a release needs --campaign, --step and --recipient (or --candidate)")
    found = []
    if table_exists(conn):
        install_sql(conn)
        params = {**labels.label_keys(campaign, step), "recipient": address or "", "candidate": candidate or ""}
        found = queries.rows(conn, "reservation_of_person", params)
    who = address or f"candidate {candidate}"
    if not found:
        raise RefusedError(f"no reservation for {who} in {campaign} step {step}: "
                           "`mailmortem sentlog unconfirmed` lists the unconfirmed ones")
    recorded = [r for r in found if r["recorded"]]
    if recorded:
        raise RefusedError(f"{who} has a recorded send for {campaign} step {step}: releasing it would let "
                           "them be emailed again; nothing changed")
    return ReleasePlan(campaign, step, address, candidate, tuple(found))


def release(conn_or_store: Any, plan: ReleasePlan, released_by: str, reason: str) -> int:
    """Release the plan's reservations in ONE transaction (archived first); returns how many were released.
    Each is named by its own campaign and step, as stored."""
    conn, kind = connection_kind(conn_or_store)
    with _transaction(conn, kind):
        return sum(_release_one(conn, r["campaign"], r["step"], r["reservation"], released_by, reason)
                   for r in plan.reservations)


def _release_one(conn: Any, campaign: str, step: str, reservation: str, released_by: str, reason: str) -> int:
    params = {"campaign": campaign, "step": step, "reservation": reservation, "released_by": released_by,
              "reason": reason}
    queries.run(conn, "reservation_archive", params)
    return 1 if queries.rows(conn, "reservation_delete", params) else 0


class _transaction:
    """One transaction on either engine (psycopg: outermost, so it commits; DuckDB: begin/commit)."""

    def __init__(self, conn: Any, kind: str):
        self.conn, self.kind, self._tx = conn, kind, None

    def __enter__(self):
        if self.kind == "postgres":
            if not self.conn.autocommit:
                self.conn.rollback()  # end the implicit read transaction: ours must be the outermost
            self._tx = self.conn.transaction()
            return self._tx.__enter__()
        self.conn.begin()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.kind == "postgres":
            return self._tx.__exit__(exc_type, exc, tb)
        self.conn.rollback() if exc_type else self.conn.commit()
        return False


# --------------------------------------------------------------------------- after a provider backfill


def reconcile_after_backfill(conn: Any, covered_until: dt.datetime | None,
                             clock_margin_s: float = CLOCK_MARGIN_S) -> dict:
    """Inside the backfill's transaction: confirm the unconfirmed reservations the sent-log now shows sent,
    and release those it shows unsent — only when the export reaches `clock_margin_s` past the reservation
    (`covered_until`: the export's newest send) and holds no send to that person since `clock_margin_s`
    before it. Returns {"confirmed": n, "released": [rows]}."""
    if not table_exists(conn):
        return {"confirmed": 0, "released": []}
    keys = queries.rows(conn, "reservation_confirm_from_sent_log")
    confirmed = sum(1 for key in keys if key["key_kind"] == ADDRESS)  # one per reservation
    released: list[dict] = []
    if covered_until is not None:
        margin = dt.timedelta(seconds=clock_margin_s)
        params = {"covered_before": covered_until - margin, "margin": margin}
        for row in queries.rows(conn, "reservation_unsent_after_backfill", params):
            if _release_one(conn, row["campaign"], row["step"], row["reservation"], "backfill-sentlog",
                            "the provider export shows no send to this person"):
                released.append(row)
    return {"confirmed": confirmed, "released": released}
