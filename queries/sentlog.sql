-- The durable sent-log: who was really emailed, per campaign and step.
-- Each block says which of PostgreSQL and DuckDB it runs on (`-- dialect:`).

-- name: sent_log_create_table
-- The durable sent_log table; (msg_id, recipient) is unique so a re-run inserts nothing.
-- dialect: duckdb postgres
CREATE TABLE IF NOT EXISTS sent_log (
    campaign    TEXT NOT NULL DEFAULT '',
    step        TEXT NOT NULL DEFAULT '',
    recipient   TEXT NOT NULL,
    candidate   TEXT,
    msg_id      TEXT NOT NULL,
    sent_at     TIMESTAMPTZ,
    provider    TEXT,
    source_file TEXT,
    ingested_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (msg_id, recipient)
)

-- name: sent_log_create_index
-- The check-before-send lookup path: (campaign, step, recipient).
-- dialect: duckdb postgres
CREATE INDEX IF NOT EXISTS sent_log_campaign_step_recipient ON sent_log (campaign, step, recipient)

-- name: sent_log_pg_ddl_lock
-- PostgreSQL only: serialise concurrent CREATE TABLE IF NOT EXISTS (it can race on pg_type).
-- dialect: postgres
SELECT pg_advisory_xact_lock(724531601)

-- name: sent_log_pairs_pg
-- PostgreSQL: every (campaign, step) the sent-log holds, read by skipping along its (campaign, step, recipient)
-- index (remediation.labels matches a filter to them).
-- dialect: postgres
WITH RECURSIVE pairs AS (
    (SELECT campaign, step FROM sent_log ORDER BY campaign, step LIMIT 1)
    UNION ALL
    SELECT n.campaign, n.step
    FROM pairs AS p
        CROSS JOIN LATERAL (SELECT s.campaign, s.step FROM sent_log AS s
                            WHERE (s.campaign, s.step) > (p.campaign, p.step)
                            ORDER BY s.campaign, s.step LIMIT 1) AS n
)
SELECT campaign, step FROM pairs

-- name: sent_log_pairs_duckdb
-- DuckDB: every (campaign, step) the sent-log holds.
-- dialect: duckdb
SELECT DISTINCT campaign, step FROM sent_log ORDER BY campaign, step

-- name: sent_log_already_sent
-- True if the recipient has a row under one of the (campaign, step) spellings remediation.labels selected for the
-- filter (the rows of unknown step '' among them, to be safe). An index probe per spelling.
-- dialect: duckdb postgres
SELECT EXISTS (
    SELECT 1 FROM sent_log
    WHERE campaign = ANY(CAST(:scope_campaigns AS TEXT[]))
      AND step = ANY(CAST(:scope_steps AS TEXT[]))
      AND recipient = :recipient
) AS already_sent

-- name: sent_log_record_send
-- Insert one send if (msg_id, recipient) is not there yet; returns the row only when inserted.
-- dialect: duckdb postgres
INSERT INTO sent_log (campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file)
VALUES (:campaign, :step, :recipient, :candidate, :msg_id, :sent_at, :provider, :source_file)
ON CONFLICT (msg_id, recipient) DO NOTHING
RETURNING msg_id

-- name: sent_log_stage_create
-- A session-private staging table for one backfill run (bulk-loaded, then merged).
-- dialect: duckdb postgres
CREATE TEMPORARY TABLE sent_log_stage (
    campaign    TEXT,
    step        TEXT,
    recipient   TEXT,
    candidate   TEXT,
    msg_id      TEXT,
    sent_at     TIMESTAMPTZ,
    provider    TEXT,
    source_file TEXT
)

-- name: sent_log_stage_drop
-- Drop the staging table of a previous run on this connection, if any.
-- dialect: duckdb postgres
DROP TABLE IF EXISTS sent_log_stage

-- name: sent_log_stage_copy
-- PostgreSQL COPY into the staging table (CSV written by Arrow: quoted strings, bare NULLs).
-- dialect: postgres
COPY sent_log_stage (campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file) FROM STDIN (FORMAT csv)

