-- Ingest, shared by every syntax: the files and their staged tables, the typed columns every reader ends with, the
-- events/skipped views, the --since/--until window and the real sends. Each syntax's reading: ingest_logfmt.sql,
-- ingest_jsonl.sql, ingest_csv.sql; macros: macros.sql.

-- name: set_time_zone
-- The zone timestamps without one are read in: --tz while files are read, UTC otherwise.
-- dialect: duckdb
SET TimeZone = {lit:zone}

-- name: time_zone_known
-- Whether DuckDB knows a time zone name (--tz).
-- dialect: duckdb
SELECT count(*) > 0 AS known FROM pg_timezone_names() WHERE name = :zone

-- name: create_files
-- The case's files (which staged table holds each one's lines, from row first_row on), and the empty staged table
-- staged_0 that gives the views their columns when no file holds a line.
-- dialect: duckdb
CREATE OR REPLACE TABLE files (file_id INTEGER, source VARCHAR, header_line BIGINT, staged VARCHAR, first_row BIGINT,
                                envelope VARCHAR);
{block:staged_table}

-- name: first_value
-- Template: the first non-NULL of a field's values, its keys in the field map's order.
-- dialect: duckdb
-- fragments: values=logfmt_value|pick_value|pick_rare_value|first_value|when_rare
coalesce({list:values})

-- name: text_column
-- Template: one canonical text column of a staged line (NULL when no key feeds it), named {ident:column}.
-- dialect: duckdb
-- fragments: value=logfmt_value|pick_value|pick_rare_value|first_value|when_rare|NULL
{frag:value} AS {ident:column}

-- name: typed_in_sql
-- Template: the time, recipient and msg_id typed from the text columns (CTE `texts`) of a line a SQL reader read;
-- the compiled readers type them themselves.
-- dialect: duckdb
unquoted AS (
    SELECT *, mm_ts(ts_text) AS ts_typed, mm_address(recipient_text) AS recipient_typed,
           mm_msg_id(msg_id_text) AS msg_id_typed
    FROM texts
)

-- name: typed_columns
-- Template: a staged line's typed record columns from the text columns every reader gives, and why it is not a
-- record (problem). A line inside an envelope takes the envelope's time, worker and pid where the record has none.
-- The line's text is kept only for a skipped line or a saved case (events.raw), as it outweighs the rest.
-- dialect: duckdb
typed AS (
    SELECT coalesce(ts_typed, env.ts) AS ts,
           CASE WHEN nullif(trim(event_text), '') IS NOT NULL THEN mm_event(event_text)
                WHEN msg_id_text IS NOT NULL AND status IS NOT NULL AND mm_ok_status(status) THEN 'send' END AS event,
           coalesce(worker, mm_env_worker(env)) AS worker, coalesce(incarnation, env.pid) AS incarnation,
           campaign, step,
           recipient_typed AS recipient, candidate, msg_id_typed AS msg_id, shard,
           mm_seconds(lease_text) AS lease_s, test_id, variant, status,
           TRY_CAST(attempt_text AS INTEGER) AS attempt, error, TRY_CAST(count_text AS BIGINT) AS count,
           recipient_text AS recipient_raw, line, problem, nullif(trim(event_text), '') IS NULL AS no_event, env
    FROM unquoted
)
SELECT ts::TIMESTAMPTZ AS ts, event::VARCHAR AS event, worker::VARCHAR AS worker,
       incarnation::VARCHAR AS incarnation, campaign::VARCHAR AS campaign, step::VARCHAR AS step,
       recipient::VARCHAR AS recipient, candidate::VARCHAR AS candidate, msg_id::VARCHAR AS msg_id,
       shard::VARCHAR AS shard, lease_s::DOUBLE AS lease_s, test_id::VARCHAR AS test_id, variant::VARCHAR AS variant,
       status::VARCHAR AS status, attempt::INTEGER AS attempt, error::VARCHAR AS error, count::BIGINT AS count,
       recipient_raw::VARCHAR AS recipient_raw, problem::VARCHAR AS problem,
       CASE WHEN :keep_raw OR problem IS NOT NULL THEN line END::VARCHAR AS line, env
