"""Run the classification queries over a loaded case (see queries/classify.sql)."""

from __future__ import annotations

import queries
from forensics.kinds import KINDS

# Clock skew tolerated between workers when comparing claim and send times.
DEFAULT_SKEW_S = 5.0

_STEPS = ("classify_pairs", "classify_leases", "classify_groups", "classify_coverage",
          "classify_people", "build_incidents")


def classify(con, skew_s: float = DEFAULT_SKEW_S) -> None:
    """Create dup_pairs, dup_people and incidents tables in the case database."""
    for step in _STEPS:
        queries.run(con, step, {"skew_s": skew_s})


def incidents(con) -> list[dict]:
    return queries.rows(con, "incident_rows")


def summary(con) -> dict:
    totals = queries.one(con, "summary_counts")
    by_kind = {kind: 0 for kind in KINDS}
    by_kind.update({row["kind"]: row["people"] for row in queries.rows(con, "people_by_kind")})
    return {**totals, "by_kind": by_kind}
