-- The reference claim loop (remediation/claimloop.py) and the job-level lock
-- (remediation/joblock.py). The table, its columns and the sequence are {ident:...}
-- placeholders; every value is a bound parameter.

-- name: claimloop_ddl_lock
-- Serialise concurrent first-time setup of the fencing column and sequence (transaction-scoped).
-- dialect: postgres
SELECT pg_advisory_xact_lock(hashtextextended('mailmortem claimloop ddl', 0))

-- name: claimloop_token_column_exists
-- Does the leads table already have the fencing-token column? (Checked first: ALTER takes an exclusive lock.)
-- dialect: postgres
SELECT EXISTS (
    SELECT 1 FROM pg_attribute
    WHERE attrelid = CAST(:table AS regclass) AND attname = :column AND attnum > 0 AND NOT attisdropped
) AS present

-- name: claimloop_add_token_column
-- The fencing token of the claim that holds a lead; only ever grows.
-- dialect: postgres
ALTER TABLE {ident:table} ADD COLUMN IF NOT EXISTS {ident:claim_token} BIGINT

-- name: claimloop_create_sequence
-- Source of fencing tokens: one new, larger value per claimed batch.
-- dialect: postgres
CREATE SEQUENCE IF NOT EXISTS {ident:sequence}

-- name: claimloop_sequence_exists
-- Does the fencing-token sequence exist yet?
-- dialect: postgres
SELECT to_regclass(:sequence) IS NOT NULL AS present

-- name: claimloop_claim_batch
-- Atomically claim up to :batch_size queued leads under one new fencing token, skipping rows others are claiming. A
-- lead without an address, or whose person holds an unconfirmed reservation for this step (in normal form), waits:
-- a send may be out. {frag:candidate}: the candidate column, or NULL.
-- dialect: postgres
-- fragments: candidate=NULL|claimloop_candidate_column
WITH picked AS (
    SELECT t.{ident:lead_id} AS lead_key
    FROM {ident:table} AS t
    WHERE (t.{ident:status} = :status_queued
           OR (CAST(:reclaim_expired AS boolean)
               AND t.{ident:status} = :status_in_progress
               AND t.{ident:claimed_at} < now() - make_interval(secs => :lease_s)))
      AND pg_temp.mm_address(t.{ident:email}::text) IS NOT NULL
      AND NOT EXISTS (
          SELECT 1 FROM send_reservation AS r
          WHERE pg_temp.mm_label(r.campaign) = :campaign_key AND pg_temp.mm_label(r.step) = :step_key
            AND r.msg_id IS NULL
            AND ((r.key_kind = 'address' AND r.key_value = pg_temp.mm_address(t.{ident:email}::text))
                 OR (r.key_kind = 'candidate' AND r.key_value = CAST({frag:candidate} AS text)))
            AND NOT {block:reservation_in_sent_log})
    ORDER BY t.{ident:lead_id}
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED
), token AS (
    SELECT nextval(CAST(:sequence AS regclass)) AS value
)
UPDATE {ident:table} AS t
SET {ident:status} = :status_in_progress, {ident:claimed_by} = :worker, {ident:claimed_at} = now(), {ident:claim_token} = token.value
FROM picked, token
WHERE t.{ident:lead_id} = picked.lead_key
RETURNING t.{ident:lead_id} AS lead_key, t.{ident:lead_id}::text AS key_text, t.{ident:email}::text AS email,
          t.{ident:claim_token} AS token, nullif(CAST({frag:candidate} AS text), '') AS candidate

-- name: claimloop_candidate_column
-- Template: the leads table's candidate column (a person's id, not the lead's) of lead t, named {ident:candidate_column}.
-- dialect: postgres
t.{ident:candidate_column}

-- name: claimloop_renew
-- Heartbeat: extend the lease of the batch's unfinished leads still held by our token; never waits on a row being sent.
-- dialect: postgres
UPDATE {ident:table} AS t
SET {ident:claimed_at} = now()
WHERE t.{ident:lead_id} IN (
    SELECT x.{ident:lead_id}
    FROM {ident:table} AS x
    WHERE x.{ident:lead_id} = ANY(:keys) AND x.{ident:claim_token} = :token AND x.{ident:status} = :status_in_progress
    FOR UPDATE SKIP LOCKED
)
RETURNING t.{ident:lead_id}::text AS key_text

-- name: claimloop_lock_lead
-- Lock one lead for its send, only while our fencing token still holds it (a later claim fences us out).
-- dialect: postgres
SELECT t.{ident:lead_id}::text AS key_text
FROM {ident:table} AS t
WHERE t.{ident:lead_id} = :key AND t.{ident:claim_token} = :token AND t.{ident:status} = :status_in_progress
FOR UPDATE

-- name: claimloop_mark_sent
-- Mark one lead sent if our fencing token still holds it (a fenced-out worker changes nothing): a lead found sent
-- already (locked in progress by claimloop_lock_lead), or after its send (also when a retry finds it marked).
-- dialect: postgres
UPDATE {ident:table} AS t
SET {ident:status} = :status_sent
WHERE t.{ident:lead_id} = :key AND t.{ident:claim_token} = :token AND t.{ident:status} IN (:status_in_progress, :status_sent)
RETURNING t.{ident:lead_id}::text AS key_text

-- name: claimloop_count_unaddressable
-- Queued leads the loop never claims because their address has no normal form (empty, blank): reported.
-- dialect: postgres
SELECT count(*) AS n
FROM {ident:table} AS t
WHERE t.{ident:status} = :status_queued AND pg_temp.mm_address(t.{ident:email}::text) IS NULL

-- name: claimloop_leads_table_exists
-- Does the leads table exist?
-- dialect: postgres
SELECT to_regclass(:table) IS NOT NULL AS present

-- name: claimloop_store_ready
-- Do sent_log and the send reservations exist already? (Checked first: creating takes locks.)
-- dialect: postgres
SELECT to_regclass('sent_log') IS NOT NULL AND to_regclass('send_reservation') IS NOT NULL
       AND to_regclass('send_reservation_released') IS NOT NULL AS present

-- name: claimloop_release
-- Give back the batch's leads we still hold but did not send (claim cleared), guarded by our token.
-- dialect: postgres
UPDATE {ident:table} AS t
SET {ident:status} = :status_queued, {ident:claimed_by} = NULL, {ident:claimed_at} = NULL
WHERE t.{ident:lead_id} = ANY(:keys) AND t.{ident:claim_token} = :token AND t.{ident:status} = :status_in_progress
RETURNING t.{ident:lead_id}::text AS key_text

-- name: joblock_try_advisory
-- Try the session-level advisory lock of a job name; true when this session now holds it.
-- dialect: postgres
SELECT pg_try_advisory_lock(hashtextextended(:name, 0)) AS acquired

-- name: joblock_release_advisory
-- Release the session-level advisory lock of a job name; true when this session held it.
-- dialect: postgres
SELECT pg_advisory_unlock(hashtextextended(:name, 0)) AS released

-- name: joblock_held_advisory
-- This session's backend pid and whether pg_locks shows it holding the advisory lock of a job name (key = classid:objid).
-- dialect: postgres
SELECT pg_backend_pid() AS pid, EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = ((hashtextextended(:name, 0) >> 32) & 4294967295)::oid
      AND objid = (hashtextextended(:name, 0) & 4294967295)::oid
) AS held
