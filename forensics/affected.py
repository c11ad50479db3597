"""Pick the affected people a responder asked for, and refuse a filter that matches nothing.

An empty apology list is an answer people act on ("nobody to apologise to"), so it is only given when
the filter names something the logs hold: an unknown incident id, a kind no incident has, or a
campaign the logs never sent to is an error naming what there is.
"""

from __future__ import annotations

import queries
from forensics.errors import InputError

SHOWN = 8  # values named in an error, at most


def _named(values: list[str]) -> str:
    shown = ", ".join(values[:SHOWN]) or "none"
    return shown + (f" and {len(values) - SHOWN} more" if len(values) > SHOWN else "")


def check_filters(con, incidents: list[dict], kind: str | None, incident: str | None, campaign: str | None) -> None:
    if incident and incident not in {i["id"] for i in incidents}:
        raise InputError(f"no incident {incident} in these logs (incidents: {_named([i['id'] for i in incidents])}); "
                         "pass one of them to --incident")
    if kind and kind not in {i["kind"] for i in incidents}:
        kinds = list(dict.fromkeys(i["kind"] for i in incidents))
        raise InputError(f"no {kind} incident in these logs (kinds found: {_named(kinds)}); pass one of them to --kind")
    if campaign is not None:
        sent = [row["campaign"] for row in queries.rows(con, "campaign_send_counts")]
        if campaign not in sent:
            raise InputError(f"no send to campaign {campaign!r} in these logs (campaigns: {_named(sent)}); "
                             "pass one of them to --campaign")


def select(rows: list[dict], kind: str | None, incident: str | None, campaign: str | None) -> list[dict]:
    return [r for r in rows if (not kind or r["kind"] == kind) and (not incident or r["incident"] == incident)
            and (campaign is None or (r["campaign"] or "") == campaign)]