-- name: sent_log_copy
-- PostgreSQL COPY straight into an EMPTY sent_log, under sent_log_lock_writers (rows deduplicated, campaign/step never NULL).
-- dialect: postgres
COPY sent_log (campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file) FROM STDIN (FORMAT csv)

-- name: sent_log_lock_writers
-- PostgreSQL only: hold off other writers (record_send, other backfills) until this backfill commits; readers go on.
-- dialect: postgres
LOCK TABLE sent_log IN SHARE ROW EXCLUSIVE MODE

-- name: sent_log_pg_missing
-- PostgreSQL: true when sent_log does not exist yet (asked under sent_log_pg_ddl_lock, so no creator races it).
-- dialect: postgres
SELECT to_regclass('sent_log') IS NULL AS missing

-- name: sent_log_pg_drop_unique
-- PostgreSQL, only on a sent_log created in this very transaction (invisible to others): build the key after the load.
-- dialect: postgres
ALTER TABLE sent_log DROP CONSTRAINT sent_log_msg_id_recipient_key

-- name: sent_log_pg_drop_index
-- PostgreSQL, only on a sent_log created in this very transaction: build the lookup index after the load.
-- dialect: postgres
DROP INDEX sent_log_campaign_step_recipient

-- name: sent_log_pg_add_unique
-- PostgreSQL: the (msg_id, recipient) key exactly as sent_log_create_table names and defines it, built in one sort.
-- dialect: postgres
ALTER TABLE sent_log ADD CONSTRAINT sent_log_msg_id_recipient_key UNIQUE (msg_id, recipient)

-- name: sent_log_pg_index_memory
-- PostgreSQL: sort memory for building sent_log's indexes after a first bulk load (this transaction only).
-- dialect: postgres
SET LOCAL maintenance_work_mem = '256MB'

-- name: sent_log_is_empty
-- True when sent_log has no row at all (a first backfill can COPY straight into it).
-- dialect: postgres
SELECT NOT EXISTS (SELECT 1 FROM sent_log) AS empty

-- name: sent_log_stage_analyze
-- PostgreSQL: statistics for the staging table, so the merge picks a hash anti-join for big loads.
-- dialect: postgres
ANALYZE sent_log_stage

-- name: sent_log_stage_from_arrow
-- DuckDB: fill the staging table from the registered Arrow table sent_log_arrow.
-- dialect: duckdb
INSERT INTO sent_log_stage
SELECT campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file FROM sent_log_arrow

-- name: sent_log_merge_stage
-- Move staged (already deduplicated) sends into sent_log; existing rows untouched.
-- dialect: duckdb
INSERT INTO sent_log (campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file)
SELECT coalesce(campaign, ''), coalesce(step, ''), recipient, candidate, msg_id, sent_at, provider, source_file
FROM sent_log_stage
WHERE msg_id IS NOT NULL AND recipient IS NOT NULL
ORDER BY msg_id, recipient
ON CONFLICT (msg_id, recipient) DO NOTHING

-- name: sent_log_merge_stage_locked
-- PostgreSQL, under sent_log_lock_writers: insert the staged sends sent_log lacks (an anti-join; no other
-- writer can add a row meanwhile, so no per-row ON CONFLICT check is needed).
-- dialect: postgres
INSERT INTO sent_log (campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file)
SELECT coalesce(s.campaign, ''), coalesce(s.step, ''), s.recipient, s.candidate, s.msg_id, s.sent_at, s.provider,
       s.source_file
FROM sent_log_stage AS s
WHERE s.msg_id IS NOT NULL AND s.recipient IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM sent_log AS t WHERE t.msg_id = s.msg_id AND t.recipient = s.recipient)
ORDER BY s.msg_id, s.recipient

