-- The audit trail of remediation runs (remediation/audit.py): one row per changed
-- row, with old and new values as JSON keyed by the real column names.

-- name: audit_ddl_lock
-- Serialise concurrent first-time creation of the audit table (transaction-scoped).
-- dialect: postgres
SELECT pg_advisory_xact_lock(hashtextextended('mailmortem_audit ddl', 0))

-- name: audit_create_table
-- One row per row a remediation run changed: who, when, which row, old → new values.
-- dialect: postgres
CREATE TABLE IF NOT EXISTS mailmortem_audit (
    id          BIGSERIAL PRIMARY KEY,
    run_id      TEXT NOT NULL,
    command     TEXT NOT NULL,
    table_name  TEXT NOT NULL,
    key_column  TEXT NOT NULL,
    row_key     TEXT NOT NULL,
    old_values  JSONB NOT NULL,
    new_values  JSONB NOT NULL,
    db_user     TEXT NOT NULL DEFAULT current_user,
    os_user     TEXT,
    changed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    undoes      TEXT
)

-- name: audit_create_index
-- Reports and undo look a run up by its id.
-- dialect: postgres
CREATE INDEX IF NOT EXISTS mailmortem_audit_run_id ON mailmortem_audit (run_id)

-- name: audit_table_exists
-- Is there an audit table in this database?
-- dialect: postgres
SELECT to_regclass('mailmortem_audit') IS NOT NULL AS present

-- name: audit_run_command
-- The command one run was made by (NULL when the run is unknown): all undo needs to know before reading it.
-- dialect: duckdb postgres
SELECT command FROM mailmortem_audit WHERE run_id = :run_id LIMIT 1

-- name: audit_run_rows
-- Everything one run changed, in the order it changed it.
-- dialect: duckdb postgres
SELECT id, run_id, command, table_name, key_column, row_key, old_values, new_values,
       db_user, os_user, changed_at, undoes
FROM mailmortem_audit
WHERE run_id = :run_id
ORDER BY id

-- name: audit_recent_runs
-- The most recent runs, one line each, newest first.
-- dialect: duckdb postgres
SELECT run_id, command, table_name, count(*) AS rows_changed, min(changed_at) AS changed_at,
       min(db_user) AS db_user, min(os_user) AS os_user, min(undoes) AS undoes
FROM mailmortem_audit
GROUP BY run_id, command, table_name
ORDER BY min(changed_at) DESC, run_id
LIMIT :limit

-- name: audit_run_groups
-- A run's audit rows grouped by table, key column and the set of columns changed (one undo statement each).
-- dialect: postgres
SELECT table_name, key_column, cols, array_agg(id ORDER BY id) AS ids
FROM (
    SELECT id, table_name, key_column, ARRAY(SELECT jsonb_object_keys(old_values) ORDER BY 1) AS cols
    FROM mailmortem_audit
    WHERE run_id = :run_id
) AS entries
GROUP BY table_name, key_column, cols
ORDER BY table_name, key_column, cols

-- name: audit_undo_history
-- Template: the undo group's audit rows (:ids), each with what the audit trail holds of its row since: whether a
-- run other than an undo changed it again (another_run: a later requeue-stale of a lead re-claimed in between), and
-- which run the last such change undid (last_undoes: NULL when none, or when the last was no undo).
-- dialect: postgres
SELECT e.id, e.run_id, e.row_key, e.old_values, e.new_values,
       coalesce(bool_or(a.command <> 'audit --undo'), false) AS another_run,
       (array_agg(a.undoes ORDER BY a.id DESC))[1] AS last_undoes
FROM mailmortem_audit AS e
LEFT JOIN mailmortem_audit AS a
       ON a.table_name = e.table_name AND a.key_column = e.key_column AND a.row_key = e.row_key AND a.id > e.id
WHERE e.id = ANY(:ids)
GROUP BY e.id

-- name: audit_row_holds_new_values
-- Template: row t holds audit row e's new values, compared column by column through the table's own types.
-- dialect: postgres
NOT EXISTS (
    SELECT 1 FROM jsonb_object_keys(e.new_values) AS k(col)
    WHERE to_jsonb(t) -> k.col
          IS DISTINCT FROM to_jsonb(jsonb_populate_record(NULL::{ident:table}, e.new_values)) -> k.col)

-- name: audit_row_holds_old_values
-- Template: row t holds audit row e's old values, compared column by column through the table's own types.
-- dialect: postgres
NOT EXISTS (
    SELECT 1 FROM jsonb_object_keys(e.old_values) AS k(col)
    WHERE to_jsonb(t) -> k.col
          IS DISTINCT FROM to_jsonb(jsonb_populate_record(NULL::{ident:table}, e.old_values)) -> k.col)

