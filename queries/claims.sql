-- Queries of `requeue-stale` (remediation/claims.py). The table and its columns are
-- {ident:...} placeholders (names checked by remediation.identifiers, quoted by the runner);
-- status values, durations and keys are always bound parameters.

-- name: requeue_sent_log_exists
-- Is there a durable sent-log table (sent_log) in this database? NULL when not.
-- dialect: postgres
SELECT to_regclass('sent_log') IS NOT NULL AS present

-- name: requeue_claimed_at_type
-- The claim-time column's type, read from an empty result (its type OID: 1114 timestamp, 1184 timestamptz).
-- dialect: postgres
SELECT t.{ident:claimed_at} AS claimed_at FROM {ident:table} AS t LIMIT 0

-- name: requeue_check_zone
-- Is :claimed_at_zone a time zone this server knows? (An unknown one raises.)
-- dialect: postgres
SELECT now() AT TIME ZONE CAST(:claimed_at_zone AS text) AS local_now

-- name: requeue_claimed_instant
-- Template: the claim time as an instant. A timestamptz column as it is; a timestamp column (no zone) read in
-- :claimed_at_zone, never in the session's TimeZone (claims.py refuses such a column without a zone).
-- dialect: postgres
(CASE WHEN CAST(:claimed_at_zone AS text) IS NULL THEN CAST(t.{ident:claimed_at} AS timestamptz)
      ELSE CAST(t.{ident:claimed_at} AS timestamp) AT TIME ZONE CAST(:claimed_at_zone AS text) END)

-- name: requeue_in_sent_log
-- Template: is lead t's person in the sent-log under a (campaign, step) in scope (an index probe)? The scope is a
-- rectangle of campaigns × steps, as resolve_scope selects it (tests/test_claims.py holds that).
-- dialect: postgres
EXISTS (
    SELECT 1
    FROM sent_log AS s
    WHERE s.campaign = ANY(CAST(:scope_campaigns AS text[]))
      AND s.step = ANY(CAST(:scope_steps AS text[]))
      AND s.recipient = pg_temp.mm_address(t.{ident:email}::text))

-- name: requeue_planned_in_sent_log
-- Template: requeue_in_sent_log for the planned lead p, by the address it was planned with (requeue_guard
-- checks the row still holds it).
-- dialect: postgres
EXISTS (
    SELECT 1
    FROM sent_log AS s
    WHERE s.campaign = ANY(CAST(:scope_campaigns AS text[]))
      AND s.step = ANY(CAST(:scope_steps AS text[]))
      AND s.recipient = pg_temp.mm_address(p.email))

-- name: requeue_lead_columns
-- The leads table's column names: has it a campaign or step column to limit the leads by (requeue_scope.lead_scope)?
-- dialect: postgres
SELECT column_name::text AS column_name FROM information_schema.columns
WHERE table_name = :table_name AND table_schema = coalesce(CAST(:table_schema AS text), current_schema())

-- name: requeue_scan_stale
-- In-progress claims older than the cutoff on the server's clock, with whether the lead is in the sent-log; only
-- leads of the --campaign/--step where the leads table has those columns (a NULL key: no limit).
-- dialect: postgres
SELECT t.{ident:lead_id} AS lead_key,
       t.{ident:lead_id}::text AS key_text,
       t.{ident:email}::text AS email,
       t.{ident:claimed_by}::text AS claimed_by,
       t.{ident:claimed_at} AS claimed_at,
       extract(epoch FROM t.{ident:claimed_at})::text AS claimed_epoch,
       extract(epoch FROM (now() - {block:requeue_claimed_instant}))::double precision AS age_s,
       {block:requeue_in_sent_log} AS already_sent
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_in_progress
  AND {block:requeue_claimed_instant} < now() - make_interval(secs => :older_than_s)
  AND (CAST(:lead_campaign_key AS text) IS NULL OR pg_temp.mm_label(t.{ident:lead_campaign}::text) = :lead_campaign_key)
  AND (CAST(:lead_step_key AS text) IS NULL OR pg_temp.mm_label(t.{ident:lead_step}::text) = :lead_step_key)
ORDER BY t.{ident:claimed_at}, t.{ident:lead_id}