-- name: sent_log_dedupe_view
-- DuckDB over sends registered as sent_log_sends_in: view sent_log_dedup, one row per (msg_id, normal-form recipient) -- the
-- earliest send (then the first file) wins --, campaign/step '' when unknown (a COPY into sent_log needs them NOT NULL).
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW sent_log_dedup AS
SELECT coalesce(r.campaign, '') AS campaign, coalesce(r.step, '') AS step, recipient, r.candidate, msg_id,
       r.sent_at, r.provider, r.source_file
FROM (
    SELECT msg_id, recipient,
        arg_min(struct_pack(campaign, step, candidate, sent_at, provider, source_file),
                struct_pack(no_time := sent_at IS NULL, t := coalesce(sent_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'),
                            f := coalesce(source_file, ''))) AS r
    FROM (SELECT * REPLACE (mm_address(recipient) AS recipient) FROM sent_log_sends_in)
    WHERE msg_id IS NOT NULL AND recipient IS NOT NULL
    GROUP BY msg_id, recipient
)

-- name: sent_log_unique_view
-- DuckDB: view sent_log_dedup over sends the caller guarantees unique per (msg_id, recipient) (one provider's
-- collapsed rows): no aggregation, only campaign/step '' when unknown. A broken promise fails on the unique key.
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW sent_log_dedup AS
SELECT coalesce(campaign, '') AS campaign, coalesce(step, '') AS step, recipient, candidate, msg_id,
       sent_at, provider, source_file
FROM sent_log_sends_in
WHERE msg_id IS NOT NULL AND recipient IS NOT NULL

-- name: sent_log_dedup_rows
-- DuckDB: the rows of view sent_log_dedup.
-- dialect: duckdb
SELECT campaign, step, recipient, candidate, msg_id, sent_at, provider, source_file FROM sent_log_dedup

-- name: sent_log_csv_rows_by_lookup
-- DuckDB: the rows of view sent_log_dedup as text for PostgreSQL's COPY (UTC offsets kept), in (campaign, step,
-- recipient) order: building the lookup index over a heap in that order lets PostgreSQL's sort take its
-- presorted shortcut instead of comparing every pair of keys.
-- dialect: duckdb
SELECT campaign, step, recipient, candidate, msg_id, CAST(sent_at AS VARCHAR) AS sent_at, provider, source_file
FROM sent_log_dedup
ORDER BY campaign, step, recipient

-- name: sent_log_csv_rows_by_key
-- DuckDB: the rows of view sent_log_dedup as text for PostgreSQL's COPY (UTC offsets kept), in (msg_id, recipient)
-- order so PostgreSQL appends to the unique index.
-- dialect: duckdb
SELECT campaign, step, recipient, candidate, msg_id, CAST(sent_at AS VARCHAR) AS sent_at, provider, source_file
FROM sent_log_dedup
ORDER BY msg_id, recipient

-- name: sent_log_count
-- Number of rows in sent_log.
-- dialect: duckdb postgres
SELECT count(*) AS n FROM sent_log

-- name: sent_log_lookup
-- The newest send recorded for a recipient under the selected (campaign, step) spellings, as sent_log_already_sent
-- (for `sentlog check` output).
-- dialect: duckdb postgres
SELECT campaign, step, recipient, msg_id, sent_at, provider
FROM sent_log
WHERE campaign = ANY(CAST(:scope_campaigns AS TEXT[]))
  AND step = ANY(CAST(:scope_steps AS TEXT[]))
  AND recipient = :recipient
ORDER BY sent_at DESC NULLS LAST
LIMIT 1

-- name: sent_log_export_duplicates
-- DuckDB over the reader's collapsed rows (provider_sends_view): people the export itself shows emailed more than once
-- per campaign and step, compared in normal form (mm_label: `C-1` step `01` is `c-1` step `1`); each shown in the
-- least of its spellings.
-- dialect: duckdb
WITH sent AS (
    SELECT coalesce(campaign, '') AS campaign, coalesce(step, '') AS step, recipient, msg_id, sent_at
    FROM provider_sends_view
    WHERE verdict = 'sent' AND msg_id IS NOT NULL AND recipient IS NOT NULL
), people AS (
    -- cheap first pass: two distinct ids means min <> max; only these people's labels are put in normal form
    SELECT recipient FROM sent GROUP BY recipient HAVING min(msg_id) <> max(msg_id)
), labelled AS (
    SELECT *, mm_label(campaign) AS campaign_n, mm_label(step) AS step_n FROM sent SEMI JOIN people USING (recipient)
)
SELECT min(campaign) AS campaign, min(step) AS step, recipient,
       count(DISTINCT msg_id) AS sends, list(DISTINCT msg_id ORDER BY msg_id) AS msg_ids,
       min(sent_at) AS first_sent_at, max(sent_at) AS last_sent_at
