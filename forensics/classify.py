"""Run the classification queries over a loaded case (see queries/classify.sql) and gather what they found:
the incidents, the summary and the evidence the run lost (`verdict`).

A skipped line loses evidence when it could be a send record: it holds a mail-send key (an event,
recipient or message-id alias, as `key=` or `"key":`), an email address, or a send event as a CSV cell;
a line too long to read always does (what it held cannot be told).
Noise (blank lines, health checks, stack traces, other services) is counted and located by ingest but
loses nothing. How lost evidence is told is forensics.evidence's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import queries
from forensics.ingest.fields import ALIASES
from forensics.ingest.repair import TOO_LONG
from forensics.ingest.vocabulary import NOT_SEND, SENDING
from forensics.kinds import KINDS

# Clock skew tolerated between workers when comparing claim and send times.
DEFAULT_SKEW_S = 5.0

# (dictionary table, code column, sends column): the identities compared as integer codes
_DICTIONARIES = (("mm_workers", "w", "worker"), ("mm_shards", "sh", "shard"), ("mm_incarnations", "i", "incarnation"),
                 ("mm_tests", "t", "test_id"), ("mm_variants", "v", "variant"))
_FIND = ("classify_codes", "classify_dup_sends")  # the duplicated people and their sends, coded
_WEIGH = ("classify_pairs", "classify_leases", "classify_groups", "classify_coverage", "classify_people")

SEND_EVENTS = ("send", "sent", "email_sent", "send_ok", "delivered_to_provider")
_ADDRESS = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"


@dataclass(frozen=True)
class Verdict:
    """What the queries over a case found, as the diagnose document holds it (docs/diagnose-json.md)."""

    complete: bool
    lost_evidence: dict        # lost_evidence
    summary: dict              # summary
    incidents: list[dict]      # incident_rows, one dict each
    candidates_at_two_addresses: list[dict]


def verdict(con, save: bool = False, unread: list[dict] | None = None, vocabulary=None) -> Verdict:
    """Classify the case (`classify`), then read back everything found; `unread` and `vocabulary` as in
    `lost_evidence`."""
    classify(con, save=save)
    lost = lost_evidence(con, unread=unread, vocabulary=vocabulary)
    return Verdict(complete=is_complete(lost), lost_evidence=lost, summary=summary(con), incidents=incidents(con),
                   # Not one of the five kinds: one person (by candidate id) reached at two addresses in one step.
                   candidates_at_two_addresses=queries.rows(con, "candidates_at_two_addresses"))


def classify(con, skew_s: float = DEFAULT_SKEW_S, save: bool = False, keep_working: bool = False) -> None:
    """Create dup_people and incidents in the case database (over TEMP working tables). `save`: the case is
    kept (--save), so dup_people is a table of its own and dup_pairs is written too; otherwise dup_people is
    a view over the working tables, which go with the connection. The working tables are dropped as soon
    as they have served, unless `keep_working` (to inspect them). Every block runs through queries.script,
    one statement or several alike."""
    code_identities(con)
    for step in _FIND:
        queries.script(con, step)
    if not keep_working:
        queries.script(con, "classify_release_scans")
    for step in _WEIGH:
        queries.script(con, step, {"skew_s": skew_s})
    for step in ("save_dup_pairs", "save_dup_people") if save else ("dup_people_view",):
        queries.script(con, step)
    if not keep_working:
        queries.script(con, "classify_release_pairs")
    queries.script(con, "build_incidents")
    if not keep_working:
        queries.script(con, "classify_release_sends")


def code_identities(con) -> None:
    """The sends' identities as integer codes: their combinations (mm_identities) and one dictionary each."""
    queries.script(con, "classify_identities")
    for dictionary, code, column in _DICTIONARIES:
        queries.script(con, "classify_dictionary", dictionary=dictionary, code=code, column=column)


def incidents(con) -> list[dict]:
    return queries.rows(con, "incident_rows")


def summary(con) -> dict:
    [totals] = queries.rows(con, "summary_counts")
    by_kind = {kind: 0 for kind in KINDS}
    by_kind.update({row["kind"]: row["people"] for row in queries.rows(con, "people_by_kind")})
    return {**totals, "by_kind": by_kind}


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
