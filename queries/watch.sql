-- `mailmortem watch` (forensics/watch/state.py): the watch's own DuckDB state. Each poll's chunks of new lines
-- are read by the loader on a scratch connection; its events and skipped lines arrive here as Arrow tables
-- (watch_chunk_events, watch_chunk_skipped, and watch_chunk_files: each chunk's file it was read from, its lines
-- there, first_line to last_line, and the lines of its own file before it)
-- and are added to watch_events and watch_skipped, numbered as in their file. Sends, people and workers are
-- kept up to date from the new rows only: no statement of a poll reads every send kept (watch_sends is read only
-- at the rows forensics/watch/keys.py points to; watch_people, one row per duplicated person reported, is read
-- whole), so that a poll costs nearly the same after an hour as after a minute; the whole state is read again only
-- to name kinds (classify, at most 1/80 of the time: forensics/watch/run.py).

-- name: watch_create_state
-- The state tables, shaped like the loader's events and skipped (made empty from the first chunk).
-- dialect: duckdb
CREATE TABLE IF NOT EXISTS watch_events AS SELECT * FROM watch_chunk_events LIMIT 0;
CREATE TABLE IF NOT EXISTS watch_skipped AS SELECT * FROM watch_chunk_skipped LIMIT 0;
-- person and send: hashes of (campaign, step, recipient) and (msg_id, recipient), what each poll looks sends up by
CREATE TABLE IF NOT EXISTS watch_sends (source VARCHAR, line BIGINT, ts TIMESTAMPTZ, worker VARCHAR, campaign VARCHAR,
                                        step VARCHAR, recipient VARCHAR, msg_id VARCHAR, person UBIGINT, send UBIGINT);
CREATE TABLE IF NOT EXISTS watch_people (campaign VARCHAR, step VARCHAR, recipient VARCHAR, kind VARCHAR);
CREATE TABLE IF NOT EXISTS watch_workers (worker VARCHAR, incarnation VARCHAR)

-- name: watch_take_chunk
-- Add one poll's records, each numbered by its line in its file, and its candidate real sends (as build_sends
-- counts them: a send record with a msg_id, a success or no status and a recipient; one per msg_id and recipient; a
-- copy of one already kept is left out by watch_add_sends). watch_workers holds a row per worker and incarnation
-- (watch_worker_news): it stays small however long the watch runs.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_new_events AS
SELECT e.* REPLACE (f.source AS source, e.line_no - f.first_line + 1 + f.lines_before AS line_no)
FROM watch_chunk_events e
JOIN watch_chunk_files f ON f.chunk = e.source AND e.line_no BETWEEN f.first_line AND f.last_line;
INSERT INTO watch_events SELECT * FROM watch_new_events;
-- the poll's candidate sends, with the hashes the watch's index of watch_sends (forensics/watch/keys.py) is asked
-- for: the rows of the kept sends that may be the same send or the same person. A send logged twice within the poll
-- is left to watch_first_of_each_send, and whether its person was reported already to watch_mark_reported: each is
-- run only when the hashes show it can change something (forensics/watch/state.py), as it rarely can
CREATE OR REPLACE TEMP TABLE watch_candidate_sends AS
SELECT n.source, n.line_no AS line, n.ts, n.worker, coalesce(n.campaign, '') AS campaign, coalesce(n.step, '') AS step,
       n.recipient, n.msg_id, hash(coalesce(n.campaign, ''), coalesce(n.step, ''), n.recipient) AS person,
       hash(n.msg_id, n.recipient) AS send, false AS reported
FROM watch_new_events n
WHERE n.event = 'send' AND n.msg_id IS NOT NULL AND mm_ok_status(n.status) AND n.recipient IS NOT NULL
  AND n.recipient <> ''

-- name: watch_first_of_each_send
-- One candidate per msg_id and recipient (the first logged), run when two of the poll's candidates share a send hash.
-- dialect: duckdb
DELETE FROM watch_candidate_sends WHERE rowid IN (
    SELECT rowid FROM watch_candidate_sends
    QUALIFY row_number() OVER (PARTITION BY msg_id, recipient ORDER BY ts, source, line) > 1)

-- name: watch_mark_reported
-- Which candidates' people were reported already (their kept sends need not be read: watch_new_duplicates reports
-- no one twice), run when a candidate's person hash is one of theirs.
-- dialect: duckdb
UPDATE watch_candidate_sends c SET reported = true
WHERE EXISTS (SELECT 1 FROM watch_people p WHERE p.campaign = c.campaign AND p.step = c.step
                                              AND p.recipient = c.recipient)