FROM labelled
GROUP BY campaign_n, step_n, recipient
HAVING count(DISTINCT msg_id) > 1
ORDER BY sends DESC, campaign, step, recipient

-- name: sent_log_export_skipped
-- DuckDB over the reader's event rows (provider_events_view): events that are not sends, counted by provider and type.
-- dialect: duckdb
SELECT provider, event_type, verdict, count(*) AS events
FROM provider_events_view
WHERE verdict <> 'sent'
GROUP BY ALL
ORDER BY events DESC, provider, event_type

-- name: sent_log_export_incomplete
-- DuckDB over collapsed rows: sends that cannot be recorded because the export lacks a recipient or message id.
-- dialect: duckdb
SELECT source_file, source_line, provider, event_type,
       CASE WHEN recipient IS NULL THEN 'send event without a recipient' ELSE 'send event without a message id' END AS reason
FROM provider_sends_view
WHERE verdict = 'sent' AND (recipient IS NULL OR msg_id IS NULL)
ORDER BY source_file, source_line

-- name: sent_log_pg_backend_pid
-- PostgreSQL: this connection's server process id (the backfill benchmark reads its CPU time).
-- dialect: postgres
SELECT pg_backend_pid() AS pid

-- name: sent_log_present
-- Whether sent_log exists in the current schema (a read asks first instead of creating it).
-- dialect: duckdb postgres
SELECT count(*) AS present
FROM information_schema.tables
WHERE table_name = 'sent_log' AND table_schema = current_schema()

-- name: sent_log_candidate_addresses
-- Every address the sent-log has recorded for a candidate (any campaign): a person may have several.
-- dialect: duckdb postgres
SELECT DISTINCT recipient FROM sent_log WHERE candidate = :candidate ORDER BY recipient

-- name: sent_log_inserted_now
-- DuckDB: the (msg_id, recipient) keys this transaction inserted (stamped with its now()), for the audit row.
-- dialect: duckdb
SELECT msg_id, recipient FROM sent_log WHERE ingested_at = now() ORDER BY msg_id, recipient

-- name: sent_log_stage_joined
-- Template: each staged send beside the sent_log row of its (msg_id, recipient): whether one is there, where they
-- disagree on campaign, step or candidate (differ_*: never overwritten), and what the stored row lacks (fill_*:
-- only where nothing disagrees). Equal text is compared first, so a re-run of one export computes no normal form.
-- dialect: duckdb postgres
SELECT *,
    present AND NOT differs AND trim(old_campaign) = '' AND trim(coalesce(campaign, '')) <> '' AS fill_campaign,
    present AND NOT differs AND trim(old_step) = '' AND trim(coalesce(step, '')) <> '' AS fill_step,
    present AND NOT differs AND old_sent_at IS NULL AND sent_at IS NOT NULL AS fill_sent_at,
    present AND NOT differs AND trim(coalesce(old_candidate, '')) = '' AND trim(coalesce(candidate, '')) <> ''
        AS fill_candidate