FROM (SELECT * EXCLUDE (problem),
             coalesce(problem, CASE WHEN ts IS NULL THEN 'no readable timestamp'
                                    WHEN no_event AND msg_id IS NULL THEN 'no event or msg_id' END) AS problem
      FROM typed)

-- name: staged_table
-- Template: the staged table the compiled readers fill, with typed_columns' columns (create_files' staged_0 too).
-- Columns of nearly one distinct value per line are stored uncompressed: DuckDB's analysis of them costs more than
-- it saves. The SQL readers keep CREATE TABLE AS, which reads the lines inside an envelope faster.
-- dialect: duckdb
CREATE OR REPLACE TABLE {ident:staged} (
    ts TIMESTAMPTZ, event VARCHAR, worker VARCHAR, incarnation VARCHAR, campaign VARCHAR, step VARCHAR,
    recipient VARCHAR USING COMPRESSION uncompressed, candidate VARCHAR USING COMPRESSION uncompressed,
    msg_id VARCHAR USING COMPRESSION uncompressed, shard VARCHAR, lease_s DOUBLE, test_id VARCHAR,
    variant VARCHAR, status VARCHAR, attempt INTEGER, error VARCHAR, count BIGINT,
    recipient_raw VARCHAR USING COMPRESSION uncompressed, problem VARCHAR, line VARCHAR, env mm_envelope
)

-- name: pick_value
-- Template: the value at {lit:at} of a line's `vals` when it is not blank (several keys of one field: first_value
-- of their picks).
-- dialect: duckdb
CASE WHEN trim(vals[{lit:at}]) <> '' THEN vals[{lit:at}] END

-- name: mark_truncated_row
-- A last line without a newline may have been cut off mid-write: a complete record is kept (many writers never end
-- a file with a newline), a line that did not parse or a send without recipient or msg_id is marked truncated.
-- dialect: duckdb
UPDATE {ident:staged} SET problem = 'truncated last line (no newline at end of file)', line = :text
WHERE rowid = :row AND ((problem IS NOT NULL AND problem <> 'blank line')
                        OR (problem IS NULL AND event = 'send' AND (recipient IS NULL OR msg_id IS NULL)))

-- name: mark_long_lines
-- The lines too long to read (forensics.ingest.repair: :lines, and :texts, what the repaired copy kept of each)
-- become skipped lines (:reason) without a time, whatever their first bytes parsed as.
-- dialect: duckdb
UPDATE {ident:staged} SET problem = :reason, line = cut.text, ts = NULL
FROM (SELECT unnest(:lines::BIGINT[]) AS line_no, unnest(:texts::VARCHAR[]) AS text) cut
WHERE {ident:staged}.rowid = cut.line_no - 1

-- name: mark_long_lines_enveloped
-- mark_long_lines for a file read through an envelope, its rows numbered by the line each came from.
-- dialect: duckdb
UPDATE {ident:staged} SET problem = :reason, line = cut.text, ts = NULL
FROM (SELECT unnest(:lines::BIGINT[]) AS line_no, unnest(:texts::VARCHAR[]) AS text) cut
WHERE coalesce({ident:staged}.env.line_no, {ident:staged}.rowid + 1) = cut.line_no

-- name: register_file
-- A staged file: its label, its CSV header's line (0: none), where its lines are (staged table, first row) and its
-- envelope (NULL: none).
-- dialect: duckdb
INSERT INTO files VALUES (:file_id, :label, :header_line, :staged, :first_row, :envelope)

-- name: staged_rows
-- How many rows (lines) a staged table holds.
-- dialect: duckdb
SELECT count(*) FROM {ident:staged}

-- name: file_line_counts
-- Lines per file of a list of files, read as the staged tables read them.
-- dialect: duckdb
SELECT filename, count(*) FROM mm_named_lines(:paths, :delim) GROUP BY filename

