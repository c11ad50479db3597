"""requeue-stale: return stale claims to the queue — or mark them sent when the sent-log proves it.

Three steps, each testable alone:

* `scan_stale` reads in-progress rows whose claim is older than the cutoff on the
  DATABASE SERVER's clock (`now()`), each with whether the durable sent-log
  already holds its recipient;
* `requeue_plan` (pure) turns that snapshot into ordered statements + params + a
  summary: sent-log'd leads → sent, the others → queued (claim cleared);
* `apply_plan` runs exactly those statements in ONE transaction. Planned rows a
  live transaction holds are skipped (`FOR UPDATE SKIP LOCKED`) and reported;
  every UPDATE re-checks its guard (still in progress, still older than the
  cutoff, same claimed_by and claimed_at as planned, and for re-queues still not
  in the sent-log), so a claim renewed in between keeps its row. Each change
  writes one audit row in the same statement. A second apply finds nothing.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import queries
from forensics.addresses import install_pg
from forensics.errors import ConfigError, DatabaseError, MailmortemError
from remediation.errors import RefusedError
from forensics.textsafe import terminal_safe
from remediation import audit, reservations
from remediation.identifiers import TableName, parse_mapping, parse_table

LOGICAL_COLUMNS = ("lead_id", "email", "status", "claimed_by", "claimed_at")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|m|min|mins|h|hr|hrs|d)?", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "m": 60, "min": 60, "mins": 60,
                 "h": 3600, "hr": 3600, "hrs": 3600, "d": 86400, None: 1}
LEASE_MARGIN = 1.5


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

    def col(self, logical: str) -> str:
        return dict(self.columns)[logical]

    def idents(self) -> dict:
        """Values for the `{ident:...}` placeholders of queries/claims.sql and claimloop.sql."""
        return {"table": self.table.ident(), **dict(self.columns)}


def leads_table(table: str = "leads", cols: tuple[str, ...] = (), queued: str | None = None,
                in_progress: str | None = None, sent: str | None = None) -> LeadsTable:
    """Build a LeadsTable from command-line text; hostile names are refused here."""
    mapping = {c: c for c in LOGICAL_COLUMNS}
    for text in cols:
        logical, actual = parse_mapping(text, LOGICAL_COLUMNS)
        mapping[logical] = actual
    statuses = {"queued": queued, "in_progress": in_progress, "sent": sent}
    for name, value in statuses.items():
        if value is not None and not value.strip():
            raise ConfigError(f"--status-{name.replace('_', '-')} must not be empty")
    chosen = {k: v for k, v in statuses.items() if v is not None}
    result = LeadsTable(parse_table(table), tuple(mapping.items()), **chosen)
    if len({result.queued, result.in_progress, result.sent}) < 3:
        raise ConfigError("the queued, in-progress and sent statuses must be three different values")
    return result


@dataclass(frozen=True)
class StaleLead:
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


def _db_error(doing: str, exc: Exception) -> DatabaseError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseError(f"{doing}: {text}")


def _require_postgres(conn) -> None:
    if not type(conn).__module__.startswith("psycopg"):
        raise ConfigError("requeue-stale and audit need PostgreSQL (row locks, SKIP LOCKED): "
                          "pass --db postgresql://… (DuckDB files are not supported)")


def scan_stale(conn, table: LeadsTable, older_than_s: float, campaign: str | None = None,
               step: str | None = None) -> list[StaleLead]:
    """Read the stale claims (read-only; the transaction is rolled back)."""
    params = {"status_in_progress": table.in_progress, "older_than_s": older_than_s,
              "campaign": campaign, "step": step}
    with _reading(conn, table):
        if not queries.run(conn, "requeue_sent_log_exists").fetchone()[0]:
            raise RefusedError("no sent_log table in this database: without it a stale lead that was already "
                               "emailed would be re-queued; run `mailmortem backfill-sentlog` first")
        install_pg(conn)
        stale = [StaleLead(*row) for row in queries.run(conn, "requeue_scan_stale", params, **table.idents())]
        reserved = _reserved(conn, table, stale, campaign, step)
    return [replace(lead, reserved=True) if lead.key_text in reserved else lead for lead in stale]


def _reserved(conn, table: LeadsTable, stale: list[StaleLead], campaign: str | None, step: str | None) -> set:
    """Key texts of the stale leads whose person holds an unconfirmed send reservation."""
    if not stale or not reservations.table_exists(conn):
        return set()
    params = {"keys": [lead.key for lead in stale], "campaign": campaign, "step": step}
    return _column(queries.run(conn, "requeue_reserved_unconfirmed", params, **table.idents()))


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

    _require_postgres(conn)
    try:
        yield
    except psycopg.Error as exc:
        raise _db_error(f"cannot read stale claims from {table.table}", exc) from None
    finally:
        conn.rollback()


@dataclass(frozen=True)
class Step:
    """One statement of a plan: a named query from queries/claims.sql and its parameters."""

    query: str
    params: dict
    rows: int | None = None  # planned rows it covers (None for a setting)
    changes_rows: bool = False


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
                 without_claim_time: int = 0, unconfirmed: int = 0) -> Plan:
    """Pure: the ordered statements that mark sent-log'd leads sent, then re-queue the rest.

    A lead whose person holds an unconfirmed reservation counts as sent, but nothing proves it
    was: it is held (listed, untouched) until a backfill or a person settles the reservation.
    """
    held = tuple(lead for lead in stale if lead.action == "held")
    stale = [lead for lead in stale if lead.action != "held"]
    common = {
        "run_id": run_id, "table_name": str(table.table), "key_column": table.col("lead_id"),
        "col_status": table.col("status"), "col_claimed_by": table.col("claimed_by"),
        "col_claimed_at": table.col("claimed_at"), "status_in_progress": table.in_progress,
        "older_than_s": older_than_s, "campaign": campaign, "step": step, "os_user": os_user,
    }
    if not stale:
        return Plan(run_id, table, older_than_s, (), (), without_claim_time, held, unconfirmed)
    steps = [Step("requeue_lock_timeout", {}),
             Step("requeue_lock_planned", {"keys": [lead.key for lead in stale]}, len(stale))]
    for query, new_status, chosen in (("requeue_to_sent", table.sent, [s for s in stale if s.already_sent]),
                                      ("requeue_to_queued", table.queued, [s for s in stale if not s.already_sent])):
        if chosen:
            steps.append(Step(query, {**common, **_guard_params(chosen), "new_status": new_status},
                              len(chosen), changes_rows=True))
    return Plan(run_id, table, older_than_s, tuple(stale), tuple(steps), without_claim_time, held, unconfirmed)


def _guard_params(leads: list[StaleLead]) -> dict:
    return {"keys": [lead.key for lead in leads], "key_texts": [lead.key_text for lead in leads],
            "claimed_bys": [lead.claimed_by for lead in leads],
            "claimed_epochs": [lead.claimed_epoch for lead in leads]}


@dataclass
class ApplyResult:
    run_id: str
    to_sent: list[str] = field(default_factory=list)
    to_queued: list[str] = field(default_factory=list)
    skipped_locked: list[str] = field(default_factory=list)  # held by a live transaction
    left_changed: list[str] = field(default_factory=list)  # guard failed: renewed, finished, now in sent-log

    @property
    def counts(self) -> dict[str, int]:
        return {"to_sent": len(self.to_sent), "to_queued": len(self.to_queued),
                "skipped_locked": len(self.skipped_locked), "left_changed": len(self.left_changed)}


def apply_plan(conn, plan: Plan) -> ApplyResult:
    """Run exactly the plan's statements, in order, in ONE transaction (all or nothing)."""
    import psycopg

    _require_postgres(conn)
    result, locked = ApplyResult(plan.run_id), set()
    if not plan.leads:
        return result
    idents = plan.table.idents()
    conn.rollback()  # the transaction below must be the outermost one, so it commits
    try:
        with conn.transaction():
            audit.ensure_table(conn)
            install_pg(conn)
            for step in plan.steps:
                keys = _column(queries.run(conn, step.query, step.params, **idents))
                _collect(step, keys, result, locked)
    except psycopg.Error as exc:
        raise _db_error(f"requeue of {plan.table.table} rolled back, nothing changed", exc) from None
    done = set(result.to_sent) | set(result.to_queued)
    result.skipped_locked = [lead.key_text for lead in plan.leads if lead.key_text not in locked]
    result.left_changed = [lead.key_text for lead in plan.leads if lead.key_text in locked - done]
    return result


