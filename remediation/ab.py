"""A/B clean-up: exclude the contaminated people and make assignment sticky. The analysis that
finds them is `forensics.ab.analyse`.

- `build_plan(con, report, run_id)` turns it into an AbPlan: the exclusion rows and the sticky
  assignment rows (first-seen variant), as Arrow tables, plus a human summary. It writes nothing.
- `apply_plan(store, plan)` writes exactly those rows in one transaction, ON CONFLICT DO NOTHING,
  so a second run, or a concurrent one, changes nothing and a stored assignment is never changed.
- `stored_assignment(store, test_id, unit)` reads a sticky assignment back (for `ab-assign`).

A test id is compared in normal form wherever the store is read (forensics.addresses.normalize_label,
SQL twin mm_label), so ` Subj` finds what `subj` stored; it is stored as given.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import queries
from forensics.ab import AbReport
from forensics.addresses import install_sql, normalize_label
from forensics.errors import DatabaseError
from remediation import audit
from remediation.audit import new_run_id  # noqa: F401  (one run-id format for every remediation)


@dataclass
class AbPlan:
    test_id: str
    run_id: str
    exclusions: Any  # pyarrow.Table: test_id, unit, reason, variants, run_id
    assignments: Any  # pyarrow.Table: test_id, unit, variant, source
    steps: list[str] = field(default_factory=list)  # query names, in the order apply runs them
    kept: int = 0  # people the store already assigns (left out of the plan: a stored arm never changes)
    kept_differing: int = 0  # of those, stored in another arm than their first-seen variant

    def summary(self) -> dict:
        return {
            "run_id": self.run_id, "test_id": self.test_id,
            "exclusions": self.exclusions.num_rows, "assignments": self.assignments.num_rows,
            "assignments_kept": self.kept, "steps": list(self.steps),
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


# --- plan (pure: reads the case, writes nothing) ------------------------------------------------

APPLY_STEPS = (
    "ab_create_exclusions", "ab_create_assignments", "ab_assignment_conflicts",
    "ab_insert_exclusions", "ab_insert_assignments",
)


def build_plan(con, report: AbReport, run_id: str) -> AbPlan:
    """Exclusion rows for the contaminated units, sticky first-seen assignments for every unit."""
    exclusions = queries.arrow(con, "ab_plan_exclusions", {"test_id": report.test_id, "run_id": run_id})
    source = f"first-seen:{run_id}"
    assignments = queries.arrow(con, "ab_plan_assignments", {"test_id": report.test_id, "source": source})
    return AbPlan(report.test_id, run_id, exclusions, assignments, list(APPLY_STEPS))


def pending(store, plan: AbPlan) -> AbPlan:
    """The plan minus what the store already holds, so a second apply plans (and prints) 0 changes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not queries.run(store.conn, "ab_assignments_present").fetchone()[0]:
        return plan
    install_sql(store.conn)
    params = {"test_key": normalize_label(plan.test_id)}
    excluded = pa.array([r["unit"] for r in queries.rows(store.conn, "ab_stored_exclusion_units", params)],
                        pa.string())
    stored = {r["unit"]: r["variant"] for r in queries.rows(store.conn, "ab_stored_assignments", params)}
    planned = zip(plan.assignments.column("unit").to_pylist(), plan.assignments.column("variant").to_pylist())
    differing = sum(1 for unit, variant in planned if unit in stored and stored[unit] != variant)
    units = plan.assignments.column("unit")
    new_assignments = plan.assignments.filter(pc.invert(pc.is_in(units, pa.array(list(stored), pa.string()))))
    new_exclusions = plan.exclusions.filter(pc.invert(pc.is_in(plan.exclusions.column("unit"), excluded)))
    return AbPlan(plan.test_id, plan.run_id, new_exclusions, new_assignments, list(plan.steps),
                  plan.assignments.num_rows - new_assignments.num_rows, differing)


# --- apply (PostgreSQL or DuckDB store, one transaction) ----------------------------------------

def _csv_bytes(table) -> bytes:
    import pyarrow.csv as pacsv

    buffer = io.BytesIO()
    pacsv.write_csv(table, buffer)
    return buffer.getvalue()


def _pg_stage(cur, plan: AbPlan) -> None:
    for stage, copy_in, table in (("ab_pg_stage_exclusions", "ab_pg_copy_exclusions", plan.exclusions),
                                  ("ab_pg_stage_assignments", "ab_pg_copy_assignments", plan.assignments)):
        queries.run(cur, stage)
        with queries.copy(cur, copy_in) as copy:
            copy.write(_csv_bytes(table))


def _pg_apply(conn, plan: AbPlan) -> tuple[int, int, int, int]:
    with conn.transaction(), conn.cursor() as cur:
        install_sql(conn)
        queries.run(cur, "ab_pg_ddl_lock")
        queries.run(cur, "ab_create_exclusions")
        queries.run(cur, "ab_create_assignments")
        _pg_stage(cur, plan)
        existing, differing = queries.run(cur, "ab_assignment_conflicts").fetchone()
        excluded, assigned = _insert_and_audit(cur, plan)
    return excluded, assigned, existing, differing


def _insert_and_audit(conn, plan: AbPlan) -> tuple[int, int]:
    """Insert the staged rows and, in the same transaction, one audit row per table listing the units inserted."""
    counts = []
    for insert, table in (("ab_insert_exclusions", "ab_exclusions"), ("ab_insert_assignments", "ab_assignments")):
        units = sorted(row[0] for row in queries.run(conn, insert).fetchall())
        audit.record_inserted(conn, plan.run_id, "ab-contamination", table, "test_id", plan.test_id, units)
        counts.append(len(units))
    return counts[0], counts[1]


def _duck_apply(con, plan: AbPlan) -> tuple[int, int, int, int]:
    con.register("ab_stage_exclusions", plan.exclusions)
    con.register("ab_stage_assignments", plan.assignments)
    try:
        install_sql(con)
        con.begin()
        queries.run(con, "ab_create_exclusions")
        queries.run(con, "ab_create_assignments")
        existing, differing = queries.run(con, "ab_assignment_conflicts").fetchone()
        counts = _insert_and_audit(con, plan)
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
    excluded, assigned, existing, differing = counts
    return AbApplied(plan.run_id, store.label, excluded, assigned, existing + plan.kept,
                     differing + plan.kept_differing)


def stored_assignment(store, test_id: str, unit: str) -> dict | None:
    """The sticky assignment stored for (test, unit), or None (also when the table does not exist)."""
    try:
        if not queries.run(store.conn, "ab_assignments_present").fetchone()[0]:
            return None
        install_sql(store.conn)
        row = queries.run(store.conn, "ab_lookup_assignment",
                          {"test_key": normalize_label(test_id), "unit": unit}).fetchone()
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