-- name: group_counts
-- Per file of a staged table holding many files: lines, records, skipped lines and the first skipped ones.
-- dialect: duckdb
SELECT f.file_id, count(*) AS lines, count(*) FILTER (WHERE s.problem IS NULL) AS records,
       count(*) FILTER (WHERE s.problem IS NOT NULL) AS skipped,
       (list(s.rowid - f.first_row + 1 ORDER BY s.rowid) FILTER (WHERE s.problem IS NOT NULL))[1:10]
FROM {ident:staged} s ASOF JOIN (SELECT file_id, first_row FROM files WHERE staged = :staged) f
  ON s.rowid >= f.first_row
GROUP BY f.file_id

-- name: staged_counts
-- Physical lines, records and skipped lines of a staged file, and the first skipped line numbers.
-- dialect: duckdb
SELECT count(*) AS lines,
       count(*) FILTER (WHERE problem IS NULL AND rowid >= :header_line) AS records,
       count(*) FILTER (WHERE problem IS NOT NULL AND rowid >= :header_line) AS skipped,
       (list(rowid + 1 ORDER BY rowid) FILTER (WHERE problem IS NOT NULL AND rowid >= :header_line))[1:10]
FROM {ident:staged}

-- name: drop_staged
-- Forget a file's staged lines (before it is read again, e.g. after bad UTF-8).
-- dialect: duckdb
DROP TABLE IF EXISTS {ident:staged}

-- name: create_views
-- `events` (records) and `skipped` (lines that are not records, and why) over every staged file, numbered by their
-- line in the file: views, or tables for a case of many files (a union of hundreds of tables would be planned again
-- by every query). `envelope` is the platform's wrapper a record came in (NULL: none). {frag:window} keeps the
-- --since/--until window, and the skipped lines without a time (they cannot be placed).
-- dialect: duckdb
-- fragments: relation=VIEW|TABLE
-- fragments: events=events_part|events_part_of_many|events_part_enveloped
-- fragments: skipped=skipped_part|skipped_part_of_many|skipped_part_enveloped
-- fragments: window=in_window|TRUE
CREATE OR REPLACE {frag:relation} events AS
SELECT f.source, u.line_no, u.ts, u.event, u.worker, u.incarnation, u.campaign, u.step, u.recipient, u.candidate,
       u.msg_id, u.shard, u.lease_s, u.test_id, u.variant, u.status, u.attempt, u.error, u.count,
       u.recipient_raw, u.raw, u.envelope
FROM ({union:events}) u JOIN files f USING (file_id)
WHERE u.line_no > f.header_line AND {frag:window};
CREATE OR REPLACE {frag:relation} skipped AS
SELECT f.source, u.line_no, u.reason, u.text
FROM ({union:skipped}) u JOIN files f USING (file_id)
WHERE u.line_no > f.header_line AND (u.ts IS NULL OR {frag:window})

-- name: in_window
-- Template: whether u.ts is inside the --since/--until window, ends included (open: -infinity, infinity); literals,
-- as a view takes no parameter.
-- dialect: duckdb
u.ts BETWEEN {lit:since}::TIMESTAMPTZ AND {lit:until}::TIMESTAMPTZ

-- name: time_in_session_zone
-- A --since/--until time given without a zone, read in the session's zone (--tz) as the logs' own times are.
-- dialect: duckdb
SELECT CAST(:at AS TIMESTAMPTZ) AS at

-- name: records_time_range
-- The first and last record time of every staged file and how many records: what a --since/--until duration counts
-- back from, and the range named when a window holds no send.
-- dialect: duckdb
-- fragments: events=events_part|events_part_of_many|events_part_enveloped
SELECT min(u.ts) AS first_record, max(u.ts) AS last_record, count(*) AS records
FROM ({union:events}) u JOIN files f USING (file_id)
WHERE u.line_no > f.header_line

