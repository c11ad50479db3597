"""What a run could not read: the evidence it lost, so that no answer is an all-clear it has not earned.

A skipped line loses evidence when it could be a send record: it holds a mail-send key (an event,
recipient or message-id alias, as `key=` or `"key":`), an email address, or a send event as a CSV cell;
a line too long to read always does (what it held cannot be told).
Noise (blank lines, health checks, stack traces, other services) is counted and located by ingest but
loses nothing.
"""

from __future__ import annotations

import re
from typing import Callable

import queries
from forensics.ingest.fields import ALIASES
from forensics.ingest.repair import TOO_LONG
from forensics.ingest.vocabulary import NOT_SEND, SENDING

SEND_EVENTS = ("send", "sent", "email_sent", "send_ok", "delivered_to_provider")
_ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"


def evidence_pattern(extra_keys: tuple[str, ...] = ()) -> str:
    """One regular expression (RE2 and Python alike) for a line that may be a lost send record."""
    keys = sorted({*ALIASES["event"], *ALIASES["recipient"], *ALIASES["msg_id"], *extra_keys}, key=len, reverse=True)
    key = "(?:" + "|".join(re.escape(k) for k in keys) + ")"
    events = "(?:" + "|".join(SEND_EVENTS) + ")"
    return (f"(?i)(?:(?:^|[\\s,{{\"']){key}[\"']?\\s*[=:])|{_ADDRESS}"
            f"|(?:(?:^|,)\\s*\"?{events}\"?\\s*(?:,|$))")


def lost_evidence(con, unread: list[dict] | None = None, extra_keys: tuple[str, ...] = (), vocabulary=None) -> dict:
    """{"files_not_read": [...], "lines": N, "by_file": [{path, lines, first_lines}]} for the document; with
    `vocabulary` (forensics.ingest.vocabulary), the records that look like sends but were not read as one
    (`records_not_read`) and the campaign or step no key was found for (`fields_not_read`), when there are any."""
    params = {"pattern": evidence_pattern(extra_keys), "too_long": TOO_LONG}
    by_file = [{"path": row["source"], "lines": row["lines"], "first_lines": list(row["first_lines"])}
               for row in queries.rows(con, "lost_evidence_lines", params)]
    lost = {"files_not_read": list(unread or []), "lines": sum(f["lines"] for f in by_file), "by_file": by_file}
    spellings = [{"campaign": row["campaign"], "steps": list(row["steps"])}
                 for row in queries.rows(con, "step_spellings")]
    if spellings:
        lost["step_spellings"] = spellings
    if vocabulary is None:
        return lost
    records = [{"path": row["source"], "lines": row["lines"], "first_lines": list(row["first_lines"])}
               for row in queries.rows(con, "unread_send_records", {"not_send": NOT_SEND, "send_words": SENDING})]
    if records:
        lost["records_not_read"] = {"count": sum(f["lines"] for f in records), "by_file": records,
                                    "fields": _fields_to_map(vocabulary)}
    if vocabulary.unread_roles:
        lost["fields_not_read"] = [{"field": role, "candidate_keys": keys}
                                   for role, keys in vocabulary.unread_roles.items()]
    return lost


def _fields_to_map(vocabulary) -> list[str]:
    """The roles a send needs that no key was found for (what a `--field` would add)."""
    return [canon for canon in ("recipient", "msg_id", "event") if canon not in vocabulary.fields]


def is_complete(lost: dict) -> bool:
    return (not lost["files_not_read"] and not lost["lines"] and not lost.get("provider_sends_unplaced", {}).get("count")
            and not lost.get("records_not_read") and not lost.get("fields_not_read") and not lost.get("step_spellings"))


def with_unplaced_provider_sends(document: dict, reconciliation: dict) -> None:
    """Beside the logs, provider sends the log lacks and no grouping can place are lost evidence too: a second send
    of a campaign step among them cannot be seen, so the run is incomplete (as with the export alone)."""
    unplaced = reconciliation["provider_sends_unplaced"]
    document["lost_evidence"]["provider_sends_unplaced"] = unplaced
    document["complete"] = is_complete(document["lost_evidence"])


def incomplete_headline(lost: dict, shown: Callable[[str], str] = str) -> str:
    """The line said first when the run lost evidence (`shown` makes a path or location safe where it is shown)."""
    parts = []
    if lost["files_not_read"]:
        paths = [f["path"] for f in lost["files_not_read"]]
        parts.append(f"{len(paths):,} file(s) or folder(s) not read (" + ", ".join(shown(p) for p in paths[:3])
                     + (f" +{len(paths) - 3} more" if len(paths) > 3 else "") + ")")
    if lost["lines"]:
        parts.append(f"{lost['lines']:,} skipped line(s) look like mail-send records "
                     f"({shown(_where(lost['by_file']))})")
    unplaced = lost.get("provider_sends_unplaced", {"count": 0})
    if unplaced["count"]:
        parts.append(f"{unplaced['count']:,} provider send(s) the log lacks could not be placed in a campaign step "
                     f"({shown(_where(unplaced['by_file']))})")
    records = lost.get("records_not_read")
    if records:
        missing = ", ".join(records["fields"])
        parts.append(f"{records['count']:,} record(s) look like sends but were not read as one "
                     f"({shown(_where(records['by_file']))}"
                     + (f"; no key found for {missing}" if missing else "") + "; see `mailmortem fields`)")
    for unread in lost.get("fields_not_read", []):
        parts.append(f"no key was read as the {unread['field']}, though the sends carry "
                     + ", ".join(shown(k) for k in unread["candidate_keys"][:4])
                     + f" (map one with --field {unread['field']}=KEY, or pass --field {unread['field']}=none"
                     " if the log has none): people's sends of different "
                     + ("steps" if unread["field"] == "step" else "campaigns") + " may be counted as duplicates")
    for spelled in lost.get("step_spellings", []):
        parts.append(f"one step written two ways in campaign {shown(spelled['campaign'] or '(none)')} (step values "
                     + ", ".join(shown(s) for s in spelled["steps"][:4]) + "): a person sent it under both is "
                     "not seen as duplicated")
    return "INCOMPLETE: " + "; ".join(parts) + ". Duplicates among them cannot be seen."


def _where(by_file: list[dict]) -> str:
    return ", ".join(f"{f['path']}:{','.join(str(n) for n in f['first_lines'][:3])}" for f in by_file[:3])
