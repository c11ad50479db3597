"""How the evidence a run lost is told (the INCOMPLETE headline) and added to: what counts as lost, and whether
a run is complete, is found with the classification (forensics.classify.lost_evidence, is_complete).
"""

from __future__ import annotations

from typing import Callable

from forensics.classify import is_complete


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
