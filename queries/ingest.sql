-- Ingest: a file's lines → typed `staged` rows (one parallel pass) → canonical `events` and `skipped`.
-- Everything runs inside DuckDB; Python only chooses files and key names.

-- name: set_time_zone
-- The zone that timestamps without one are read in (--tz) while files are read; UTC again afterwards.
-- dialect: duckdb
SET TimeZone = {lit:zone}

-- name: time_zone_known
-- Whether DuckDB knows a time zone name (--tz).
-- dialect: duckdb
SELECT count(*) > 0 AS known FROM pg_timezone_names() WHERE name = :zone

-- name: create_files
-- The files of the case (the staged table holding each one's lines, from row first_row on) and {ident:staged}
-- (staged_0), an empty staged table (staged_table's) that gives the events and skipped views their columns even
-- when no file holds a line.
-- dialect: duckdb
CREATE OR REPLACE TABLE files (file_id INTEGER, source VARCHAR, header_line BIGINT, staged VARCHAR, first_row BIGINT,
                                envelope VARCHAR);
{block:staged_table}

-- name: first_value
-- Template: the first non-NULL of a field's values, in the field map's order of its keys.
-- dialect: duckdb
-- fragments: values=logfmt_value|pick_value|pick_rare_value|first_value|when_rare
coalesce({list:values})

-- name: text_column
-- Template: one canonical text column of a staged line (NULL when no key feeds it), named {ident:column}.
-- dialect: duckdb
-- fragments: value=logfmt_value|pick_value|pick_rare_value|first_value|when_rare|NULL
{frag:value} AS {ident:column}

-- name: typed_in_sql
-- Template: the time, recipient and msg_id of a line read by a SQL parser, typed (mm_ts in the session's zone,
-- the address's normal form, mm_msg_id), from its text columns (the CTE `texts`), for typed_columns.
-- dialect: duckdb
unquoted AS (
    SELECT *, mm_ts(ts_text) AS ts_typed, mm_address(recipient_text) AS recipient_typed,
           mm_msg_id(msg_id_text) AS msg_id_typed
    FROM texts
)

-- name: typed_columns
-- Template: the typed record columns of a staged line, from the text columns every parser produces, then
-- why the line is not a record (problem) and its text, kept only where it is needed (a skip's text, or
-- events.raw in a saved case: at 10M lines the text alone is several GB). A line inside an envelope (`env`)
-- takes the envelope's time, worker (mm_env_worker) and pid where the record has none. The time,
-- recipient and msg_id come typed (ts_typed, recipient_typed, msg_id_typed): by typed_in_sql for the SQL
-- parsers, by the compiled readers themselves (stage_logfmt_tokens, stage_jsonl_tokens).
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
-- Template: the staged table {ident:staged} the compiled readers fill (stage_logfmt_tokens, stage_jsonl_tokens),
-- with the columns typed_columns selects; create_files' empty staged_0 is one too. The columns of (nearly) one distinct value per line are stored
-- uncompressed: DuckDB's analysis of them (DICT_FSST) cost a third of the logfmt staging (a sixth of the JSON
-- Lines one) and saved little on random ids, and the scans of `sends` read them faster. (The SQL parsers keep
-- CREATE TABLE AS: the same table cost their reads of the lines inside an envelope 0.3 CPU s per 1M lines more,
-- where their plain reads saved as much.)
-- dialect: duckdb
CREATE OR REPLACE TABLE {ident:staged} (
    ts TIMESTAMPTZ, event VARCHAR, worker VARCHAR, incarnation VARCHAR, campaign VARCHAR, step VARCHAR,
    recipient VARCHAR USING COMPRESSION uncompressed, candidate VARCHAR USING COMPRESSION uncompressed,
    msg_id VARCHAR USING COMPRESSION uncompressed, shard VARCHAR, lease_s DOUBLE, test_id VARCHAR,
    variant VARCHAR, status VARCHAR, attempt INTEGER, error VARCHAR, count BIGINT,
    recipient_raw VARCHAR USING COMPRESSION uncompressed, problem VARCHAR, line VARCHAR, env mm_envelope
)

-- name: pick_value
-- Template: one of a line's values (`vals` at position {lit:at}) when it is not blank (a field fed by several keys
-- is the first_value of their picks, in the field map's order: see ingest.pick_columns).
-- dialect: duckdb
CASE WHEN trim(vals[{lit:at}]) <> '' THEN vals[{lit:at}] END

-- name: mark_truncated_row
-- A last line without a newline may have been cut off mid-write. A complete record is kept (many writers
-- never end the file with a newline); a line that did not parse, or a send that lacks its recipient or
-- message id, is marked truncated (:text is that line, :row its row in the staged table).
-- dialect: duckdb
UPDATE {ident:staged} SET problem = 'truncated last line (no newline at end of file)', line = :text
WHERE rowid = :row AND ((problem IS NOT NULL AND problem <> 'blank line')
                        OR (problem IS NULL AND event = 'send' AND (recipient IS NULL OR msg_id IS NULL)))

-- name: mark_long_lines
-- The lines of a staged file too long to read (forensics.ingest.repair: :lines, their numbers; :texts, what the
-- repaired copy kept of each) are skipped lines, :reason, whatever their first bytes parsed as; without a time
-- (the --since/--until window cannot place them).
-- dialect: duckdb
UPDATE {ident:staged} SET problem = :reason, line = cut.text, ts = NULL
FROM (SELECT unnest(:lines::BIGINT[]) AS line_no, unnest(:texts::VARCHAR[]) AS text) cut
WHERE {ident:staged}.rowid = cut.line_no - 1

-- name: mark_long_lines_enveloped
-- mark_long_lines for a file read through an envelope, whose rows are numbered by the line each came from (as
-- skipped_part_enveloped numbers them).
-- dialect: duckdb
UPDATE {ident:staged} SET problem = :reason, line = cut.text, ts = NULL
FROM (SELECT unnest(:lines::BIGINT[]) AS line_no, unnest(:texts::VARCHAR[]) AS text) cut
WHERE coalesce({ident:staged}.env.line_no, {ident:staged}.rowid + 1) = cut.line_no

-- name: register_file
-- A staged file: its label, the line of its CSV header (0 when it has none; lines up to it are not data),
-- where its lines are (the staged table, from row :first_row on), and the envelope they were read from (NULL
-- for none).
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
-- `events` (records) and `skipped` (lines that are not records, with why) over every staged file, numbered by
-- their place in the file: views, no copy of the data ({frag:relation} is VIEW), or, for a case of many files,
-- tables (TABLE: a union of hundreds of tables would be planned again in every query). {union:events} and
-- {union:skipped} hold those blocks, one per staged table. `envelope` is where a record came from when its
-- file was wrapped by a platform (time, stream, host, unit, container, pid; NULL otherwise).
-- {frag:window} keeps the records of the --since/--until window (TRUE without one), and the skipped lines in it
-- or without a readable time (those cannot be placed; see forensics/ingest/window.py).
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
-- Template: whether a line's time (u.ts) is inside the --since/--until window, both ends included; an open end
-- is -infinity or infinity. The ends are literals ({lit:since}, {lit:until}: ISO texts in UTC) because a
-- view's body takes no parameter.
-- dialect: duckdb
u.ts BETWEEN {lit:since}::TIMESTAMPTZ AND {lit:until}::TIMESTAMPTZ

-- name: time_in_session_zone
-- A --since/--until time given without a zone, read in the session's zone (--tz, set while files are read) the
-- way the logs' own zone-less times are.
-- dialect: duckdb
SELECT CAST(:at AS TIMESTAMPTZ) AS at

-- name: records_time_range
-- The first and last time among the records of every staged file, and how many there are: what a --since or
-- --until duration counts back from, and the range named when a window holds no send.
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
-- A provider export read beside windowed logs keeps the same --since/--until window (:since, :until; NULL: an
-- open end), so a log send outside the window is not taken for one the log misses; a provider row without a
-- time cannot be placed and stays. Returns how many rows were left out.
-- dialect: duckdb
DELETE FROM provider_sends WHERE sent_at < :since::TIMESTAMPTZ OR sent_at > :until::TIMESTAMPTZ

-- name: window_kept
-- What a --since/--until window kept: real sends, and lines that would be records but carry no readable time
-- (kept among the skipped lines, since they cannot be placed).
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
-- Template: the records of a staged file read through an envelope, numbered by the file's line (or the entry of
-- its JSON document) each came from (env.line_no, or the staged row's own number where each entry was one line:
-- envelope_flat_lines), with their envelope.
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
-- Real sends: a send event with a msg_id and a success (or absent) status; one row per msg_id and recipient
-- (a line logged twice is one send; one provider id may cover several recipients of one API call: the first of
-- each, by time, file and line, is kept). `sends` is a TEMP VIEW over `events`, not a copy: each query reads the
-- records it needs from the staged tables (compressed in a large case's file) instead of a table of every send
-- held in memory, which at 10.7M lines (~230 bytes a send, 2 GB) outgrew the memory limit and made every
-- later scan read spilled blocks back. Only the repeats are written down (`send_repeats`, the file and line
-- of every later copy of a (msg_id, recipient)), found by sorting their 64-bit hashes and then compared exactly
-- within the few groups whose hash occurs twice; the view leaves those lines out. A view has no rowid: a send
-- is known by its file and line, packed into one integer by mm_send_id (the file's number from `send_files`).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE send_repeats AS
WITH ok AS NOT MATERIALIZED (  -- scanned twice rather than held: 10M sends do not fit
    SELECT source, line_no AS line, ts, msg_id, recipient, hash(msg_id, recipient) AS h
    FROM events
    WHERE event = 'send' AND msg_id IS NOT NULL AND mm_ok_status(status) AND recipient IS NOT NULL AND recipient <> ''
), repeated AS (  -- hashes that occur twice, found by sorting them (a GROUP BY of 10M hashes, nearly all
    -- distinct, took twice the CPU: its hash table outgrows the caches)
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
-- Skipped lines that look like a mail-send record (:pattern matches a send key, an address or a send event), or
-- that were too long to read (:too_long: what they held cannot be told), per file: how many, and where the first
-- of them are.
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