-- name: requeue_reserved_unconfirmed
-- The in-progress leads whose person holds an unconfirmed send reservation (a send may have gone out): held,
-- never re-queued nor marked sent. Campaign and step NULL = any. Read from the reservations' side (they are
-- few): no list of keys goes to the server.
-- dialect: postgres
SELECT t.{ident:lead_id}::text AS key_text
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_in_progress
  AND EXISTS (
      SELECT 1 FROM send_reservation AS r
      WHERE r.key_kind = 'address' AND r.key_value = pg_temp.mm_address(t.{ident:email}::text) AND r.msg_id IS NULL
        AND (CAST(:campaign_key AS text) IS NULL OR pg_temp.mm_label(r.campaign) = :campaign_key)
        AND (CAST(:step_key AS text) IS NULL OR pg_temp.mm_label(r.step) = :step_key)
        AND NOT {block:reservation_in_sent_log})

-- name: requeue_count_no_claim_time
-- In-progress rows with no claim time: never stale by age, so never re-queued; reported for a human to look at.
-- dialect: postgres
SELECT count(*) AS n
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_in_progress AND t.{ident:claimed_at} IS NULL

-- name: requeue_sent_log_wait
-- For this transaction only: how long requeue_lock_sent_log may wait for the sent-log's writers (a backfill in
-- flight) to commit.
-- dialect: postgres
SELECT set_config('lock_timeout', CAST(:sent_log_wait AS text), true) AS lock_timeout

-- name: requeue_lock_sent_log
-- Wait for every transaction writing sent_log to commit and hold off new ones until this one commits, so every
-- later statement sees each send committed before the requeue writes, and none slips in between check and commit.
-- Taken first, before any other lock, so a writer waiting on it holds nothing this one waits for; readers go on.
-- dialect: postgres
LOCK TABLE sent_log IN SHARE MODE

-- name: requeue_apply_settings
-- For this transaction only, once the sent-log is locked: never wait long on a live worker's lock (everything else
-- uses SKIP LOCKED), memory to hash a large plan without spilling, and no JIT (row updates and index probes gain
-- nothing from it).
-- dialect: postgres
SELECT set_config('lock_timeout', '5s', true) AS lock_timeout, set_config('work_mem', '64MB', true) AS work_mem,
       set_config('jit', 'off', true) AS jit

-- name: requeue_read_settings
-- For this read-only transaction only: memory enough to sort a large scan without spilling it to disk, no JIT.
-- dialect: postgres
SELECT set_config('work_mem', '64MB', true) AS work_mem, set_config('jit', 'off', true) AS jit

-- name: requeue_planned_create
-- The plan's leads for this transaction only: the key in the table's own type (so joins use its index), the claim
-- each was planned on (claimer, exact claim time, address), and whether the sent-log proved it sent. Spelled
-- pg_temp.… so no table of that name on the search path stands in for it.
-- dialect: postgres
CREATE TEMPORARY TABLE pg_temp.mm_requeue_planned ON COMMIT DROP AS
SELECT t.{ident:lead_id} AS lead_key, CAST(NULL AS text) AS claimed_by, CAST(NULL AS numeric) AS claimed_epoch,
       CAST(NULL AS text) AS email, CAST(NULL AS boolean) AS to_sent
FROM {ident:table} AS t
WHERE false

-- name: requeue_planned_copy
-- Load the plan's leads, one COPY (each key as its text, read back by the key type's own input).
-- dialect: postgres
COPY pg_temp.mm_requeue_planned (lead_key, claimed_by, claimed_epoch, email, to_sent) FROM STDIN

-- name: requeue_planned_analyze
-- Tell the planner how many leads the plan holds (one or millions), so the joins below are chosen for it.
-- dialect: postgres
ANALYZE pg_temp.mm_requeue_planned

-- name: requeue_lock_planned
-- Lock the planned rows that no live transaction holds; the rest are reported as skipped.
-- dialect: postgres
SELECT t.{ident:lead_id}::text AS key_text
FROM {ident:table} AS t
WHERE t.{ident:lead_id} IN (SELECT p.lead_key FROM pg_temp.mm_requeue_planned AS p)
FOR UPDATE SKIP LOCKED

-- name: requeue_guard
-- Template: the planned stale claims (CTE planned) whose guard still holds: same claim (claimer, exact claim time,
-- address), still in progress, older than the cutoff. The callers lock these rows and update each by its ctid: a
-- locked row cannot move.
-- dialect: postgres
FROM {ident:table} AS t
    JOIN planned AS p ON p.lead_key = t.{ident:lead_id}
    WHERE t.{ident:status} = :status_in_progress
      AND {block:requeue_claimed_instant} < now() - make_interval(secs => :older_than_s)
      AND t.{ident:claimed_by}::text IS NOT DISTINCT FROM p.claimed_by
      AND extract(epoch FROM t.{ident:claimed_at}) = p.claimed_epoch
      AND t.{ident:email}::text IS NOT DISTINCT FROM p.email

