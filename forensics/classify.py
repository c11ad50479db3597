"""Run the classification queries over a loaded case (see queries/classify.sql)."""

from __future__ import annotations

import queries
from forensics.ingest.load import fetch, run_script
from forensics.kinds import KINDS

# Clock skew tolerated between workers when comparing claim and send times.
DEFAULT_SKEW_S = 5.0

_STEPS = ("classify_pairs", "classify_leases", "classify_groups", "classify_coverage",
          "classify_people", "build_incidents")


def classify(con, skew_s: float = DEFAULT_SKEW_S) -> None:
    """Create dup_pairs, dup_people and incidents tables in the case database."""
    for step in _STEPS:
        run_script(con, step, {"skew_s": skew_s} if step == "classify_leases" else None)


def rows_as_dicts(con, name: str, params: dict | None = None) -> list[dict]:
    cursor = con.execute(queries.get(name).for_duckdb(), params or {})
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def incidents(con) -> list[dict]:
    return rows_as_dicts(con, "incident_rows")


def summary(con) -> dict:
    totals = rows_as_dicts(con, "summary_counts")[0]
    by_kind = {kind: 0 for kind in KINDS}
    by_kind.update({kind: people for kind, people in fetch(con, "people_by_kind")})
    return {**totals, "by_kind": by_kind}