-- name: records_outside_window
-- Records before :since and after :until (NULL: an open end), over every staged file.
-- dialect: duckdb
-- fragments: events=events_part|events_part_of_many|events_part_enveloped
SELECT count(*) FILTER (WHERE u.ts < :since::TIMESTAMPTZ) AS before,
       count(*) FILTER (WHERE u.ts > :until::TIMESTAMPTZ) AS after
FROM ({union:events}) u JOIN files f USING (file_id)
WHERE u.line_no > f.header_line

-- name: provider_sends_cut_to_window
-- A provider export read beside windowed logs keeps their --since/--until window (NULL: an open end), so a send
-- outside it is not taken for one the logs miss; a row without a time stays.
-- dialect: duckdb
DELETE FROM provider_sends WHERE sent_at < :since::TIMESTAMPTZ OR sent_at > :until::TIMESTAMPTZ

-- name: window_kept
-- What a --since/--until window kept: real sends, and would-be records without a readable time (skipped, as they
-- cannot be placed).
-- dialect: duckdb
SELECT (SELECT count(*) FROM sends) AS sends,
       (SELECT count(*) FROM skipped WHERE reason = 'no readable timestamp') AS undated

-- name: events_part
-- Template: the records of one staged table ({ident:staged}, the file numbered {lit:file_id}).
-- dialect: duckdb
SELECT {lit:file_id} AS file_id, rowid + 1 AS line_no, ts, event, worker, incarnation, campaign, step, recipient,
       candidate, msg_id, shard, lease_s, test_id, variant, status, attempt, error, count, recipient_raw, line AS raw,
       NULL::STRUCT(ts TIMESTAMPTZ, stream VARCHAR, host VARCHAR, unit VARCHAR, container VARCHAR, pid VARCHAR) AS envelope
FROM {ident:staged} WHERE problem IS NULL

-- name: skipped_part
-- Template: the lines of one staged table that are not records.
-- dialect: duckdb
SELECT {lit:file_id} AS file_id, rowid + 1 AS line_no, problem AS reason, line AS text, ts
FROM {ident:staged} WHERE problem IS NOT NULL

-- name: events_part_enveloped
-- Template: the records of a staged file read through an envelope, with it, numbered by the line (or JSON document
-- entry) each came from.
-- dialect: duckdb
SELECT {lit:file_id} AS file_id, coalesce(env.line_no, rowid + 1) AS line_no, ts, event, worker, incarnation, campaign, step, recipient,
       candidate, msg_id, shard, lease_s, test_id, variant, status, attempt, error, count, recipient_raw, line AS raw,
       struct_pack(ts := env.ts, stream := env.stream, host := env.host, unit := env.unit,
                   container := env.container, pid := env.pid) AS envelope
FROM {ident:staged} WHERE problem IS NULL

-- name: skipped_part_enveloped
-- Template: the lines inside a staged file's envelope that are not records, numbered like events_part_enveloped.
-- dialect: duckdb
SELECT {lit:file_id} AS file_id, coalesce(env.line_no, rowid + 1) AS line_no, problem AS reason, line AS text, ts
FROM {ident:staged} WHERE problem IS NOT NULL

-- name: events_part_of_many
-- Template: the records of a staged table holding many files ({ident:staged}), each numbered within its file.
-- dialect: duckdb
SELECT f.file_id, s.rowid - f.first_row + 1 AS line_no, s.ts, s.event, s.worker, s.incarnation, s.campaign,
       s.step, s.recipient, s.candidate, s.msg_id, s.shard, s.lease_s, s.test_id, s.variant, s.status, s.attempt,
       s.error, s.count, s.recipient_raw, s.line AS raw, NULL::STRUCT(ts TIMESTAMPTZ, stream VARCHAR, host VARCHAR, unit VARCHAR, container VARCHAR, pid VARCHAR) AS envelope
FROM {ident:staged} s ASOF JOIN (SELECT file_id, first_row FROM files WHERE staged = {lit:staged}) f
  ON s.rowid >= f.first_row
WHERE s.problem IS NULL