def _collect(step: Step, keys: set, result: ApplyResult, locked: set) -> None:
    if step.query == "requeue_lock_planned":
        locked.update(keys)
    elif step.changes_rows:
        (result.to_sent if step.query == "requeue_to_sent" else result.to_queued).extend(sorted(keys))


def plan_statements(conn, plan: Plan) -> list[dict]:
    """The plan's statements as the server will receive them (placeholders as %(name)s)."""
    idents = plan.table.idents()
    return [{"query": step.query, "description": queries.get(step.query).description, "rows": step.rows,
             "sql": queries.sql(conn, step.query, **idents)} for step in plan.steps]


def _column(cursor) -> set:
    return {row[0] for row in cursor.fetchall()}


def requeue_stale(conn, table: LeadsTable, older_than_s: float, apply: bool = False,
                  campaign: str | None = None, step: str | None = None,
                  max_changes: int | None = None) -> tuple[Plan, ApplyResult | None]:
    """The whole command as a library call: scan, plan, and (with apply) carry out the plan.

    `max_changes` refuses to apply a plan larger than the one a person reviewed.
    """
    stale = scan_stale(conn, table, older_than_s, campaign, step)
    plan = requeue_plan(table, stale, older_than_s, audit.new_run_id(), campaign, step, audit.os_user(),
                        without_claim_time=count_without_claim_time(conn, table),
                        unconfirmed=count_unconfirmed(conn, campaign, step))
    if apply and max_changes is not None and len(plan.leads) > max_changes:
        raise RefusedError(f"the plan would change {len(plan.leads)} rows, more than --max-changes {max_changes}: "
                           "nothing changed; review the plan again")
    return plan, (apply_plan(conn, plan) if apply else None)


