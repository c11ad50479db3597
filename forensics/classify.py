"""Run the classification queries over a loaded case (see queries/classify.sql)."""

from __future__ import annotations

import queries
from forensics.kinds import KINDS

# Clock skew tolerated between workers when comparing claim and send times.
DEFAULT_SKEW_S = 5.0

# (dictionary table, code column, sends column): the identities compared as integer codes
_DICTIONARIES = (("mm_workers", "w", "worker"), ("mm_shards", "sh", "shard"), ("mm_incarnations", "i", "incarnation"),
                 ("mm_tests", "t", "test_id"), ("mm_variants", "v", "variant"))
_FIND = ("classify_codes", "classify_dup_sends")  # the duplicated people and their sends, coded
_WEIGH = ("classify_pairs", "classify_leases", "classify_groups", "classify_coverage", "classify_people")


def classify(con, skew_s: float = DEFAULT_SKEW_S, save: bool = False, keep_working: bool = False) -> None:
    """Create dup_people and incidents in the case database (over TEMP working tables). `save`: the case is
    kept (--save), so dup_people is a table of its own and dup_pairs is written too; otherwise dup_people is
    a view over the working tables, which go with the connection. The working tables are dropped as soon
    as they have served, unless `keep_working` (to inspect them)."""
    code_identities(con)
    for step in _FIND:
        queries.script(con, step)
    if not keep_working:
        queries.script(con, "classify_release_scans")
    for step in _WEIGH:
        queries.script(con, step, {"skew_s": skew_s})
    for step in ("save_dup_pairs", "save_dup_people") if save else ("dup_people_view",):
        queries.run(con, step)
    if not keep_working:
        queries.script(con, "classify_release_pairs")
    queries.run(con, "build_incidents")
    if not keep_working:
        queries.script(con, "classify_release_sends")


def code_identities(con) -> None:
    """The sends' identities as integer codes: their combinations (mm_identities) and one dictionary each."""
    queries.run(con, "classify_identities")
    for dictionary, code, column in _DICTIONARIES:
        queries.run(con, "classify_dictionary", dictionary=dictionary, code=code, column=column)


def incidents(con) -> list[dict]:
    return queries.rows(con, "incident_rows")


def summary(con) -> dict:
    totals = queries.one(con, "summary_counts")
    by_kind = {kind: 0 for kind in KINDS}
    by_kind.update({row["kind"]: row["people"] for row in queries.rows(con, "people_by_kind")})
    return {**totals, "by_kind": by_kind}
