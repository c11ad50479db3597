"""requeue-stale's apply: run a plan's statements in ONE transaction and sort out what happened.

It first locks the sent-log against writers (SHARE: it waits for a backfill in flight to commit,
and no send is recorded until it commits), then reads the sent-log scope afresh, so the check
below sees every send committed before the requeue writes, in a (campaign, step) the scan had
not seen too. The plan's leads go to the server once, by COPY into a temporary table of this
transaction (mm_requeue_planned); every later statement joins it, so no statement carries a list
of keys. Planned rows a live transaction holds are skipped (`FOR UPDATE SKIP LOCKED`) and
reported; every UPDATE re-checks its guard (still in progress, still older than the cutoff, same
claimed_by and claimed_at as planned, and for re-queues still not in the sent-log), so a claim
renewed in between keeps its row, and a lead sent since the plan is left alone and reported.
Each change writes one audit row in the same statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import queries
from forensics.addresses import install_pg
from remediation import audit
from remediation.errors import RefusedError
from remediation.requeue_scope import db_error, require_postgres, resolve_scope, sent_log_pairs

if TYPE_CHECKING:
    from remediation.claims import Plan, Step


@dataclass
class ApplyResult:
    run_id: str
    to_sent: list[str] = field(default_factory=list)
    to_queued: list[str] = field(default_factory=list)
    skipped_locked: list[str] = field(default_factory=list)  # held by a live transaction
    left_changed: list[str] = field(default_factory=list)  # guard failed: renewed, finished
    sent_since_plan: list[str] = field(default_factory=list)  # planned to re-queue, but the sent-log now holds it

    @property
    def counts(self) -> dict[str, int]:
        return {"to_sent": len(self.to_sent), "to_queued": len(self.to_queued),
                "skipped_locked": len(self.skipped_locked), "left_changed": len(self.left_changed),
                "sent_since_plan": len(self.sent_since_plan)}


# The step after which the transaction holds the sent-log lock and waits short on locks again: the audit
# table, the address function and the sent-log scope are set up from there on, never before the lock.
SENT_LOG_HELD = "requeue_apply_settings"


def apply_plan(conn, plan: Plan, on_commit=None) -> ApplyResult:
    """Run exactly the plan's statements, in order, in ONE transaction (all or nothing).

    `on_commit(result)` is called as soon as the transaction has committed, with the rows changed
    known and before the per-lead bookkeeping, so a caller can say the run id at once.
    """
    import psycopg

    require_postgres(conn)
    result, locked = ApplyResult(plan.run_id), set()
    if not plan.leads:
        return result
    idents = plan.table.idents()
    conn.rollback()  # the transaction below must be the outermost one, so it commits
    try:
        with conn.transaction():
            scope = {}
            for step in plan.steps:
                _run_step(conn, step, {**step.params, **scope}, idents, result, locked)
                if step.query == SENT_LOG_HELD:
                    audit.ensure_table(conn)
                    install_pg(conn)
                    scope = _scope_now(conn, plan)
    except psycopg.Error as exc:
        raise db_error(f"requeue of {plan.table.table} rolled back, nothing changed", exc) from None
    if on_commit is not None:
        on_commit(result)
    _sort_out_unchanged(plan, result, locked)
    return result


def _scope_now(conn, plan: Plan) -> dict:
    """The filters' sent-log rows as they are under the sent-log lock: a backfill committed since the scan may
    have added a (campaign, step) (the filters passed the scan, so one matching nothing now is a new campaign)."""
    return resolve_scope(sent_log_pairs(conn), *plan.filters, no_sends_yet=True).params()


def _run_step(conn, step: Step, params: dict, idents: dict, result: ApplyResult, locked: set) -> None:
    if step.copy_rows is not None:
        _copy_rows(conn, step, idents)
        return
    cursor = _execute(conn, step, params, idents)
    if step.query == "requeue_lock_planned":
        locked.update(_column(cursor))
    elif step.query == "requeue_to_queued":
        outcomes = cursor.fetchall()
        result.to_queued.extend(sorted(key for key, outcome in outcomes if outcome == "queued"))
        result.sent_since_plan.extend(key for key, outcome in outcomes if outcome == "sent-since-plan")
    elif step.changes_rows:
        result.to_sent.extend(sorted(_column(cursor)))


def _execute(conn, step: Step, params: dict, idents: dict):
    """Run one statement; the sent-log lock waited out its time is said as such (nothing changed)."""
    import psycopg

    try:
        return queries.run(conn, step.query, params, **idents)
    except psycopg.errors.LockNotAvailable:
        if step.query != "requeue_lock_sent_log":
            raise
    raise RefusedError(f"another transaction kept writing sent_log (a backfill-sentlog in flight?) for "
                       f"{params['sent_log_wait']}: the requeue waits for the sent-log's writers to commit so that "
                       "it never re-queues a send they record; nothing changed. Run it again once that has finished")


def _copy_rows(conn, step: Step, idents: dict) -> None:
    with conn.cursor() as cursor, queries.copy(cursor, step.query, **idents) as copy:
        for row in step.copy_rows:
            copy.write_row(row)


def _sort_out_unchanged(plan: Plan, result: ApplyResult, locked: set) -> None:
    """Planned leads not changed: skipped (a live transaction held them), sent since the plan (the sent-log holds
    them now) or left (their guard failed). Linear."""
    sent_since = locked.intersection(result.sent_since_plan)
    unchanged = locked.difference(result.to_sent, result.to_queued, sent_since)
    result.skipped_locked = [lead.key_text for lead in plan.leads if lead.key_text not in locked]
    result.sent_since_plan = [lead.key_text for lead in plan.leads if lead.key_text in sent_since]
    result.left_changed = [lead.key_text for lead in plan.leads if lead.key_text in unchanged]


def plan_statements(conn, plan: Plan) -> list[dict]:
    """The plan's statements as the server will receive them (placeholders as %(name)s)."""
    idents = plan.table.idents()
    return [{"query": step.query, "description": queries.get(step.query).description, "rows": step.rows,
             "sql": queries.sql(conn, step.query, **idents)} for step in plan.steps]


def _column(cursor) -> set:
    return {row[0] for row in cursor.fetchall()}