-- name: skipped_part_of_many
-- Template: the lines of a staged table holding many files ({ident:staged}) that are not records.
-- dialect: duckdb
SELECT f.file_id, s.rowid - f.first_row + 1 AS line_no, s.problem AS reason, s.line AS text, s.ts
FROM {ident:staged} s ASOF JOIN (SELECT file_id, first_row FROM files WHERE staged = {lit:staged}) f
  ON s.rowid >= f.first_row
WHERE s.problem IS NOT NULL

-- name: build_sends
-- Real sends: a send event with a msg_id, a recipient and a success (or no) status, one per (msg_id, recipient):
-- the first by time, file and line (a line logged twice is one send; one provider id may cover several recipients).
-- `sends` is a view over `events`, not a copy, so a large case's sends are never all held in memory; only the later
-- copies are written down (`send_repeats`), found by sorting hashes and compared exactly where a hash repeats.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE send_repeats AS
WITH ok AS NOT MATERIALIZED (  -- scanned twice rather than held in memory
    SELECT source, line_no AS line, ts, msg_id, recipient, hash(msg_id, recipient) AS h
    FROM events
    WHERE event = 'send' AND msg_id IS NOT NULL AND mm_ok_status(status) AND recipient IS NOT NULL AND recipient <> ''
), repeated AS (  -- hashes that occur twice, found by sorting them (a GROUP BY's hash table of nearly
    -- distinct hashes outgrows the caches)
    SELECT h FROM (SELECT h, lag(h) OVER (ORDER BY h) AS prev FROM ok) WHERE h = prev
)
SELECT source, line FROM ok WHERE h IN (SELECT h FROM repeated)
QUALIFY row_number() OVER (PARTITION BY msg_id, recipient ORDER BY ts, source, line) > 1;
CREATE OR REPLACE TEMP VIEW sends AS
SELECT e.source, e.line_no AS line, e.ts, e.worker, e.incarnation, coalesce(e.campaign, '') AS campaign,
       coalesce(e.step, '') AS step, e.recipient, e.candidate, e.msg_id, e.shard, e.test_id, e.variant, e.attempt
FROM events e ANTI JOIN send_repeats r ON r.source = e.source AND r.line = e.line_no
WHERE e.event = 'send' AND e.msg_id IS NOT NULL AND mm_ok_status(e.status) AND e.recipient IS NOT NULL
  AND e.recipient <> ''

-- name: save_sends
-- A saved case keeps its sends in the case file (`mailmortem sql` reads them): build_sends' view, copied.
-- dialect: duckdb
CREATE OR REPLACE TABLE main.sends AS SELECT * FROM temp.main.sends;
DROP VIEW temp.main.sends;
DROP TABLE temp.main.send_repeats

-- name: first_fatal_skip
-- The first non-blank line that is not a record (what --strict stops on).
-- dialect: duckdb
SELECT source, line_no, reason FROM skipped WHERE reason <> 'blank line' ORDER BY source, line_no LIMIT 1

-- name: lost_evidence_lines
-- Skipped lines that look like a mail-send record (:pattern: a send key, an address or a send event) or were too
-- long to read (:too_long), per file: how many, and the first of them.
-- dialect: duckdb
SELECT source, count(*) AS lines, list(line_no ORDER BY line_no)[1:5] AS first_lines
FROM skipped
WHERE reason = :too_long OR (text IS NOT NULL AND regexp_matches(text, :pattern))
GROUP BY source
ORDER BY source

-- name: spill_folder
-- DuckDB's temp folder (a private one per case, removed at exit), where our own copies of inputs go too.
-- dialect: duckdb
SELECT current_setting('temp_directory') AS folder

-- name: database_file
-- The connection's database file (empty for an in-memory one), its temp folder and its memory limit: what opening it
-- again on a new connection takes (forensics/ingest/case.py reopened).
-- dialect: duckdb
SELECT path, current_setting('temp_directory') AS spill, current_setting('memory_limit') AS memory_limit
FROM duckdb_databases() WHERE database_name = current_database()
