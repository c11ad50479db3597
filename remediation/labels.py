"""A campaign or step given by a person or a config, matched to the sent-log's own spellings.

Every decision that reads a campaign or a step compares it in normal form
(`forensics.addresses.normalize_label`: `C1` and ` c1` are one campaign, `01` and `1` one step).
The sent-log is read here as its (campaign, step) pairs and a filter selects the pairs it names
(`resolve_scope`); lookups then ask for those exact spellings, so sent_log's (campaign, step,
recipient) index serves them and no stored value is rewritten. Send reservations and A/B tables
compare in SQL with the twin `mm_label`.

A filter that names nothing the sent-log holds is refused (`refuse_unmatched`), naming what it
does hold, unless the caller says the campaign or step is new: an answer from a filter that names
nothing is "nobody was sent", which is how a typo emails everyone again.
"""

from __future__ import annotations

from dataclasses import dataclass

import queries
from forensics.addresses import normalize_label
from forensics.textsafe import terminal_safe
from remediation.errors import RefusedError

SHOWN_VALUES = 20  # existing campaigns/steps named in a refusal


@dataclass(frozen=True)
class Unmatched:
    """A filter that named nothing in the sent-log: the flag as given, and what could have been named."""

    flag: str  # e.g. "--campaign 'c1'"
    kind: str  # "campaigns" or "steps of campaign 'c1'"
    existing: tuple[str, ...]


@dataclass(frozen=True)
class Scope:
    """The sent-log's (campaign, step) pairs a filter selects, spelled as the sent-log spells them."""

    campaigns: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()
    unmatched: Unmatched | None = None

    @property
    def no_sends_yet(self) -> str | None:
        """The filter that matched no sent-log row (let through as a new campaign or step), or None."""
        return self.unmatched.flag if self.unmatched else None

    def params(self) -> dict:
        return {"scope_campaigns": list(self.campaigns), "scope_steps": list(self.steps)}


@dataclass(frozen=True)
class Refusal:
    """How one caller words a refusal: its option names, what the filter would have done, how to say "new"."""

    consequence: str
    escape: str
    campaign_option: str = "--campaign"
    step_option: str = "--step"


REQUEUE = Refusal("no stale lead could be found sent and every one would be re-queued (nothing changed)",
                  "--no-sends-yet")
CHECK = Refusal('nobody could be found sent and every answer would be "not sent"', "--no-sends-yet")
LOOP = Refusal("no lead could be found sent and every one would be emailed", "no_sends_yet=True",
               "LoopConfig.campaign", "LoopConfig.step")


def resolve_scope(pairs: list[tuple[str, str]], campaign: str | None, step: str | None,
                  refusal: Refusal = CHECK) -> Scope:
    """Pure: the pairs the filters select, compared in normal form; never raises.

    Rows of unknown step ('' in normal form) of a selected campaign count for any step, also when the step
    names nothing. `unmatched` says which filter selected nothing (see refuse_unmatched)."""
    in_campaign = [p for p in pairs if campaign is None or normalize_label(p[0]) == normalize_label(campaign)]
    if campaign is not None and not in_campaign:
        flag = f"{refusal.campaign_option} {campaign!r}"
        return Scope(unmatched=Unmatched(flag, "campaigns", _sorted({c for c, _ in pairs})))
    named = [p for p in in_campaign if step is None or normalize_label(p[1]) == normalize_label(step)]
    unknown = [p for p in in_campaign if step is not None and normalize_label(p[1]) == "" and p not in named]
    chosen = named + unknown
    scope = Scope(tuple(c for c, _ in chosen), tuple(s for _, s in chosen))
    if step is not None and not named:
        where = f" of campaign {campaign!r}" if campaign is not None else ""
        missing = Unmatched(f"{refusal.step_option} {step!r}", f"steps{where}", _sorted({s for _, s in in_campaign}))
        return Scope(scope.campaigns, scope.steps, missing)
    return scope


def _sorted(values: set) -> tuple[str, ...]:
    return tuple(sorted(values))


def refuse_unmatched(scope: Scope, refusal: Refusal) -> None:
    """Raise the one-line refusal of a filter that named nothing (nothing when every filter named something)."""
    missing = scope.unmatched
    if missing is None:
        return
    shown = ", ".join(repr(v) for v in missing.existing[:SHOWN_VALUES]) or "none (the sent-log is empty)"
    more = f" (and {len(missing.existing) - SHOWN_VALUES} more)" if len(missing.existing) > SHOWN_VALUES else ""
    new = "step" if missing.kind.startswith("steps") else "campaign"
    raise RefusedError(terminal_safe(
        f"{missing.flag} matches no sent-log row (compared in normal form: trimmed, A-Z lower-cased, a number's "
        f"leading zeros dropped), so {refusal.consequence}; the sent-log's {missing.kind}: {shown}{more}. "
        f"Pass one of those, or {refusal.escape} if this {new} has sent nothing yet"))


def sent_log_pairs(conn) -> list[tuple[str, str]]:
    """Every (campaign, step) the sent-log holds (PostgreSQL skips along its index; DuckDB scans)."""
    name = "sent_log_pairs_pg" if queries.dialect_of(conn) == "postgres" else "sent_log_pairs_duckdb"
    return [tuple(row) for row in queries.run(conn, name).fetchall()]


def sent_log_scope(conn, campaign, step) -> Scope:
    """The sent-log's spellings of one campaign (and step; None = any), read now; empty when it holds none."""
    return resolve_scope(sent_log_pairs(conn), *as_filter(campaign, step))


def as_filter(campaign, step) -> tuple[str, str | None]:
    """A library caller's campaign and step as filters: campaign None is '' (rows of no campaign), step None any."""
    return ("" if campaign is None else str(campaign)), (None if step is None else str(step))


def label_keys(campaign, step) -> dict:
    """The normal forms a reservation or A/B query compares with mm_label (None stays None: any)."""
    return {"campaign_key": None if campaign is None else normalize_label(str(campaign)),
            "step_key": None if step is None else normalize_label(str(step))}


def refuse_loop_scope(pairs: list[tuple[str, str]], campaign: str, step: str, no_sends_yet: bool) -> None:
    """The claim loop's campaign and step, before it claims anything: neither empty, and naming something the
    sent-log holds (`pairs`) unless `no_sends_yet`."""
    if not campaign.strip():
        raise RefusedError("LoopConfig.campaign is empty: name the campaign these sends belong to")
    if not step.strip():
        steps = sorted({s for c, s in pairs if normalize_label(c) == normalize_label(campaign) and normalize_label(s)})
        held = f"sent_log holds step(s) {', '.join(map(repr, steps))}" if steps else "sent_log holds no step"
        raise RefusedError(terminal_safe(
            f"LoopConfig.step is empty: a send needs its step, or people already sent a step would be emailed "
            f"again; {held} for campaign {campaign!r}"))
    if not no_sends_yet:
        refuse_unmatched(resolve_scope(pairs, campaign, step, LOOP), LOOP)
