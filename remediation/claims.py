"""requeue-stale: return stale claims to the queue — or mark them sent when the sent-log proves it.

Three steps, each testable alone:

* `scan_stale` reads in-progress rows whose claim is older than the cutoff on the
  DATABASE SERVER's clock (`now()`), each with whether the durable sent-log
  already holds its recipient;
* `requeue_plan` (pure) turns that snapshot into ordered statements + params + a
  summary: sent-log'd leads → sent, the others → queued (claim cleared);
* `apply_plan` (remediation.requeue_apply) runs exactly those statements in ONE
  transaction, first waiting for the sent-log's writers (a backfill in flight) to
  commit, each UPDATE re-checking its guard. A second apply finds nothing.

The sent-log scope of the filters is remediation.requeue_scope; the lease check
against the logs' worst batch is remediation.lease (both re-exported here).
"""

from __future__ import annotations

import dataclasses
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import queries
from forensics.addresses import install_pg
from forensics.errors import ConfigError
from forensics.textsafe import terminal_safe
from remediation import audit, labels, reservations
from remediation.errors import RefusedError
from remediation.identifiers import TableName, parse_mapping, parse_table
from remediation.lease import LEASE_MARGIN, lease_warnings, worst_batch, worst_batch_from_logs  # noqa: F401
from remediation.requeue_apply import ApplyResult, apply_plan, plan_statements  # noqa: F401
from remediation.requeue_scope import (LABEL_COLUMNS, LeadScope, Scope, db_error, lead_scope,  # noqa: F401
                                       require_postgres, resolve_scope, sent_log_pairs)

LOGICAL_COLUMNS = ("lead_id", "email", "status", "claimed_by", "claimed_at")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|m|min|mins|h|hr|hrs|d)?", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "m": 60, "min": 60, "mins": 60,
                 "h": 3600, "hr": 3600, "hrs": 3600, "d": 86400, None: 1}
TIMESTAMP_OID = 1114  # PostgreSQL's `timestamp without time zone`
# How long an apply waits for the sent-log's writers (a backfill in flight) to commit before it gives up.
SENT_LOG_WAIT = "10min"


def parse_duration(text: object) -> float:
    """`45m`, `2h`, `900s`, `1.5h`, `250ms`, `1d` or plain seconds → seconds (> 0)."""
    match = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if not match:
        raise ConfigError(f"bad duration {terminal_safe(str(text)[:40])!r}: expected e.g. 45m, 2h, 900s")
    seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "").lower() or None]
    if not 0 < seconds < 10 * 365 * 86400:
        raise ConfigError(f"bad duration {text.strip()!r}: must be more than 0 and under 10 years")
    return seconds


@dataclass(frozen=True)
class LeadsTable:
    """Where the claims live: table, real column names and status values (runbook defaults)."""

    table: TableName = TableName(None, "leads")
    columns: tuple[tuple[str, str], ...] = tuple((c, c) for c in LOGICAL_COLUMNS)
    queued: str = "queued"
    in_progress: str = "in-progress"
    sent: str = "sent"
    label_columns: tuple[tuple[str, str], ...] = ()  # campaign/step mapped with --col (remediation.requeue_scope)

    def col(self, logical: str) -> str:
        return dict(self.columns)[logical]

    def idents(self) -> dict:
        """Values for the `{ident:...}` placeholders of queries/claims.sql and claimloop.sql."""
        return {"table": self.table.ident(), **dict(self.columns)}


def leads_table(table: str = "leads", cols: tuple[str, ...] = (), queued: str | None = None,
                in_progress: str | None = None, sent: str | None = None) -> LeadsTable:
    """Build a LeadsTable from command-line text; hostile names are refused here."""
    mapping = {c: c for c in LOGICAL_COLUMNS}
    label_columns = {}
    for text in cols:
        logical, actual = parse_mapping(text, LOGICAL_COLUMNS + LABEL_COLUMNS)
        (label_columns if logical in LABEL_COLUMNS else mapping)[logical] = actual
    statuses = {"queued": queued, "in_progress": in_progress, "sent": sent}
    for name, value in statuses.items():
        if value is not None and not value.strip():
            raise ConfigError(f"--status-{name.replace('_', '-')} must not be empty")
    chosen = {k: v for k, v in statuses.items() if v is not None}
    result = LeadsTable(parse_table(table), tuple(mapping.items()), **chosen,
                        label_columns=tuple(label_columns.items()))
    if len({result.queued, result.in_progress, result.sent}) < 3:
        raise ConfigError("the queued, in-progress and sent statuses must be three different values")
    return result


