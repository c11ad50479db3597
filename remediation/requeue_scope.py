"""requeue-stale's sent-log scope and the PostgreSQL-only rule shared by its scan and its apply.

The scope is the (campaign, step) pairs of the sent-log whose rows prove a send: the
`--campaign`/`--step` filters select them compared in normal form (remediation.labels, the rule
every decision that reads a campaign or step uses), and a filter that selects nothing is refused
unless `--no-sends-yet` says the campaign is new. The same filters limit the leads themselves
(`lead_scope`) through the leads table's campaign and step columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import queries
from forensics.addresses import normalize_label
from forensics.errors import ConfigError, DatabaseError
from forensics.textsafe import terminal_safe
from remediation import labels
from remediation.errors import RefusedError
from remediation.labels import Scope, sent_log_pairs  # noqa: F401  (requeue_apply and claims read them here)


def resolve_scope(pairs: list[tuple[str, str]], campaign: str | None, step: str | None,
                  no_sends_yet: bool = False) -> Scope:
    """Pure: the sent-log's (campaign, step) pairs the filters select (labels.resolve_scope).

    A filter that selects nothing is refused, naming the values that exist, unless `no_sends_yet`
    (a new campaign: nobody is in the sent-log for it). Rows of unknown step ('') count for any step.
    """
    scope = labels.resolve_scope(pairs, campaign, step, labels.REQUEUE)
    if not no_sends_yet:
        labels.refuse_unmatched(scope, labels.REQUEUE)
    return scope


def db_error(doing: str, exc: Exception) -> DatabaseError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseError(f"{doing}: {text}")


def require_postgres(conn) -> None:
    if not type(conn).__module__.startswith("psycopg"):
        raise ConfigError("requeue-stale and audit need PostgreSQL (row locks, SKIP LOCKED): "
                          "pass --db postgresql://… (DuckDB files are not supported)")


# Columns of the leads table that limit the re-queued leads to the incident (`--col campaign=…`, `--col step=…`).
LABEL_COLUMNS = ("campaign", "step")


@dataclass(frozen=True)
class LeadScope:
    """Which leads --campaign/--step limit: the leads table's own campaign and step columns, compared in normal
    form. Without a campaign (step) column a --campaign (--step) filter is refused unless `--all-campaigns` (then
    said)."""

    campaign_column: str | None = None
    step_column: str | None = None
    campaign_key: str | None = None
    step_key: str | None = None
    notes: tuple[str, ...] = ()

    def idents(self, key_column: str) -> dict:
        # An unlimited filter binds the key column with a NULL key: the condition is then always true.
        return {"lead_campaign": self.campaign_column or key_column, "lead_step": self.step_column or key_column}

    def params(self) -> dict:
        return {"lead_campaign_key": self.campaign_key, "lead_step_key": self.step_key}


def lead_scope(conn, table, campaign: str | None, step: str | None, all_campaigns: bool = False) -> LeadScope:
    """The LeadScope of --campaign/--step over `table` (a remediation.claims.LeadsTable): its mapped columns, or
    columns named campaign and step. A mapped column the table lacks is an error."""
    present = {row[0] for row in queries.run(conn, "requeue_lead_columns", {
        "table_name": table.table.name, "table_schema": table.table.schema}).fetchall()}
    mapped = dict(table.label_columns)
    for logical, column in mapped.items():
        if column not in present:
            raise ConfigError(f"--col {logical}={column}: {table.table} has no column {column!r}")
    campaign_column = mapped.get("campaign") or ("campaign" if "campaign" in present else None)
    step_column = mapped.get("step") or ("step" if "step" in present else None)
    notes = []
    if campaign is not None and campaign_column is None:
        if not all_campaigns:
            raise RefusedError(terminal_safe(
                f"--campaign {campaign!r} limits the sent-log, not the leads: {table.table} has no campaign column, "
                "so stale leads of every campaign would be re-queued; pass --col campaign=COLUMN naming the leads' "
                "campaign column, or --all-campaigns to touch every campaign's stale leads"))
        notes.append(f"--all-campaigns: {table.table} has no campaign column, so stale leads of every campaign are "
                     f"in the plan (only the sent-log is limited to {campaign!r})")
    if step is not None and step_column is None:
        if not all_campaigns:  # a lead at another step would be checked against this step's sends alone
            raise RefusedError(terminal_safe(
                f"--step {step!r} limits the sent-log, not the leads: {table.table} has no step column, so a stale lead "
                f"at another step would be checked against step {step!r}'s sends alone; pass --col step=COLUMN "
                "naming the leads' step column, leave --step out (every step's sends then count), or --all-campaigns "
                "to re-queue the leads the filters cannot limit"))
        notes.append(f"{table.table} has no step column: --step limits the sent-log, not the leads")
    return LeadScope(campaign_column if campaign is not None else None, step_column if step is not None else None,
                     None if campaign is None or campaign_column is None else normalize_label(campaign),
                     None if step is None or step_column is None else normalize_label(step), tuple(notes))