FROM (
    SELECT *, differ_campaign OR differ_step OR differ_candidate AS differs
    FROM (
        SELECT s.msg_id, s.recipient, true AS present,
            t.campaign AS old_campaign, t.step AS old_step, t.sent_at AS old_sent_at, t.candidate AS old_candidate,
            s.campaign, s.step, s.sent_at, s.candidate,
            CASE WHEN t.campaign = s.campaign OR trim(t.campaign) = '' OR trim(coalesce(s.campaign, '')) = '' THEN false
                 ELSE {twin:mm_label}(t.campaign) <> {twin:mm_label}(s.campaign) END AS differ_campaign,
            CASE WHEN t.step = s.step OR trim(t.step) = '' OR trim(coalesce(s.step, '')) = '' THEN false
                 ELSE {twin:mm_label}(t.step) <> {twin:mm_label}(s.step) END AS differ_step,
            coalesce(trim(t.candidate) <> '' AND trim(s.candidate) <> ''
                     AND trim(t.candidate) <> trim(s.candidate), false) AS differ_candidate
        FROM sent_log_stage AS s
        JOIN sent_log AS t ON t.msg_id = s.msg_id AND t.recipient = s.recipient
    ) AS pairs
) AS compared

-- name: sent_log_stage_compared_create
-- The stored rows the staged export would fill or disagrees with (sent_log_stage_joined), found once before the
-- write for the plan, the audit and the fill to read: a session-private table, dropped with the stage. A re-run
-- of the same export leaves it empty.
-- dialect: duckdb postgres
CREATE TEMPORARY TABLE sent_log_stage_compared AS
SELECT * FROM ({block:sent_log_stage_joined}) AS j
WHERE differs OR fill_campaign OR fill_step OR fill_sent_at OR fill_candidate

-- name: sent_log_stage_compared_drop
-- Drop the comparison of a previous run on this connection, if any.
-- dialect: duckdb postgres
DROP TABLE IF EXISTS sent_log_stage_compared

-- name: sent_log_stage_compare
-- The staged sends against sent_log before the write: how many are there already (a join on its key), how many of
-- those the export completes (fills), and how many disagree with what is stored (reported, never overwritten).
-- dialect: duckdb postgres
SELECT (SELECT count(*) FROM sent_log_stage AS s JOIN sent_log AS t ON t.msg_id = s.msg_id AND t.recipient = s.recipient)
           AS present,
       (SELECT count(*) FROM sent_log_stage_compared WHERE NOT differs) AS to_fill,
       (SELECT count(*) FROM sent_log_stage_compared WHERE differs) AS disagreeing

-- name: sent_log_stage_fills
-- The stored rows the export completes, with their values before and after (for the audit row), key order.
-- dialect: duckdb postgres
SELECT msg_id, recipient, fill_campaign, fill_step, fill_sent_at, fill_candidate,
       old_campaign, old_step, old_sent_at, old_candidate, campaign, step, sent_at, candidate
FROM sent_log_stage_compared
WHERE fill_campaign OR fill_step OR fill_sent_at OR fill_candidate
ORDER BY msg_id, recipient

-- name: sent_log_stage_differences
-- Stored rows whose campaign, step or candidate disagrees with the export's (the first :limit, key order).
-- dialect: duckdb postgres
SELECT msg_id, recipient, old_campaign AS stored_campaign, campaign AS export_campaign, old_step AS stored_step,
       step AS export_step, old_candidate AS stored_candidate, candidate AS export_candidate
FROM sent_log_stage_compared
WHERE differs
ORDER BY msg_id, recipient
LIMIT :limit

-- name: sent_log_fill_from_stage
-- Fill the blanks (campaign, step or candidate '', no send time or candidate) of stored rows from the compared
-- export, only where the row disagrees with the export in nothing: a stored value is never overwritten.
-- dialect: duckdb postgres
UPDATE sent_log AS t
SET campaign = CASE WHEN j.fill_campaign THEN j.campaign ELSE t.campaign END,
    step = CASE WHEN j.fill_step THEN j.step ELSE t.step END,
    sent_at = CASE WHEN j.fill_sent_at THEN j.sent_at ELSE t.sent_at END,
    candidate = CASE WHEN j.fill_candidate THEN j.candidate ELSE t.candidate END
FROM sent_log_stage_compared AS j
WHERE t.msg_id = j.msg_id AND t.recipient = j.recipient
  AND (j.fill_campaign OR j.fill_step OR j.fill_sent_at OR j.fill_candidate)