class StaleLead(NamedTuple):
    """One stale claim as scanned (a tuple: a scan makes one per stale lead, up to millions)."""

    key: Any  # the key as the database returned it (int, str, UUID…)
    key_text: str
    email: str | None
    claimed_by: str | None
    claimed_at: Any
    claimed_epoch: str  # exact, session-independent guard on claimed_at
    age_s: float
    already_sent: bool
    reserved: bool = False  # its person holds an unconfirmed send reservation: held, never re-queued

    @property
    def action(self) -> str:
        return "sent" if self.already_sent else "held" if self.reserved else "queued"


def scan(conn, table: LeadsTable, older_than_s: float, campaign: str | None = None, step: str | None = None,
         *, claimed_at_zone: str | None = None, no_sends_yet: bool = False,
         all_campaigns: bool = False) -> tuple[list[StaleLead], Scope, LeadScope]:
    """Read the stale claims (of the --campaign/--step leads: lead_scope), the sent-log scope they were checked
    against, and the lead scope (read-only, rolled back)."""
    with _reading(conn, table):
        if not queries.run(conn, "requeue_sent_log_exists").fetchone()[0]:
            raise RefusedError("no sent_log table in this database: without it a stale lead that was already "
                               "emailed would be re-queued; run `mailmortem backfill-sentlog` first")
        _check_claim_time(conn, table, claimed_at_zone)
        scope = resolve_scope(sent_log_pairs(conn), campaign, step, no_sends_yet)
        leads = lead_scope(conn, table, campaign, step, all_campaigns)
        install_pg(conn)
        params = {"status_in_progress": table.in_progress, "older_than_s": older_than_s,
                  "claimed_at_zone": claimed_at_zone, **scope.params(), **leads.params()}
        rows = queries.run(conn, "requeue_scan_stale", params, **table.idents(),
                           **leads.idents(table.col("lead_id"))).fetchall()  # one call, not per row
        stale = [StaleLead(*row) for row in rows]
        reserved = _reserved(conn, table, stale, campaign, step)
    return [lead._replace(reserved=True) if lead.key_text in reserved else lead for lead in stale], scope, leads


def scan_stale(conn, table: LeadsTable, older_than_s: float, campaign: str | None = None,
               step: str | None = None, **options) -> list[StaleLead]:
    """The stale claims of `scan` alone, for a plan built by hand (its apply reads the sent-log scope again)."""
    return scan(conn, table, older_than_s, campaign, step, **options)[0]


def _check_claim_time(conn, table: LeadsTable, zone: str | None) -> None:
    """A claim time without a zone is read in --claimed-at-zone, never in the session's TimeZone."""
    import psycopg

    column = f"{table.table}.{table.col('claimed_at')}"
    no_zone = queries.run(conn, "requeue_claimed_at_type", **table.idents()).description[0].type_code == TIMESTAMP_OID
    if no_zone and zone is None:
        raise RefusedError(f"{column} is a timestamp without time zone: its age would be read in this session's "
                           "TimeZone, so a worker in another zone can make fresh claims look hours old and have "
                           "them re-queued; pass --claimed-at-zone ZONE, the zone the workers write it in "
                           "(e.g. UTC)")
    if zone is not None and not no_zone:
        raise ConfigError(f"--claimed-at-zone is only for a timestamp without time zone; {column} is not one "
                          "(it already holds instants): drop --claimed-at-zone")
    if zone is not None:
        try:
            queries.run(conn, "requeue_check_zone", {"claimed_at_zone": zone})
        except psycopg.Error:
            raise ConfigError(f"--claimed-at-zone {terminal_safe(zone[:60])!r} is not a time zone this server "
                              "knows (e.g. UTC, Europe/Berlin)") from None


