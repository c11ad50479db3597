"""The durable sent-log: DDL, check-before-send, record-a-send and bulk backfill.

Every function takes a `remediation.store.Store` or a raw connection (psycopg 3 or
DuckDB). `already_sent` and `record_send` never commit: a claim loop calls them
inside its own transaction, and the record must commit together with the claim.
Campaign and step are compared in normal form (remediation.labels: `C1` is ` c1`, step `01`
is `1`); they are stored as given. What `sentlog check` answers is remediation.sentlog_check; what a backfill
from exports may write (every send's campaign, step and time read, or stated) is remediation.sentlog_backfill.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import queries
from forensics.addresses import install_sql, normalize_address, normalize_msg_id
from forensics.errors import DatabaseError, InputError
from remediation import audit, labels, reservations
from remediation.store import connection_kind

TABLE = "sent_log"
STAGE_COLUMNS = ("campaign", "step", "recipient", "candidate", "msg_id", "sent_at", "provider", "source_file")


def ensure_schema(conn_or_store: Any) -> None:
    """Create sent_log, its index and the send reservations if missing. Commits only when given a Store."""
    conn, kind = connection_kind(conn_or_store)
    owns = conn is not conn_or_store
    if kind == "postgres":
        queries.run(conn, "sent_log_pg_ddl_lock")
    queries.run(conn, "sent_log_create_table")
    queries.run(conn, "sent_log_create_index")
    reservations.ensure_tables(conn)
    if owns and kind == "postgres":
        conn.commit()


def already_sent(conn_or_store: Any, campaign: Any, step: Any, recipient: str) -> bool:
    """Has `recipient` already been sent `campaign` (and `step`, if given)?

    Campaign and step compare in normal form (`C1` is ` c1`, `01` is `1`). `step=None` matches
    any step; a recorded row whose step is unknown ('') matches every step, because holding one
    email back is cheaper than sending it twice. A send reservation counts as sent even
    unconfirmed (its sender may have emailed them). Addresses are normalised exactly as
    `diagnose` does. Never commits. A campaign the sent-log does not hold answers False here:
    `sentlog check` and the claim loop refuse it instead (labels.refuse_unmatched).
    """
    if recorded(conn_or_store, campaign, step, recipient):
        return True
    return reservations.for_address(conn_or_store, *labels.as_filter(campaign, step), recipient) is not None


def recorded(conn_or_store: Any, campaign: Any, step: Any, recipient: str,
             scope: labels.Scope | None = None) -> bool:
    """Does sent_log itself hold a send matching `already_sent`'s rule? (Reservations not counted.)

    `scope`: the sent-log's spellings of the campaign and step read before (labels.sent_log_scope), else now."""
    conn, _kind = connection_kind(conn_or_store)
    if scope is None:
        scope = labels.sent_log_scope(conn, *labels.as_filter(campaign, step))
    if not scope.campaigns:
        return False
    params = {**scope.params(), "recipient": normalize_address(recipient) or ""}
    row = queries.run(conn, "sent_log_already_sent", params).fetchone()
    return bool(row and row[0])


def last_send(conn_or_store: Any, campaign: Any, step: Any, recipient: str,
              scope: labels.Scope | None = None) -> dict | None:
    """The most recent recorded send matching `already_sent`'s rule, as a dict (or None).

    Without a recorded send, a reservation of the person is returned with `unconfirmed: True`
    (msg_id and sent_at None, reserved_at and worker set): it counts as sent.
    """
    conn, _kind = connection_kind(conn_or_store)
    if scope is None:
        scope = labels.sent_log_scope(conn, *labels.as_filter(campaign, step))
    params = {**scope.params(), "recipient": normalize_address(recipient) or ""}
    found = queries.one(conn, "sent_log_lookup", params) if scope.campaigns else None
    if found is not None:
        return found
    held = reservations.for_address(conn, *labels.as_filter(campaign, step), recipient)
    return None if held is None else {**held, "sent_at": None, "provider": None, "unconfirmed": True}


