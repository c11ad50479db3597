"""What `sentlog check` answers: the send or reservation found for a person, or "not sent" — never for a
campaign or step that names nothing in the sent-log (remediation.labels), unless the caller says it is new.

Takes a `remediation.store.Store` or a raw psycopg / DuckDB connection; a read: it creates nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import queries
from forensics.addresses import normalize_address
from forensics.errors import InputError
from remediation import labels, reservations
from remediation.sentlog import last_send, table_present
from remediation.store import connection_kind


def checked_address(recipient: str) -> str:
    """The normal form of an address a person typed, or InputError: an empty or @-less value is no address
    and must not be answered "not sent"."""
    address = normalize_address(recipient) or ""
    local, at, domain = address.rpartition("@")
    if not at or not local or not domain:
        raise InputError(f"{recipient!r} is not an email address: pass --recipient user@domain")
    return address


def check(conn_or_store: Any, campaign: Any, step: Any, recipient: str | None = None,
          candidate: str | None = None, no_sends_yet: bool = False) -> dict | None:
    """What `sentlog check` answers: `last_send` for the recipient and, for a candidate, for every address
    the sent-log or the reservations hold for them (and sent_log rows carrying the candidate id).

    A missing sent_log is an error, never "not sent": this read creates nothing. Nor is a campaign or
    step that names nothing in the sent-log (RefusedError naming what it holds), unless `no_sends_yet`
    (a new campaign or step): a send or reservation found is answered first."""
    return check_answer(conn_or_store, campaign, step, recipient, candidate, no_sends_yet).hit


@dataclass(frozen=True)
class CheckAnswer:
    hit: dict | None  # the send or reservation found (None: not sent)
    unmatched: str | None = None  # the filter that names nothing in the sent-log, let through by no_sends_yet


def check_answer(conn_or_store: Any, campaign: Any, step: Any, recipient: str | None = None,
                 candidate: str | None = None, no_sends_yet: bool = False) -> CheckAnswer:
    """`check`, also saying which filter named nothing when `no_sends_yet` let it through."""
    addresses = [checked_address(recipient)] if recipient is not None else []
    candidate = (candidate or "").strip() or None
    if recipient is None and candidate is None:
        raise InputError("pass --recipient or --candidate")
    if not table_present(conn_or_store):
        raise InputError("no sent_log table in this database: nothing says who was emailed; "
                         "run `mailmortem backfill-sentlog --provider-export … --db …` first")
    if candidate:
        addresses += [a for a in candidate_addresses(conn_or_store, candidate) if a not in addresses]
    conn, _kind = connection_kind(conn_or_store)
    scope = labels.resolve_scope(labels.sent_log_pairs(conn), *labels.as_filter(campaign, step), labels.CHECK)
    hits = [hit for hit in (last_send(conn, campaign, step, a, scope) for a in addresses) if hit]
    recorded_hits = [hit for hit in hits if not hit.get("unconfirmed")]
    if recorded_hits:
        newest = max(recorded_hits, key=lambda hit: (hit["sent_at"] is not None, hit["sent_at"] or dt.datetime.min))
        return CheckAnswer(newest)
    if hits:
        return CheckAnswer(hits[0])
    if not no_sends_yet:
        labels.refuse_unmatched(scope, labels.CHECK)
    return CheckAnswer(None, scope.no_sends_yet)


def candidate_addresses(conn_or_store: Any, candidate: str) -> list[str]:
    """Every address recorded (sent_log.candidate) or reserved for the candidate, sorted."""
    conn, _kind = connection_kind(conn_or_store)
    found = {row["recipient"] for row in queries.rows(conn, "sent_log_candidate_addresses", {"candidate": candidate})}
    if reservations.table_exists(conn):
        found |= {row["recipient"] for row in
                  queries.rows(conn, "reservation_candidate_addresses", {"candidate": candidate})}
    return sorted(found)


NO_STEP = "step not recorded: counts for every step"
NO_TIME = ("time not recorded: the provider export's send time fills it (re-run backfill-sentlog with "
           "--map sent_at=COLUMN, or the export whose events carry it)")


def describe(hit: dict | None, who: str, campaign: str, step: str | None, unmatched: str | None = None) -> dict:
    """What `sentlog check` says, as one line (`line`) and as fields: the same words in every format.

    A row without a step is said to count for every step (never "got step 2"); one without a time says where
    the time should come from. `who` is the person as named (forensics.textsafe applied by the caller)."""
    asked = campaign + (f" step {step}" if step else "")
    if hit is None:
        new = f" (--no-sends-yet: the sent-log holds no such {_named(unmatched)})" if unmatched else ""
        return {"sent": False, "line": f"not sent: {who} has no record for {asked}{new}"}
    if hit.get("unconfirmed"):
        return {"sent": True, "unconfirmed": True, "campaign": hit["campaign"], "step": hit["step"],
                "worker": hit["worker"], "reserved_at": hit["reserved_at"],
                "line": f"already sent (unconfirmed): {who} was reserved for {asked} by {hit['worker'] or '?'} at "
                        f"{hit['reserved_at'].isoformat()} and no send is recorded; it counts as sent"}
    step_known = labels_normal(hit["step"]) != ""
    what = f"got {hit['campaign']} step {hit['step']}" if step_known else f"sent {hit['campaign']} ({NO_STEP})"
    when = hit["sent_at"].isoformat() if hit.get("sent_at") else NO_TIME
    return {"sent": True, "unconfirmed": False, "campaign": hit["campaign"], "step": hit["step"] if step_known else None,
            "step_recorded": step_known, "counts_for_every_step": not step_known, "msg_id": hit["msg_id"],
            "sent_at": hit.get("sent_at"), "time_recorded": hit.get("sent_at") is not None,
            "line": f"already sent: {who} {what} (msg {hit['msg_id']}, {when})"}


def _named(flag: str | None) -> str:
    return "step" if (flag or "").startswith("--step") else "campaign"


def labels_normal(value) -> str:
    from forensics.addresses import normalize_label

    return normalize_label("" if value is None else str(value))