-- name: watch_worker_news
-- What the poll's records say of workers: one seen for the first time (new-worker), a known one under a new
-- incarnation or logging a start (worker-restart). Run only when a record names a worker and incarnation not held
-- yet, or logs a start (forensics/watch/state.py knows the pairs held): otherwise it finds nothing.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_worker_news AS
WITH fresh AS (
    SELECT worker, incarnation, min(ts) AS ts, arg_min(source, ts) AS source, bool_or(event = 'start') AS started
    FROM watch_new_events WHERE worker IS NOT NULL AND worker <> '' GROUP BY worker, incarnation
)
SELECT f.worker, f.incarnation, f.ts, f.source,
       CASE WHEN NOT EXISTS (SELECT 1 FROM watch_workers w WHERE w.worker = f.worker) THEN 'new-worker'
            WHEN NOT EXISTS (SELECT 1 FROM watch_workers w WHERE w.worker = f.worker
                                                            AND w.incarnation IS NOT DISTINCT FROM f.incarnation)
                 OR f.started THEN 'worker-restart' END AS what
FROM fresh f;
INSERT INTO watch_workers
SELECT DISTINCT worker, incarnation FROM watch_worker_news n
WHERE NOT EXISTS (SELECT 1 FROM watch_workers w WHERE w.worker = n.worker
                                                  AND w.incarnation IS NOT DISTINCT FROM n.incarnation)

-- name: watch_take_skipped
-- Add one poll's skipped lines, each numbered by its line in its file (run only when the loader counted some: a
-- poll of clean lines spares the statement and the copy of an empty table).
-- dialect: duckdb
INSERT INTO watch_skipped
SELECT s.* REPLACE (f.source AS source, s.line_no - f.first_line + 1 + f.lines_before AS line_no)
FROM watch_chunk_skipped s
JOIN watch_chunk_files f ON f.chunk = s.source AND s.line_no BETWEEN f.first_line AND f.last_line

-- name: watch_candidate_keys
-- The hashes of the poll's candidate sends, for the index of watch_sends, in the order they are added, and whether
-- the person was reported already.
-- dialect: duckdb
SELECT person, send, reported FROM watch_candidate_sends ORDER BY rowid