def _reserved(conn, table: LeadsTable, stale: list[StaleLead], campaign: str | None, step: str | None) -> set:
    """Key texts of in-progress leads (the stale among them) whose person holds an unconfirmed send reservation."""
    if not stale or not reservations.table_exists(conn):
        return set()
    params = {"status_in_progress": table.in_progress, **labels.label_keys(campaign, step)}
    return {row[0] for row in queries.run(conn, "requeue_reserved_unconfirmed", params, **table.idents()).fetchall()}


def count_unconfirmed(conn, campaign: str | None = None, step: str | None = None) -> int:
    """Unconfirmed send reservations (see `mailmortem sentlog unconfirmed`), read-only."""
    try:
        return reservations.count_unconfirmed(conn, campaign, step)
    finally:
        conn.rollback()


def count_without_claim_time(conn, table: LeadsTable) -> int:
    """In-progress rows with a NULL claim time: no age, so requeue-stale never touches them."""
    with _reading(conn, table):
        params = {"status_in_progress": table.in_progress}
        return int(queries.run(conn, "requeue_count_no_claim_time", params, **table.idents()).fetchone()[0])


@contextmanager
def _reading(conn, table: LeadsTable):
    """Read-only access: psycopg errors become one-line DatabaseErrors; the transaction is rolled back."""
    import psycopg

    require_postgres(conn)
    try:
        queries.run(conn, "requeue_read_settings")
        yield
    except psycopg.Error as exc:
        raise db_error(f"cannot read stale claims from {table.table}", exc) from None
    finally:
        conn.rollback()


@dataclass(frozen=True)
class Step:
    """One statement of a plan: a named query from queries/claims.sql and its parameters."""

    query: str
    params: dict
    rows: int | None = None  # planned rows it covers (None for a setting)
    changes_rows: bool = False
    copy_rows: tuple | None = None  # a COPY … FROM STDIN step: the rows it sends


@dataclass(frozen=True)
class Plan:
    run_id: str
    table: LeadsTable
    older_than_s: float
    leads: tuple[StaleLead, ...]
    steps: tuple[Step, ...]
    without_claim_time: int = 0  # in-progress rows with no claimed_at: reported, never touched
    held: tuple[StaleLead, ...] = ()  # stale, but the person holds an unconfirmed reservation: never touched
    unconfirmed: int = 0  # unconfirmed reservations in the scope (`mailmortem sentlog unconfirmed` lists them)
    scope: Scope | None = None  # the sent-log rows that counted as proof of a send at the scan (None: not scanned)
    filters: tuple[str | None, str | None] = (None, None)  # --campaign and --step: the apply reads their scope again
    lead_notes: tuple[str, ...] = ()  # how --campaign/--step limit the leads where they do not (requeue_scope)

    @property
    def counts(self) -> dict[str, int]:
        to_sent = sum(1 for lead in self.leads if lead.already_sent)
        return {"stale": len(self.leads), "to_sent": to_sent, "to_queued": len(self.leads) - to_sent}

    def rows(self, limit: int | None = None) -> list[dict]:
        """The planned changes as flat rows (for the sample and --format csv/jsonl)."""
        return [{"lead_id": lead.key_text, "email": lead.email, "claimed_by": lead.claimed_by,
                 "claimed_at": lead.claimed_at, "age_s": round(lead.age_s, 1),
                 "in_sent_log": lead.already_sent, "new_status": self.status_for(lead)}
                for lead in self.leads[:limit]]

    def status_for(self, lead: StaleLead) -> str:
        return self.table.sent if lead.already_sent else self.table.queued

    def held_rows(self) -> list[dict]:
        """The stale leads left alone because a send may be out for their person."""
        return [{"lead_id": lead.key_text, "email": lead.email, "claimed_by": lead.claimed_by,
                 "claimed_at": lead.claimed_at, "age_s": round(lead.age_s, 1)} for lead in self.held]


