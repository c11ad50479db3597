"""The audit trail of remediation runs, the `audit` report and `audit --undo`.

Every change a remediation makes is written, in the same transaction, to
`mailmortem_audit`: run id (`2026-11-30T10:12:03Z-7f3a`), table, key column, row
key, old → new values as JSON keyed by the real column names, the database user
and the OS user, and when. Undo restores the old values of rows that still hold
the run's new values and that no later run changed — a row anybody touched since is
left alone and reported, as is one holding the old values that no undo of the run
wrote (a worker claimed it again).
Undo is itself audited (its rows point back with `undoes`), so it can be undone.
"""

from __future__ import annotations

import datetime as dt
import getpass
import secrets
from dataclasses import dataclass, field
from typing import Any

import queries
from forensics.errors import DatabaseError, MailmortemError
from remediation.errors import RefusedError
from remediation.identifiers import parse_name, parse_table

AUDIT_COLUMNS = ("id", "run_id", "command", "table_name", "key_column", "row_key", "old_values",
                 "new_values", "db_user", "os_user", "changed_at", "undoes")


def new_run_id(now: dt.datetime | None = None) -> str:
    """`2026-11-30T10:12:03Z-7f3a`: UTC second plus 4 random hex digits."""
    now = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    return f"{now:%Y-%m-%dT%H:%M:%SZ}-{secrets.token_hex(2)}"


def os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): still say something
        return "unknown"


# Runs that only insert rows: undoing them would delete what they recorded.
NOT_UNDOABLE = {
    "backfill-sentlog": "it would make the people it recorded \"not sent\", and they would be emailed again; "
                        "to mend what it wrote, run backfill-sentlog again with the options that read more of the "
                        "export (--map, --campaign-key, --step-key): it fills the blanks of the rows it wrote and "
                        "reports, never overwrites, a value that disagrees",
    "ab-contamination": "it would drop sticky assignments and exclusions people were already given",
}


def _duckdb(conn) -> bool:
    return queries.dialect_of(conn) == "duckdb"


def ensure_table(conn) -> None:
    """Create the audit table if missing (PostgreSQL or DuckDB). Runs inside the caller's transaction."""
    if _duckdb(conn):
        queries.run(conn, "audit_duckdb_create_sequence")
        queries.run(conn, "audit_duckdb_create_table")
        return
    queries.run(conn, "audit_ddl_lock")
    queries.run(conn, "audit_create_table")
    queries.run(conn, "audit_create_index")


def table_exists(conn) -> bool:
    return bool(queries.run(conn, "audit_duckdb_table_exists" if _duckdb(conn) else "audit_table_exists").fetchone()[0])


def record_inserted(conn, run_id: str, command: str, table_name: str, key_column: str, row_key: str,
                    keys: list) -> None:
    """One audit row for a run that inserted rows: `new_values` lists the inserted keys. Creates the audit table
    if missing; runs inside the caller's transaction, so the run and its audit commit together."""
    _record(conn, run_id, command, table_name, key_column, row_key, {}, {"inserted": keys})


def _record(conn, run_id: str, command: str, table_name: str, key_column: str, row_key: str, old: dict,
            new: dict) -> None:
    import json

    ensure_table(conn)
    params = {"run_id": run_id, "command": command, "table_name": table_name, "key_column": key_column,
              "row_key": row_key, "old_values": json.dumps(old), "new_values": json.dumps(new),
              "os_user": os_user()}
    queries.run(conn, "audit_record_duckdb" if _duckdb(conn) else "audit_record_pg", params)


FILLED = ("campaign", "step", "sent_at", "candidate")


def record_fills(conn, run_id: str, fills: list[dict]) -> None:
    """A backfill's second audit row, when it filled blanks of stored rows (sent_log_stage_fills): per row its key
    and the columns filled, before (old_values) and after (new_values). Nothing when it filled none."""
    if not fills:
        return
    old = [[f["msg_id"], f["recipient"], {c: _plain(f[f"old_{c}"]) for c in FILLED if f[f"fill_{c}"]}] for f in fills]
    new = [[f["msg_id"], f["recipient"], {c: _plain(f[c]) for c in FILLED if f[f"fill_{c}"]}] for f in fills]
    _record(conn, run_id, "backfill-sentlog", "sent_log", "msg_id,recipient", f"{len(fills)} rows filled",
            {"filled": old}, {"filled": new})


def _plain(value):
    return value.isoformat() if isinstance(value, dt.datetime) else value


def record_backfill(conn, run_id: str) -> None:
    """The backfill's one audit row: the (msg_id, recipient) keys this transaction inserted into sent_log."""
    if not _duckdb(conn):
        ensure_table(conn)
        queries.run(conn, "audit_record_backfill_pg", {"run_id": run_id, "os_user": os_user()})
        return
    keys = [[msg_id, recipient] for msg_id, recipient in queries.run(conn, "sent_log_inserted_now").fetchall()]
    record_inserted(conn, run_id, "backfill-sentlog", "sent_log", "msg_id,recipient", f"{len(keys)} rows", keys)


