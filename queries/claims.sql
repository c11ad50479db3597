-- Queries of `requeue-stale` (remediation/claims.py). The table and its columns are
-- {ident:...} placeholders (names checked by remediation.identifiers, quoted by the runner);
-- status values, durations and keys are always bound parameters.

-- name: requeue_sent_log_exists
-- Is there a durable sent-log table (sent_log) in this database? NULL when not.
-- dialect: postgres
SELECT to_regclass('sent_log') IS NOT NULL AS present

-- name: requeue_scan_stale
-- In-progress claims older than the cutoff on the server's clock, with whether the lead is in the sent-log.
-- dialect: postgres
SELECT t.{ident:lead_id} AS lead_key,
       t.{ident:lead_id}::text AS key_text,
       t.{ident:email}::text AS email,
       t.{ident:claimed_by}::text AS claimed_by,
       t.{ident:claimed_at} AS claimed_at,
       extract(epoch FROM t.{ident:claimed_at})::text AS claimed_epoch,
       extract(epoch FROM (now() - t.{ident:claimed_at}))::double precision AS age_s,
       EXISTS (
           SELECT 1 FROM sent_log AS s
           WHERE s.recipient = pg_temp.mm_address(t.{ident:email}::text)
             AND (CAST(:campaign AS text) IS NULL OR s.campaign = :campaign)
             AND (CAST(:step AS text) IS NULL OR s.step = :step OR s.step = '')
       ) AS already_sent
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_in_progress
  AND t.{ident:claimed_at} < now() - make_interval(secs => :older_than_s)
ORDER BY t.{ident:claimed_at}, t.{ident:lead_id}

-- name: requeue_reserved_unconfirmed
-- Of the given stale leads, those whose person holds an unconfirmed send reservation (a send may have gone
-- out): held, never re-queued nor marked sent. Campaign and step NULL = any.
-- dialect: postgres
SELECT t.{ident:lead_id}::text AS key_text
FROM {ident:table} AS t
WHERE t.{ident:lead_id} = ANY(:keys)
  AND EXISTS (
      SELECT 1 FROM send_reservation AS r
      WHERE r.key_kind = 'address' AND r.key_value = pg_temp.mm_address(t.{ident:email}::text) AND r.msg_id IS NULL
        AND (CAST(:campaign AS text) IS NULL OR r.campaign = :campaign)
        AND (CAST(:step AS text) IS NULL OR r.step = :step)
        AND NOT EXISTS (
            SELECT 1 FROM sent_log AS s
            WHERE s.campaign = r.campaign AND (s.step = r.step OR s.step = '') AND s.recipient = r.recipient))

-- name: requeue_count_no_claim_time
-- In-progress rows with no claim time: never stale by age, so never re-queued; reported for a human to look at.
-- dialect: postgres
SELECT count(*) AS n
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_in_progress AND t.{ident:claimed_at} IS NULL

-- name: requeue_lock_timeout
-- For this transaction only: never wait long on a lock held by live workers (everything else uses SKIP LOCKED).
-- dialect: postgres
SELECT set_config('lock_timeout', '5s', true)

-- name: requeue_lock_planned
-- Lock the planned rows that no live transaction holds; the rest are reported as skipped.
-- dialect: postgres
SELECT t.{ident:lead_id}::text AS key_text
FROM {ident:table} AS t
WHERE t.{ident:lead_id} = ANY(:keys)
FOR UPDATE SKIP LOCKED

-- name: requeue_guard
-- Template: the planned stale claims (CTE planned) whose guard still holds: same claim (claimer and exact claim
-- time), still in progress and older than the cutoff. requeue_to_queued and requeue_to_sent lock these rows.
-- dialect: postgres
FROM {ident:table} AS t
    JOIN planned AS p ON p.key_text = t.{ident:lead_id}::text
    WHERE t.{ident:lead_id} = ANY(:keys)
      AND t.{ident:status} = :status_in_progress
      AND t.{ident:claimed_at} < now() - make_interval(secs => :older_than_s)
      AND t.{ident:claimed_by}::text IS NOT DISTINCT FROM p.claimed_by
      AND extract(epoch FROM t.{ident:claimed_at}) = p.claimed_epoch

-- name: requeue_to_queued
-- Put planned stale claims back to queued where the guard still holds (same claim, still old, not in the sent-log); one audit row per change.
-- dialect: postgres
WITH planned AS (
    SELECT * FROM unnest(CAST(:key_texts AS text[]), CAST(:claimed_bys AS text[]), CAST(:claimed_epochs AS numeric[]))
        AS p(key_text, claimed_by, claimed_epoch)
), prior AS (
    SELECT t.{ident:lead_id} AS lead_key, t.{ident:status} AS status, t.{ident:claimed_by} AS claimed_by, t.{ident:claimed_at} AS claimed_at
    {block:requeue_guard}
      AND NOT EXISTS (
          SELECT 1 FROM sent_log AS s
          WHERE s.recipient = pg_temp.mm_address(t.{ident:email}::text)
            AND (CAST(:campaign AS text) IS NULL OR s.campaign = :campaign)
            AND (CAST(:step AS text) IS NULL OR s.step = :step OR s.step = ''))
    FOR UPDATE OF t SKIP LOCKED
), changed AS (
    UPDATE {ident:table} AS t
    SET {ident:status} = :new_status, {ident:claimed_by} = NULL, {ident:claimed_at} = NULL
    FROM prior
    WHERE t.{ident:lead_id} = prior.lead_key
    RETURNING t.{ident:lead_id}::text AS key_text, prior.status AS old_status, prior.claimed_by AS old_claimed_by,
              prior.claimed_at AS old_claimed_at, t.{ident:status} AS new_status, t.{ident:claimed_by} AS new_claimed_by,
              t.{ident:claimed_at} AS new_claimed_at
)
INSERT INTO mailmortem_audit (run_id, command, table_name, key_column, row_key, old_values, new_values, os_user)
SELECT CAST(:run_id AS text), 'requeue-stale', CAST(:table_name AS text), CAST(:key_column AS text), c.key_text,
       jsonb_build_object(CAST(:col_status AS text), c.old_status, CAST(:col_claimed_by AS text), c.old_claimed_by,
                          CAST(:col_claimed_at AS text), c.old_claimed_at),
       jsonb_build_object(CAST(:col_status AS text), c.new_status, CAST(:col_claimed_by AS text), c.new_claimed_by,
                          CAST(:col_claimed_at AS text), c.new_claimed_at),
       CAST(:os_user AS text)
FROM changed AS c
RETURNING row_key

-- name: requeue_to_sent
-- Mark planned stale claims sent (the sent-log proves the email went out) where the guard still holds; one audit row per change.
-- dialect: postgres
WITH planned AS (
    SELECT * FROM unnest(CAST(:key_texts AS text[]), CAST(:claimed_bys AS text[]), CAST(:claimed_epochs AS numeric[]))
        AS p(key_text, claimed_by, claimed_epoch)
), prior AS (
    SELECT t.{ident:lead_id} AS lead_key, t.{ident:status} AS status
    {block:requeue_guard}
    FOR UPDATE OF t SKIP LOCKED
), changed AS (
    UPDATE {ident:table} AS t
    SET {ident:status} = :new_status
    FROM prior
    WHERE t.{ident:lead_id} = prior.lead_key
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