def table_present(conn_or_store: Any) -> bool:
    """Does sent_log exist? Asked by reads, which never create it."""
    conn, _kind = connection_kind(conn_or_store)
    return bool(queries.one(conn, "sent_log_present")["present"])


def record_send(conn_or_store: Any, campaign: Any, step: Any, recipient: str, msg_id: str,
                sent_at: dt.datetime | None = None, candidate: Any = None, provider: str | None = None,
                source_file: str | None = None) -> bool:
    """Insert one send unless (msg_id, recipient) is already there; True if inserted. Never commits."""
    conn, _kind = connection_kind(conn_or_store)
    recipient_n, msg_id_n = normalize_address(recipient), normalize_msg_id(msg_id)
    if not recipient_n or not msg_id_n:
        raise InputError("record_send needs a recipient and a msg_id")
    params = {
        "campaign": "" if campaign is None else str(campaign), "step": "" if step is None else str(step),
        "recipient": recipient_n, "candidate": None if candidate is None else str(candidate),
        "msg_id": msg_id_n, "sent_at": sent_at, "provider": provider, "source_file": source_file,
    }
    return queries.run(conn, "sent_log_record_send", params).fetchone() is not None


def count_rows(conn_or_store: Any) -> int:
    conn, _kind = connection_kind(conn_or_store)
    return int(queries.run(conn, "sent_log_count").fetchone()[0])


# --------------------------------------------------------------------------- backfill


@dataclass
class LoadResult:
    staged: int = 0
    inserted: int = 0
    already_present: int = 0
    target: str = ""
    extra: dict = field(default_factory=dict)
    filled: int = 0  # stored rows whose blanks the export filled
    disagreeing: int = 0  # stored rows whose campaign, step or candidate disagrees with the export (left as they are)
    differences: list = field(default_factory=list)  # the first SHOWN_DIFFERENCES of them


SHOWN_DIFFERENCES = 20
NOTHING_STORED = {"present": 0, "to_fill": 0, "disagreeing": 0, "differences": []}  # the plan over a new/empty table


def _stage_table(sends: Any):
    """The sends (pyarrow Table or polars DataFrame) as an Arrow table of the stage columns."""
    import pyarrow as pa

    if not isinstance(sends, pa.Table):
        sends = sends.to_arrow()
    missing = [c for c in STAGE_COLUMNS if c not in sends.column_names]
    for name in missing:
        sends = sends.append_column(name, pa.nulls(sends.num_rows, pa.string()))
    sends = sends.select(list(STAGE_COLUMNS))
    schema = pa.schema([(c, pa.timestamp("us", tz="UTC") if c == "sent_at" else pa.string()) for c in STAGE_COLUMNS])
    return sends.cast(schema)


def _deduplicated(sends: Any):
    """One row per (msg_id, recipient), the earliest send first, as an Arrow table (for a DuckDB target)."""
    con = _dedup_connection(sends)
    try:
        return queries.arrow(con, "sent_log_dedup_rows")
    finally:
        con.close()


def _dedup_connection(sends: Any, unique_keys: bool = False):
    """A scratch DuckDB with view sent_log_dedup over `sends`: duplicates resolved before any database sees them,
    so the target only ever gets unique rows (no server-side sort or window; a first load can COPY straight in)."""
    import duckdb

    con = _scratch_duckdb()
    try:
        con.register("sent_log_sends_in", _stage_table(sends))
        queries.run(con, "sent_log_unique_view" if unique_keys else "sent_log_dedupe_view")
    except duckdb.Error as exc:
        con.close()
        raise DatabaseError(f"backfill failed preparing rows: {str(exc).strip().splitlines()[0]}") from None
    return con


def _scratch_duckdb():
    import duckdb

    con = duckdb.connect()
    queries.run(con, "provider_session_utc")
    queries.script(con, "address_duckdb_macro")
    return con