def run_rows(conn, run_id: str) -> list[dict]:
    """Every audit row of one run (empty if the run is unknown)."""
    import json

    if not table_exists(conn):
        return []
    rows = queries.rows(conn, "audit_run_rows", {"run_id": run_id})
    if _duckdb(conn):  # JSON kept as text there
        rows = [dict(r, old_values=json.loads(r["old_values"]), new_values=json.loads(r["new_values"])) for r in rows]
    return rows


def recent_runs(conn, limit: int = 20) -> list[dict]:
    if not table_exists(conn):
        return []
    return queries.rows(conn, "audit_recent_runs", {"limit": limit})


@dataclass(frozen=True)
class UndoGroup:
    """The audit rows of one run sharing a table, key column and set of changed columns."""

    table_name: str
    key_column: str
    columns: tuple[str, ...]
    ids: tuple[int, ...]

    def idents(self) -> dict:
        """Values for the {ident:...} placeholders of the undo queries; a hostile name is refused."""
        table = parse_table(self.table_name)
        key = parse_name(self.key_column, "key column")
        cols = [parse_name(name, "column name") for name in self.columns]
        return {"table": table.ident(), "key_column": key, "cols": cols, "r_cols": [("r", c) for c in cols]}


def undo_groups(conn, run_id: str) -> list[UndoGroup]:
    """The run's audit rows as undo groups; hostile stored names are refused, never executed."""
    rows = queries.run(conn, "audit_run_groups", {"run_id": run_id}).fetchall()
    groups = [UndoGroup(t, k, tuple(cols), tuple(ids)) for t, k, cols, ids in rows]
    for group in groups:
        group.idents()  # validates every name before anything runs
    return groups


def row_states(conn, group: UndoGroup) -> list[dict]:
    """Per audit row: 'restorable', 'already restored' (by an undo of this run: the old values alone prove
    nothing), 'changed since the run' or 'row gone'."""
    idents = group.idents()
    rows = queries.run(conn, "audit_undo_states", {"ids": list(group.ids)}, table=idents["table"],
                       key_column=idents["key_column"]).fetchall()
    return [{"table": group.table_name, "row_key": key, "state": state} for _id, key, state in rows]


@dataclass
class UndoResult:
    run_id: str
    undo_run_id: str | None
    applied: bool
    restored: list[dict] = field(default_factory=list)  # {table, row_key, state: "restored"}
    left: list[dict] = field(default_factory=list)  # rows not restored, with why
    preview: list[dict] = field(default_factory=list)

    @property
    def summary(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for row in self.left if self.applied else self.preview:
            counts[row["state"]] = counts.get(row["state"], 0) + 1
        if self.applied:
            counts["restored"] = len(self.restored)
        return counts


def _require_run(conn, run_id: str) -> list[UndoGroup]:
    if not table_exists(conn):
        raise RefusedError("no audit table (mailmortem_audit) in this database: nothing to undo")
    groups = undo_groups(conn, run_id)
    if not groups:
        raise RefusedError(f"no audit rows for run {run_id}: check the run id with `mailmortem audit`")
    return groups


def _refuse_insert_only(conn, run_id: str) -> None:
    row = queries.one(conn, "audit_run_command", {"run_id": run_id}) if table_exists(conn) else None
    command = row["command"] if row else None
    if command in NOT_UNDOABLE:
        raise RefusedError(f"run {run_id} ({command}): undo is refused, {NOT_UNDOABLE[command]}")
    if _duckdb(conn):
        raise RefusedError("undo needs PostgreSQL: DuckDB files only hold runs that are not undone")


def undo(conn, run_id: str, apply: bool = False) -> UndoResult:
    """Dry-run (default): say what undo would restore. Apply: restore in ONE transaction.
    A run that only inserted rows (a backfill, an A/B apply) is refused."""
    _refuse_insert_only(conn, run_id)
    if not apply:
        groups = _require_run(conn, run_id)
        preview = [state for group in groups for state in row_states(conn, group)]
        conn.rollback()
        return UndoResult(run_id, None, False, preview=preview)
    conn.rollback()  # start clean, so the transaction below is the outermost one and commits
    result = UndoResult(run_id, new_run_id(), True)
    try:
        with conn.transaction():
            for group in _require_run(conn, run_id):
                _undo_group(conn, group, result)
    except MailmortemError:
        raise
    except Exception as exc:
        raise DatabaseError(f"undo of {run_id} rolled back, nothing changed: {_first_line(exc)}") from None
    return result


def _undo_group(conn, group: UndoGroup, result: UndoResult) -> None:
    idents = group.idents()
    params = {"ids": list(group.ids), "undo_run_id": result.undo_run_id, "run_id": result.run_id,
              "table_name": group.table_name, "key_column_name": group.key_column, "os_user": os_user()}
    restored = {row[0] for row in queries.run(conn, "audit_undo_group", params, **idents).fetchall()}
    result.restored.extend({"table": group.table_name, "row_key": key, "state": "restored"}
                           for key in sorted(restored))
    for state in row_states(conn, group):
        if state["row_key"] not in restored:
            result.left.append(state if state["state"] != "restorable" else {**state, "state": "locked right now"})


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
