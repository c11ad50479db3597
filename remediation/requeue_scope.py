"""requeue-stale's sent-log scope and the PostgreSQL-only rule shared by its scan and its apply.

The scope is the (campaign, step) pairs of the sent-log whose rows prove a send: the
`--campaign`/`--step` filters select them compared normalised (normalize_label), and a filter
that selects nothing is refused unless `--no-sends-yet` says the campaign is new.
"""

from __future__ import annotations

from dataclasses import dataclass

import queries
from forensics.addresses import normalize_label
from forensics.errors import ConfigError, DatabaseError
from forensics.textsafe import terminal_safe
from remediation.errors import RefusedError

SHOWN_VALUES = 20  # existing campaigns/steps named in a refusal


@dataclass(frozen=True)
class Scope:
    """The sent-log rows that prove a send: (campaign, step) pairs spelled as the sent-log spells them."""

    campaigns: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    no_sends_yet: str | None = None  # the filter that matched no sent-log row, allowed by --no-sends-yet

    def params(self) -> dict:
        return {"scope_campaigns": list(self.campaigns), "scope_steps": list(self.steps)}


def resolve_scope(pairs: list[tuple[str, str]], campaign: str | None, step: str | None,
                  no_sends_yet: bool = False) -> Scope:
    """Pure: the sent-log's (campaign, step) pairs the filters select, compared normalised (normalize_label).

    A filter that selects nothing is refused, naming the values that exist, unless `no_sends_yet`
    (a new campaign: nobody is in the sent-log for it). Rows of unknown step ('') count for any step.
    """
    in_campaign = [p for p in pairs if campaign is None or normalize_label(p[0]) == normalize_label(campaign)]
    if campaign is not None and not in_campaign:
        return _matched_nothing(f"--campaign {campaign!r}", "campaigns", {c for c, _ in pairs}, no_sends_yet)
    chosen = [p for p in in_campaign if step is None or normalize_label(p[1]) == normalize_label(step)]
    if step is not None and not chosen:
        where = f" of campaign {campaign!r}" if campaign is not None else ""
        return _matched_nothing(f"--step {step!r}", f"steps{where}", {s for _, s in in_campaign}, no_sends_yet)
    if step is not None:
        chosen += [p for p in in_campaign if p[1] == "" and p not in chosen]
    return Scope(tuple(c for c, _ in chosen), tuple(s for _, s in chosen))


def _matched_nothing(flag: str, kind: str, existing: set, no_sends_yet: bool) -> Scope:
    if no_sends_yet:
        return Scope(no_sends_yet=flag)
    shown = ", ".join(repr(v) for v in sorted(existing)[:SHOWN_VALUES]) or "none (the sent-log is empty)"
    more = f" (and {len(existing) - SHOWN_VALUES} more)" if len(existing) > SHOWN_VALUES else ""
    raise RefusedError(terminal_safe(
        f"{flag} matches no sent-log row (compared trimmed and case-folded), so no stale lead could be found "
        f"sent and every one would be re-queued; the sent-log's {kind}: {shown}{more}. Nothing changed. "
        "Pass one of those, or --no-sends-yet if this campaign has sent nothing yet"))


def sent_log_pairs(conn) -> list[tuple[str, str]]:
    """Every (campaign, step) the sent-log holds."""
    return [tuple(row) for row in queries.run(conn, "requeue_sent_log_pairs").fetchall()]


def db_error(doing: str, exc: Exception) -> DatabaseError:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return DatabaseError(f"{doing}: {text}")


def require_postgres(conn) -> None:
    if not type(conn).__module__.startswith("psycopg"):
        raise ConfigError("requeue-stale and audit need PostgreSQL (row locks, SKIP LOCKED): "
                          "pass --db postgresql://… (DuckDB files are not supported)")