-- name: audit_undo_states
-- For a group of a run's audit rows: may undo restore each row (it holds the run's new values and no other run has
-- changed it since), did an undo of the run restore it (the row's last audited change, and it still holds the old
-- values), or did anything else change it? Holding the old values is no proof of a restore: a worker re-claiming a
-- lead writes them too.
-- dialect: postgres
WITH entries AS (
    {block:audit_undo_history}
)
SELECT e.id, e.row_key,
       CASE
           WHEN t.{ident:key_column} IS NULL THEN 'row gone'
           WHEN NOT e.another_run AND {block:audit_row_holds_new_values} THEN 'restorable'
           WHEN e.last_undoes = e.run_id AND {block:audit_row_holds_old_values}
               THEN 'already restored'
           ELSE 'changed since the run'
       END AS state
FROM entries AS e
LEFT JOIN {ident:table} AS t ON t.{ident:key_column}::text = e.row_key
ORDER BY e.id

-- name: audit_undo_group
-- Restore a group's rows that are restorable as audit_undo_states says (skipping rows locked right now); audit each
-- restore.
-- dialect: postgres
WITH entries AS (
    {block:audit_undo_history}
), target AS (
    SELECT t.{ident:key_column} AS row_id, e.row_key, e.old_values, e.new_values
    FROM {ident:table} AS t
    JOIN entries AS e ON e.row_key = t.{ident:key_column}::text
    WHERE NOT e.another_run AND {block:audit_row_holds_new_values}
    FOR UPDATE OF t SKIP LOCKED
), restored AS (
    UPDATE {ident:table} AS t
    SET ({idents:cols}) = (SELECT {idents:r_cols} FROM jsonb_populate_record(NULL::{ident:table}, target.old_values) AS r)
    FROM target
    WHERE t.{ident:key_column} = target.row_id
    RETURNING target.row_key, target.old_values, target.new_values
)
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user, undoes)
SELECT CAST(:undo_run_id AS text), 'audit --undo', CAST(:table_name AS text), CAST(:key_column_name AS text),
       r.row_key, r.new_values, r.old_values,
       CAST(:os_user AS text), CAST(:run_id AS text)
FROM restored AS r
RETURNING row_key

-- name: audit_duckdb_create_sequence
-- DuckDB: the audit rows' id sequence (PostgreSQL's BIGSERIAL).
-- dialect: duckdb
CREATE SEQUENCE IF NOT EXISTS mailmortem_audit_id

-- name: audit_duckdb_create_table
-- DuckDB: the same audit table, old and new values as JSON text (a DuckDB file holds the A/B tables and sent_log).
-- dialect: duckdb
CREATE TABLE IF NOT EXISTS mailmortem_audit (
    id          BIGINT PRIMARY KEY DEFAULT nextval('mailmortem_audit_id'),
    run_id      TEXT NOT NULL,
    command     TEXT NOT NULL,
    table_name  TEXT NOT NULL,
    key_column  TEXT NOT NULL,
    row_key     TEXT NOT NULL,
    old_values  TEXT NOT NULL,
    new_values  TEXT NOT NULL,
    db_user     TEXT NOT NULL DEFAULT 'duckdb',
    os_user     TEXT,
    changed_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    undoes      TEXT
)

-- name: audit_duckdb_table_exists
-- DuckDB: is there an audit table in the current schema?
-- dialect: duckdb
SELECT count(*) > 0 AS present FROM duckdb_tables()
WHERE table_name = 'mailmortem_audit' AND schema_name = current_schema()

-- name: audit_record_pg
-- One audit row of a run that inserted rows (a backfill, an A/B apply): the keys it inserted, as JSON.
-- dialect: postgres
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
VALUES (:run_id, :command, :table_name, :key_column, :row_key, CAST(:old_values AS JSONB), CAST(:new_values AS JSONB),
        :os_user)

-- name: audit_record_duckdb
-- DuckDB: one audit row of a run that inserted rows, the keys it inserted as JSON text.
-- dialect: duckdb
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
VALUES (:run_id, :command, :table_name, :key_column, :row_key, :old_values, :new_values, :os_user)

-- name: audit_record_backfill_pg
-- PostgreSQL: a backfill's one audit row, listing the (msg_id, recipient) keys it inserted: the sent_log rows
-- stamped with this transaction's now() (the backfill holds other writers off, so no one else's rows are).
-- dialect: postgres
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
SELECT :run_id, 'backfill-sentlog', 'sent_log', 'msg_id,recipient', count(*) || ' rows', '{}'::jsonb,
       jsonb_build_object('inserted', coalesce(jsonb_agg(jsonb_build_array(msg_id, recipient)
                                                         ORDER BY msg_id, recipient), '[]'::jsonb)),
       :os_user
FROM sent_log
WHERE ingested_at = now()