-- name: watch_add_sends
-- Keep the poll's new real sends: its candidates less the copies of sends already kept, compared exactly with the
-- rows the index points to (watch_copy_rows: rowids of watch_sends sharing a send hash's upper bits); the rows of
-- watch_sends are read only where they are pointed to (a rowid filter skips the other row groups).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_known_sends AS
SELECT msg_id, recipient FROM watch_sends WHERE rowid IN (SELECT rid FROM watch_copy_rows);
CREATE OR REPLACE TEMP TABLE watch_new_sends AS
SELECT c.* FROM watch_candidate_sends c
WHERE NOT EXISTS (SELECT 1 FROM watch_known_sends k WHERE k.msg_id = c.msg_id AND k.recipient = c.recipient);
INSERT INTO watch_sends SELECT * EXCLUDE (reported) FROM watch_new_sends

-- name: watch_add_fresh_sends
-- watch_add_sends when the index points to no kept row (watch_copy_rows empty, as it is for most polls): every
-- candidate is new, in the order watch_candidate_keys read them.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_new_sends AS SELECT * FROM watch_candidate_sends;
INSERT INTO watch_sends SELECT * EXCLUDE (reported) FROM watch_new_sends

-- name: watch_added_keys
-- The rows watch_add_sends added (from :first_row on), with their hashes, for the index.
-- dialect: duckdb
SELECT rowid AS rid, person, send FROM watch_sends WHERE rowid >= :first_row

-- name: watch_new_duplicates
-- People (campaign step and recipient) the new sends made duplicated: two or more real sends, not reported
-- before; with their first two sends in time order (msg_id, worker, time, file and line), noted as reported.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_duplicates AS
WITH unreported AS (  -- the new sends to people not reported yet
    SELECT * EXCLUDE (reported) FROM watch_new_sends WHERE NOT reported
), touched AS (  -- the sends of the people they name: the kept ones the index points to (watch_person_rows), compared
                 -- exactly, and the poll's own
    SELECT k.*, true AS kept FROM watch_sends k
    WHERE k.rowid IN (SELECT rid FROM watch_person_rows)
      AND EXISTS (SELECT 1 FROM unreported n WHERE n.campaign = k.campaign AND n.step = k.step
                                               AND n.recipient = k.recipient)
    UNION ALL
    SELECT *, false FROM unreported
), twice AS (  -- the people with two sends or more, found on their hash first (no list built for everyone else)
    SELECT person FROM touched GROUP BY person HAVING count(*) >= 2
)
-- a person with two kept sends was reported by the poll that kept the second one
SELECT s.campaign, s.step, s.recipient, any_value(s.person) AS person, count(*) AS sends,
       list({'msg_id': s.msg_id, 'worker': s.worker, 'ts': s.ts, 'source': s.source, 'line': s.line}
            ORDER BY s.ts, s.source, s.line)[1:2] AS first_sends
FROM touched s
WHERE s.person IN (SELECT person FROM twice)
GROUP BY s.campaign, s.step, s.recipient
HAVING count(*) >= 2 AND count(*) FILTER (WHERE s.kept) < 2;
INSERT INTO watch_people SELECT campaign, step, recipient, NULL FROM watch_duplicates

-- name: watch_duplicate_rows
-- The people watch_new_duplicates found, in the order their second send was logged, with their person hash (the
-- state's list of people reported: forensics/watch/state.py).
-- dialect: duckdb
SELECT campaign, step, recipient, person, sends, first_sends FROM watch_duplicates
ORDER BY first_sends[2].ts, recipient

-- name: watch_worker_rows
-- What watch_take_chunk found of workers (new-worker, worker-restart), in time order.
-- dialect: duckdb
SELECT what, worker, incarnation, ts, source FROM watch_worker_news WHERE what IS NOT NULL ORDER BY ts, worker

-- name: watch_sends_by_worker
-- The new sends of this poll per worker (the status line's sends per minute) and the first of them.
-- dialect: duckdb
SELECT worker, count(*) AS sends, min_by({'msg_id': msg_id, 'recipient': recipient, 'campaign': campaign,
                                          'step': step, 'ts': ts, 'source': source, 'line': line}, ts) AS first
FROM watch_new_sends GROUP BY worker ORDER BY worker NULLS LAST

-- name: watch_case_views
-- The state as the case diagnose builds (events, skipped, files), for build_sends, classify and the summary.
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW events AS SELECT * FROM watch_events;
CREATE OR REPLACE TEMP VIEW skipped AS SELECT * FROM watch_skipped;
CREATE OR REPLACE TEMP TABLE files AS
SELECT (row_number() OVER (ORDER BY source))::INTEGER AS file_id, source, 0::BIGINT AS header_line,
       NULL::VARCHAR AS staged, 0::BIGINT AS first_row, NULL::VARCHAR AS envelope
FROM (SELECT source FROM watch_events UNION SELECT source FROM watch_skipped)

-- name: watch_kind_changes
-- Duplicated people whose kind classify names now and differs from the kind last reported (noted as reported).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE watch_kinds AS
SELECT d.campaign, d.step, d.recipient, d.kind, d.confidence, d.worker1, d.worker2
FROM dup_people d JOIN watch_people p ON p.campaign = d.campaign AND p.step = d.step AND p.recipient = d.recipient
WHERE p.kind IS DISTINCT FROM d.kind;
UPDATE watch_people p SET kind = k.kind FROM watch_kinds k
WHERE p.campaign = k.campaign AND p.step = k.step AND p.recipient = k.recipient

-- name: watch_kind_rows
-- What watch_kind_changes found.
-- dialect: duckdb
SELECT campaign, step, recipient, kind, confidence FROM watch_kinds ORDER BY campaign, step, recipient

-- name: watch_input_counts
-- Per followed file: records and skipped lines read while watching (the summary's "What was read").
-- dialect: duckdb
SELECT source, sum(records)::BIGINT AS records, sum(skipped)::BIGINT AS skipped,
       list(first_skipped ORDER BY first_skipped) FILTER (WHERE first_skipped IS NOT NULL)[1:5] AS first_skipped
FROM (SELECT source, count(*) AS records, 0 AS skipped, NULL::BIGINT AS first_skipped FROM watch_events GROUP BY source
      UNION ALL
      SELECT source, 0, 1, line_no FROM watch_skipped)
GROUP BY source ORDER BY source

-- name: watch_one_thread
-- The watch's connections run on one thread: a poll's statements are small, and waking a second thread for each
-- cost more CPU than it saved time.
-- dialect: duckdb
SET threads = 1

-- name: watch_memory_limit
-- The state connection's memory limit: lowered a moment after kinds are named, so that DuckDB lets go of the
-- blocks classify read (kept cached up to the limit otherwise: a state read whole keeps a limit's worth resident),
-- then set back (forensics/watch/state.py release).
-- dialect: duckdb
SET memory_limit = {lit:limit}