def backfill(store: Any, sends: Any, unique_keys: bool = False,
             clock_margin_s: float = reservations.CLOCK_MARGIN_S, on_plan=None) -> LoadResult:
    """Load sends into sent_log in ONE transaction, one row per (msg_id, recipient); re-running inserts 0.

    A row already there keeps every value it holds; the blanks the export can fill (campaign or step '', no send
    time, no candidate) are filled in the same transaction, unless the row disagrees with the export in a
    campaign, step or candidate (then it is counted and listed, never changed). `on_plan(compared)` is called
    before the write with what is present, to fill and disagreeing (sent_log_stage_compare).

    The same transaction settles send reservations (remediation.reservations): those the sent-log
    now shows sent are confirmed, and those it shows unsent are released when the sends reach
    `clock_margin_s` past the reservation (see reconcile_after_backfill); `extra["reservations"]`.

    `unique_keys=True` promises at most one row per (msg_id, recipient) (one provider's collapsed
    rows) and lets PostgreSQL skip the dedupe; a broken promise fails on the table's unique key and
    loads nothing. DuckDB targets always dedupe.
    """
    conn, kind = connection_kind(store)
    run_id = audit.new_run_id()
    settle = _reservation_settler(sends, clock_margin_s, run_id)
    plan = on_plan or (lambda compared: None)
    if kind == "postgres":
        (inserted, unique, compared), settled = _backfill_postgres(conn, sends, unique_keys, settle, plan)
    else:
        table = _deduplicated(sends)
        (inserted, compared), settled = _backfill_duckdb(conn, table, settle, plan)
        unique = table.num_rows
    return LoadResult(staged=len(sends), inserted=inserted, already_present=unique - inserted,
                      extra={"reservations": settled["reservations"], "run_id": run_id},
                      filled=settled["filled"], disagreeing=compared["disagreeing"],
                      differences=compared["differences"])


def _reservation_settler(sends: Any, clock_margin_s: float, run_id: str):
    """What the backfill runs last, in its transaction: its audit rows (the keys it inserted, the blanks it filled),
    then the reservations the new rows confirm or prove unsent."""
    import pyarrow.compute as pc

    newest = pc.max(_stage_table(sends).column("sent_at")).as_py()

    def settle(conn, fills: list[dict]):
        audit.record_backfill(conn, run_id)
        audit.record_fills(conn, run_id, fills)
        return {"reservations": reservations.reconcile_after_backfill(conn, newest, clock_margin_s),
                "filled": len(fills)}

    return settle


def _compare(conn: Any, plan) -> dict:
    """The staged sends against sent_log (sent_log_stage_compare, and the first disagreements), handed to `plan`."""
    install_sql(conn)
    queries.run(conn, "sent_log_stage_compared_drop")
    queries.run(conn, "sent_log_stage_compared_create")
    compared = queries.one(conn, "sent_log_stage_compare")
    compared["differences"] = queries.rows(conn, "sent_log_stage_differences", {"limit": SHOWN_DIFFERENCES})
    plan(compared)
    return compared


def _fill(conn: Any) -> list[dict]:
    """Fill the blanks the staged export completes; the rows filled, before and after (for the audit)."""
    fills = queries.rows(conn, "sent_log_stage_fills")
    if fills:
        queries.run(conn, "sent_log_fill_from_stage")
    queries.run(conn, "sent_log_stage_compared_drop")
    return fills


def _backfill_postgres(conn: Any, sends, unique_keys: bool, settle, plan) -> tuple[tuple, dict]:
    """((inserted, unique rows, compared), settled). One transaction, other writers held off."""
    import duckdb
    import psycopg

    try:
        with conn.transaction():
            inserted, unique, compared, fills = _load_postgres(conn, sends, unique_keys, plan)
            return (inserted, unique, compared), settle(conn, fills)
    except (psycopg.Error, duckdb.Error) as exc:
        raise DatabaseError(f"backfill failed: {str(exc).strip().splitlines()[0]}") from None


