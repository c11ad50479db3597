"""A/B contamination: find people who received more than one variant, then exclude them and make
assignment sticky.

- `analyse(con, test_id, weights)` reads the case's `sends` table (DuckDB) and returns an AbReport:
  per-arm counts all vs clean, the contamination rate, a sample-ratio-mismatch test, the list.
- `build_plan(con, report, run_id)` turns it into an AbPlan: the exclusion rows and the sticky
  assignment rows (first-seen variant), as Arrow tables, plus a human summary. It writes nothing.
- `apply_plan(store, plan)` writes exactly those rows in one transaction, ON CONFLICT DO NOTHING,
  so a second run, or a concurrent one, changes nothing and a stored assignment is never changed.
- `stored_assignment(store, test_id, unit)` reads a sticky assignment back (for `ab-assign`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import queries
from forensics.errors import DatabaseError, InputError
from remediation.ab_stats import srm_test
from remediation.audit import new_run_id  # noqa: F401  (one run-id format for every remediation)

CONTAMINATION_WARN_RATE = 0.01  # warn when at least 1 % of units...
CONTAMINATION_WARN_UNITS = 10  # ...and at least 10 people are contaminated


@dataclass
class AbReport:
    test_id: str
    sends: int
    sends_without_variant: int
    sends_without_unit: int
    units: int
    contaminated: int
    arms: list[dict]
    srm: dict | None
    contaminated_units: list[dict]
    weights: dict[str, float] | None = None

    @property
    def contamination_rate(self) -> float:
        return self.contaminated / self.units if self.units else 0.0

    @property
    def contamination_warning(self) -> bool:
        return self.contamination_rate >= CONTAMINATION_WARN_RATE and self.contaminated >= CONTAMINATION_WARN_UNITS

    def to_dict(self) -> dict:
        return {
            "test_id": self.test_id, "sends": self.sends,
            "sends_without_variant": self.sends_without_variant, "sends_without_unit": self.sends_without_unit,
            "units": self.units, "contaminated": self.contaminated,
            "contamination_rate": self.contamination_rate, "contamination_warning": self.contamination_warning,
            "arms": self.arms, "srm": self.srm, "contaminated_units": self.contaminated_units,
        }


@dataclass
class AbPlan:
    test_id: str
    run_id: str
    exclusions: Any  # pyarrow.Table: test_id, unit, reason, variants, run_id
    assignments: Any  # pyarrow.Table: test_id, unit, variant, source
    steps: list[str] = field(default_factory=list)  # query names, in the order apply runs them

    def summary(self) -> dict:
        return {
            "run_id": self.run_id, "test_id": self.test_id,
            "exclusions": self.exclusions.num_rows, "assignments": self.assignments.num_rows,
            "steps": list(self.steps),
        }


@dataclass
class AbApplied:
    run_id: str
    target: str
    exclusions_written: int
    assignments_written: int
    assignments_existing: int
    assignments_differing: int

    def to_dict(self) -> dict:
        return dict(self.__dict__)


# --- analysis (DuckDB, over the case's `sends`) -------------------------------------------------

def _run(con, name: str, params: dict | None = None):
    return con.execute(queries.get(name).for_duckdb(), params or {})


def _dicts(cursor) -> list[dict]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def _no_such_test(con, test_id: str) -> InputError:
    seen = [row[0] for row in _run(con, "ab_test_ids").fetchall()]
    hint = f"tests in these logs: {', '.join(seen)}" if seen else "no send carries a test_id"
    return InputError(f"no sends with test_id {test_id!r} ({hint})")


def _arm_rows(counted: list[dict], srm: dict | None, weights: dict | None) -> list[dict]:
    """Observed arms plus any weighted arm nobody received, with weight and expected clean count."""
    rows = {row["variant"]: dict(row) for row in counted}
    for arm in weights or {}:
        rows.setdefault(arm, {"variant": arm, "units_all": 0, "units_clean": 0, "units_first_seen": 0, "sends": 0})
    expected = dict(zip(srm["arms"], srm["expected"])) if srm else {}
    for arm, row in rows.items():
        row["weight"] = weights[arm] if weights else 1.0
        row["expected_clean"] = expected.get(arm)
    return [rows[arm] for arm in sorted(rows)]


def analyse(con, test_id: str, weights: dict[str, float] | None = None) -> AbReport:
    """Contamination report for one test from the `sends` table of a DuckDB connection."""
    test_id = test_id.strip()
    _run(con, "ab_sends_build", {"test_id": test_id})
    _run(con, "ab_units_build")
    overview = _dicts(_run(con, "ab_overview"))[0]
    if overview["sends"] == 0:
        raise _no_such_test(con, test_id)
    if overview["units"] == 0:
        raise InputError(f"test {test_id!r} has {overview['sends']} sends but none names both a variant and a person")
    counted = _dicts(_run(con, "ab_arm_counts"))
    srm = srm_test({row["variant"]: row["units_clean"] for row in counted}, weights)
    return AbReport(
        test_id=test_id, srm=srm, weights=weights, arms=_arm_rows(counted, srm, weights),
        contaminated_units=_dicts(_run(con, "ab_contaminated")), **overview,
    )


# --- plan (pure: reads the case, writes nothing) ------------------------------------------------

APPLY_STEPS = (
    "ab_create_exclusions", "ab_create_assignments", "ab_assignment_conflicts",
    "ab_insert_exclusions", "ab_insert_assignments",
)


def _arrow(con, name: str, params: dict):
    relation = con.sql(queries.get(name).for_duckdb(), params=params)
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # DuckDB 2 / DuckDB 1.x
    return fetch()


def build_plan(con, report: AbReport, run_id: str) -> AbPlan:
    """Exclusion rows for the contaminated units, sticky first-seen assignments for every unit."""
    exclusions = _arrow(con, "ab_plan_exclusions", {"test_id": report.test_id, "run_id": run_id})
    source = f"first-seen:{run_id}"
    assignments = _arrow(con, "ab_plan_assignments", {"test_id": report.test_id, "source": source})
    return AbPlan(report.test_id, run_id, exclusions, assignments, list(APPLY_STEPS))


# --- apply (PostgreSQL or DuckDB store, one transaction) ----------------------------------------

def _csv_bytes(table) -> bytes:
    import pyarrow.csv as pacsv

    buffer = io.BytesIO()
    pacsv.write_csv(table, buffer)
    return buffer.getvalue()


def _pg_stage(cur, plan: AbPlan) -> None:
    for kind, table in (("exclusions", plan.exclusions), ("assignments", plan.assignments)):
        cur.execute(queries.get(f"ab_pg_stage_{kind}").sql)
        with cur.copy(queries.get(f"ab_pg_copy_{kind}").sql) as copy:
            copy.write(_csv_bytes(table))


def _pg_apply(conn, plan: AbPlan) -> tuple[int, int, int, int]:
    with conn.transaction(), conn.cursor() as cur:
        cur.execute(queries.get("ab_pg_ddl_lock").sql)
        cur.execute(queries.get("ab_create_exclusions").sql)
        cur.execute(queries.get("ab_create_assignments").sql)
        _pg_stage(cur, plan)
        existing, differing = cur.execute(queries.get("ab_assignment_conflicts").sql).fetchone()
        excluded = cur.execute(queries.get("ab_insert_exclusions").sql).rowcount
        assigned = cur.execute(queries.get("ab_insert_assignments").sql).rowcount
    return excluded, assigned, existing, differing


def _duck_count(con, name: str) -> int:
    return int(con.execute(queries.get(name).for_duckdb()).fetchone()[0])


def _duck_apply(con, plan: AbPlan) -> tuple[int, int, int, int]:
    con.register("ab_stage_exclusions", plan.exclusions)
    con.register("ab_stage_assignments", plan.assignments)
    try:
        con.begin()
        con.execute(queries.get("ab_create_exclusions").sql)
        con.execute(queries.get("ab_create_assignments").sql)
        existing, differing = con.execute(queries.get("ab_assignment_conflicts").sql).fetchone()
        counts = _duck_count(con, "ab_insert_exclusions"), _duck_count(con, "ab_insert_assignments")
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        con.unregister("ab_stage_exclusions")
        con.unregister("ab_stage_assignments")
    return counts[0], counts[1], int(existing), int(differing)


def apply_plan(store, plan: AbPlan) -> AbApplied:
    """Write exactly the plan's rows that are not there yet, in one transaction; return what changed."""
    try:
        if store.kind == "postgres":
            counts = _pg_apply(store.conn, plan)
        else:
            counts = _duck_apply(store.conn, plan)
    except Exception as exc:
        if isinstance(exc, DatabaseError) or not _is_driver_error(exc):
            raise
        raise DatabaseError(f"{store.label}: could not write the A/B plan: {_first_line(exc)}") from None
    return AbApplied(plan.run_id, store.label, *counts)


def stored_assignment(store, test_id: str, unit: str) -> dict | None:
    """The sticky assignment stored for (test, unit), or None (also when the table does not exist)."""
    lookup = queries.get("ab_lookup_assignment")
    sql = lookup.for_psycopg() if store.kind == "postgres" else lookup.for_duckdb()
    try:
        if not store.conn.execute(queries.get("ab_assignments_present").sql).fetchone()[0]:
            return None
        row = store.conn.execute(sql, {"test_id": test_id, "unit": unit}).fetchone()
    except Exception as exc:
        if not _is_driver_error(exc):
            raise
        raise DatabaseError(f"{store.label}: could not read ab_assignments: {_first_line(exc)}") from None
    return None if row is None else {"variant": row[0], "assigned_at": row[1], "source": row[2]}


def _is_driver_error(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("psycopg", "duckdb", "_duckdb"))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