# --------------------------------------------------------------------------- lease vs. worst batch


def worst_batch(con) -> dict | None:
    """Longest claim→release span in a DuckDB connection holding an `events` table."""
    return queries.one(con, "requeue_worst_batch")


def worst_batch_from_logs(paths: list[str]) -> dict | None:
    """Ingest the logs (forensics.ingest.case) and find the worst batch; RefusedError if ingest is unavailable."""
    import importlib.util

    if importlib.util.find_spec("forensics.ingest.case") is None:
        raise RefusedError("log ingest (forensics.ingest.case) is not available in this build")
    from forensics.ingest.case import load_case

    case = load_case(list(paths))
    try:
        return worst_batch(case.con)
    except MailmortemError:
        raise
    except Exception as exc:  # an events table without claims/releases, or an older layout
        raise RefusedError(f"cannot measure batch durations from these logs: {_db_error('query', exc)}") from None


def lease_warnings(older_than_s: float, worst: dict | None) -> list[str]:
    """Warn when --older-than, or the lease seen in the logs, is under 1.5× the worst batch."""
    if not worst or not worst.get("batch_s"):
        return []
    need = LEASE_MARGIN * float(worst["batch_s"])
    warnings = []
    if older_than_s < need:
        warnings.append(f"--older-than {older_than_s:g}s is under {LEASE_MARGIN}× the worst batch "
                        f"({float(worst['batch_s']):.0f}s): live batches may be re-queued; use at least {need:.0f}s")
    lease = worst.get("max_lease_s")
    if lease and float(lease) < need:
        warnings.append(f"the lease in the logs ({float(lease):g}s) is under {LEASE_MARGIN}× the worst batch: "
                        f"raise it to at least {need:.0f}s and renew it with a heartbeat")
    return warnings