def _load_postgres(conn: Any, sends, unique_keys: bool, plan) -> tuple[int, int, dict, list]:
    """(inserted, unique rows, compared, fills): a new sent_log is loaded first and indexed after; an empty one
    takes a COPY straight in; otherwise COPY to a stage, insert what it lacks and fill what its rows lack."""
    queries.run(conn, "sent_log_pg_ddl_lock")
    created = queries.run(conn, "sent_log_pg_missing").fetchone()[0]
    ensure_schema(conn)
    queries.run(conn, "sent_log_lock_writers")
    if created or queries.run(conn, "sent_log_is_empty").fetchone()[0]:
        plan(dict(NOTHING_STORED))
        copied = _load_new_table(conn, sends, unique_keys) if created else _copy_rows(conn, "sent_log_copy", sends,
                                                                                        unique_keys)
        return copied, copied, dict(NOTHING_STORED), []
    return _merge_via_stage(conn, sends, unique_keys, plan)


def _load_new_table(conn: Any, sends, unique_keys: bool) -> int:
    """sent_log was created by this transaction, so nobody else sees it: drop its indexes, COPY, rebuild them
    (one sort each instead of a B-tree insert per row). The schema ends up exactly as ensure_schema makes it."""
    queries.run(conn, "sent_log_pg_drop_unique")
    queries.run(conn, "sent_log_pg_drop_index")
    copied = _copy_rows(conn, "sent_log_copy", sends, unique_keys, rows="sent_log_csv_rows_by_lookup")
    queries.run(conn, "sent_log_pg_index_memory")
    queries.run(conn, "sent_log_pg_add_unique")
    queries.run(conn, "sent_log_create_index")
    return copied


def _merge_via_stage(conn: Any, sends, unique_keys: bool, plan) -> tuple[int, int, dict, list]:
    queries.run(conn, "sent_log_stage_drop")
    queries.run(conn, "sent_log_stage_create")
    unique = _copy_rows(conn, "sent_log_stage_copy", sends, unique_keys)
    queries.run(conn, "sent_log_stage_analyze")
    compared = _compare(conn, plan)
    inserted = queries.run(conn, "sent_log_merge_stage_locked").rowcount
    fills = _fill(conn)
    queries.run(conn, "sent_log_stage_drop")
    return int(inserted), unique, compared, fills


def _copy_rows(conn: Any, name: str, sends, unique_keys: bool, rows: str = "sent_log_csv_rows_by_key") -> int:
    """COPY the deduplicated sends as CSV, streamed: DuckDB dedupes and renders the times, Arrow writes the
    CSV per batch (no per-row Python) while PostgreSQL parses the previous one.

    Arrow quotes every string and leaves nulls bare, which is exactly how PostgreSQL's
    CSV format tells '' from NULL. Returns the number of rows copied.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = pacsv.WriteOptions(include_header=False, batch_size=65_536)
    con = _dedup_connection(sends, unique_keys)
    try:
        with conn.cursor() as cursor:
            with queries.copy(cursor, name) as copy:
                for batch in queries.arrow_reader(con, rows, 100_000):
                    sink = pa.BufferOutputStream()
                    pacsv.write_csv(pa.Table.from_batches([batch]), sink, write_options=options)
                    copy.write(sink.getvalue())
            return cursor.rowcount
    finally:
        con.close()


def _backfill_duckdb(conn: Any, table, settle, plan) -> tuple[tuple[int, dict], dict]:
    import duckdb

    try:
        conn.begin()
        try:
            ensure_schema(conn)
            queries.run(conn, "sent_log_stage_drop")
            queries.run(conn, "sent_log_stage_create")
            conn.register("sent_log_arrow", table)
            queries.run(conn, "sent_log_stage_from_arrow")
            compared = _compare(conn, plan)
            inserted = queries.run(conn, "sent_log_merge_stage").fetchone()[0]
            fills = _fill(conn)
            queries.run(conn, "sent_log_stage_drop")
            settled = settle(conn, fills)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.unregister("sent_log_arrow")
        return (int(inserted), compared), settled
    except duckdb.Error as exc:
        raise DatabaseError(f"backfill failed: {str(exc).strip().splitlines()[0]}") from None


def backfill_exports(store, read, **options) -> dict:
    """remediation.sentlog_backfill.backfill_exports (kept here for the callers that know the sent-log by this name)."""
    from remediation import sentlog_backfill

    return sentlog_backfill.backfill_exports(store, read, **options)