def requeue_plan(table: LeadsTable, stale: list[StaleLead], older_than_s: float, run_id: str,
                 campaign: str | None = None, step: str | None = None, os_user: str = "unknown",
                 without_claim_time: int = 0, unconfirmed: int = 0, scope: Scope | None = None,
                 claimed_at_zone: str | None = None) -> Plan:
    """Pure: the ordered statements that mark sent-log'd leads sent, then re-queue the rest.

    A lead whose person holds an unconfirmed reservation counts as sent, but nothing proves it
    was: it is held (listed, untouched) until a backfill or a person settles the reservation.
    """
    held = tuple(lead for lead in stale if lead.reserved and not lead.already_sent)  # action "held"
    stale = [lead for lead in stale if lead.already_sent or not lead.reserved]
    common = {
        "run_id": run_id, "table_name": str(table.table), "key_column": table.col("lead_id"),
        "col_status": table.col("status"), "col_claimed_by": table.col("claimed_by"),
        "col_claimed_at": table.col("claimed_at"), "status_in_progress": table.in_progress,
        "older_than_s": older_than_s, "claimed_at_zone": claimed_at_zone, "os_user": os_user,
    }
    if not stale:
        return Plan(run_id, table, older_than_s, (), (), without_claim_time, held, unconfirmed, scope,
                    (campaign, step))
    wait = {"sent_log_wait": SENT_LOG_WAIT}  # the lock's step carries it too, for a refusal to name
    steps = [Step("requeue_sent_log_wait", wait), Step("requeue_lock_sent_log", wait),
             Step("requeue_apply_settings", {}), Step("requeue_planned_create", {}),
             Step("requeue_planned_copy", {}, len(stale), copy_rows=_planned_rows(stale)),
             Step("requeue_planned_analyze", {}), Step("requeue_lock_planned", {}, len(stale))]
    to_sent = sum(1 for lead in stale if lead.already_sent)
    for query, new_status, rows in (("requeue_to_sent", table.sent, to_sent),
                                    ("requeue_to_queued", table.queued, len(stale) - to_sent)):
        if rows:
            steps.append(Step(query, {**common, "new_status": new_status}, rows, changes_rows=True))
    return Plan(run_id, table, older_than_s, tuple(stale), tuple(steps), without_claim_time, held, unconfirmed,
                scope, (campaign, step))


def _planned_rows(leads: list[StaleLead]) -> tuple:
    """mm_requeue_planned's rows: key, the claim as planned (claimer, exact claim time, address), proved sent."""
    return tuple((lead.key_text, lead.claimed_by, lead.claimed_epoch, lead.email, lead.already_sent)
                 for lead in leads)


def requeue_stale(conn, table: LeadsTable, older_than_s: float, apply: bool = False,
                  campaign: str | None = None, step: str | None = None,
                  max_changes: int | None = None, *, claimed_at_zone: str | None = None,
                  no_sends_yet: bool = False, all_campaigns: bool = False,
                  on_commit=None) -> tuple[Plan, ApplyResult | None]:
    """The whole command as a library call: scan, plan, and (with apply) carry out the plan.

    `max_changes` refuses to apply a plan larger than the one a person reviewed. `claimed_at_zone`
    is the zone a claim time without zone is written in; `no_sends_yet` lets a campaign/step filter
    that matches no sent-log row through (see resolve_scope); `all_campaigns` lets --campaign through on a leads
    table without a campaign column (lead_scope); `on_commit` goes to apply_plan.
    """
    stale, scope, leads = scan(conn, table, older_than_s, campaign, step, claimed_at_zone=claimed_at_zone,
                               no_sends_yet=no_sends_yet, all_campaigns=all_campaigns)
    plan = requeue_plan(table, stale, older_than_s, audit.new_run_id(), campaign, step, audit.os_user(),
                        without_claim_time=count_without_claim_time(conn, table),
                        unconfirmed=count_unconfirmed(conn, campaign, step), scope=scope,
                        claimed_at_zone=claimed_at_zone)
    plan = dataclasses.replace(plan, lead_notes=leads.notes)
    if apply and max_changes is not None and len(plan.leads) > max_changes:
        raise RefusedError(f"the plan would change {len(plan.leads)} rows, more than --max-changes {max_changes}: "
                           "nothing changed; review the plan again")
    return plan, (apply_plan(conn, plan, on_commit) if apply else None)
