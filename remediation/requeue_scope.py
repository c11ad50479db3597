"""requeue-stale's sent-log scope and the PostgreSQL-only rule shared by its scan and its apply.

The scope is the (campaign, step) pairs of the sent-log whose rows prove a send: the
`--campaign`/`--step` filters select them compared in normal form (remediation.labels, the rule
every decision that reads a campaign or step uses), and a filter that selects nothing is refused
unless `--no-sends-yet` says the campaign is new.
"""

from __future__ import annotations

from forensics.errors import ConfigError, DatabaseError
from remediation import labels
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