-- name: requeue_to_queued
-- Put planned stale claims back to queued where the guard holds and the sent-log has no send; one audit row per
-- change. Returns each lead re-queued ('queued') or found sent since the plan ('sent-since-plan', left alone). The
-- sent-log is checked as a column on the plan's fenced rows, so the planner hashes it or probes its index, never a
-- rows × sends loop.
-- dialect: postgres
WITH planned AS MATERIALIZED (
    SELECT p.*, {block:requeue_planned_in_sent_log} AS in_sent_log
    FROM pg_temp.mm_requeue_planned AS p
    WHERE NOT p.to_sent
), prior AS (
    SELECT t.tableoid AS row_table, t.ctid AS row_id,
           t.{ident:status} AS status, t.{ident:claimed_by} AS claimed_by, t.{ident:claimed_at} AS claimed_at
    {block:requeue_guard}
      AND NOT p.in_sent_log
    FOR UPDATE OF t SKIP LOCKED
), changed AS (
    UPDATE {ident:table} AS t
    SET {ident:status} = :new_status, {ident:claimed_by} = NULL, {ident:claimed_at} = NULL
    FROM prior
    WHERE t.ctid = prior.row_id AND t.tableoid = prior.row_table
    RETURNING t.{ident:lead_id}::text AS key_text, prior.status AS old_status, prior.claimed_by AS old_claimed_by,
              prior.claimed_at AS old_claimed_at, t.{ident:status} AS new_status, t.{ident:claimed_by} AS new_claimed_by,
              t.{ident:claimed_at} AS new_claimed_at
), audited AS (
    INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
    SELECT CAST(:run_id AS text), 'requeue-stale', CAST(:table_name AS text), CAST(:key_column AS text), c.key_text,
           jsonb_build_object(CAST(:col_status AS text), c.old_status, CAST(:col_claimed_by AS text), c.old_claimed_by,
                              CAST(:col_claimed_at AS text), c.old_claimed_at),
           jsonb_build_object(CAST(:col_status AS text), c.new_status, CAST(:col_claimed_by AS text), c.new_claimed_by,
                              CAST(:col_claimed_at AS text), c.new_claimed_at),
           CAST(:os_user AS text)
    FROM changed AS c
    RETURNING row_key
)
SELECT a.row_key AS key_text, 'queued' AS outcome FROM audited AS a
UNION ALL
SELECT p.lead_key::text, 'sent-since-plan' FROM planned AS p WHERE p.in_sent_log

-- name: requeue_to_sent
-- Mark planned stale claims sent (the sent-log proves the email went out) where the guard still holds; one audit row per change.
-- dialect: postgres
WITH planned AS (
    SELECT p.* FROM pg_temp.mm_requeue_planned AS p WHERE p.to_sent
), prior AS (
    SELECT t.tableoid AS row_table, t.ctid AS row_id, t.{ident:status} AS status
    {block:requeue_guard}
    FOR UPDATE OF t SKIP LOCKED
), changed AS (
    UPDATE {ident:table} AS t
    SET {ident:status} = :new_status
    FROM prior
    WHERE t.ctid = prior.row_id AND t.tableoid = prior.row_table
    RETURNING t.{ident:lead_id}::text AS key_text, prior.status AS old_status, t.{ident:status} AS new_status
)
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
SELECT CAST(:run_id AS text), 'requeue-stale', CAST(:table_name AS text), CAST(:key_column AS text), c.key_text,
       jsonb_build_object(CAST(:col_status AS text), c.old_status),
       jsonb_build_object(CAST(:col_status AS text), c.new_status),
       CAST(:os_user AS text)
FROM changed AS c
RETURNING row_key

-- name: requeue_worst_batch
-- Longest claim→release span per (worker, shard) in ingested log events (DuckDB), with the longest lease seen.
-- dialect: duckdb
WITH ordered AS (
    SELECT worker, shard, ts, event,
           lead(event) OVER (PARTITION BY worker, shard ORDER BY ts) AS next_event,
           lead(ts) OVER (PARTITION BY worker, shard ORDER BY ts) AS next_ts
    FROM events
    WHERE event IN ('claim', 'release') AND shard IS NOT NULL
)
SELECT worker, shard, ts AS claimed_at, next_ts AS released_at,
       epoch(next_ts - ts) AS batch_s,
       (SELECT max(lease_s) FROM events WHERE event IN ('claim', 'renew')) AS max_lease_s
FROM ordered
WHERE event = 'claim' AND next_event = 'release'
ORDER BY batch_s DESC, worker, shard
LIMIT 1
