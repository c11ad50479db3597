-- Ingest: raw lines → parsed key/value lists → canonical `events`.
-- Everything runs inside DuckDB; Python only chooses files and key names.

-- name: ingest_macros
-- Helper macros: pick the first non-empty value among keys, parse timestamps, durations, event names.
-- Timestamps without a zone are UTC, and so is every timestamp shown.
SET TimeZone = 'UTC';
CREATE OR REPLACE TEMP MACRO mm_pick(keys, vals, wanted) AS
    list_filter(list_transform(wanted, lambda k: vals[list_position(keys, k)]),
                lambda x: x IS NOT NULL AND trim(x) <> '')[1];
CREATE OR REPLACE TEMP MACRO mm_ts(t) AS CASE
    WHEN t IS NULL THEN NULL
    WHEN regexp_full_match(trim(t), '[0-9]{9,11}(\.[0-9]+)?') THEN to_timestamp(TRY_CAST(trim(t) AS DOUBLE))
    WHEN regexp_full_match(trim(t), '[0-9]{12,14}(\.[0-9]+)?') THEN to_timestamp(TRY_CAST(trim(t) AS DOUBLE) / 1000)
    ELSE TRY_CAST(trim(t) AS TIMESTAMPTZ) END;
CREATE OR REPLACE TEMP MACRO mm_seconds(v) AS
    TRY_CAST(regexp_extract(trim(v), '^([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?$', 1) AS DOUBLE)
    * CASE regexp_extract(lower(trim(v)), '^[0-9.]+\s*(ms|s|m|h)?$', 1)
        WHEN 'ms' THEN 0.001 WHEN 'm' THEN 60 WHEN 'h' THEN 3600 ELSE 1 END;
CREATE OR REPLACE TEMP MACRO mm_event(e) AS CASE
    WHEN lower(trim(e)) IN ('send', 'sent', 'email_sent', 'send_ok', 'delivered_to_provider') THEN 'send'
    WHEN lower(trim(e)) IN ('claim', 'claimed', 'lease_acquired', 'acquire') THEN 'claim'
    WHEN lower(trim(e)) IN ('renew', 'lease_renew', 'heartbeat', 'extend') THEN 'renew'
    WHEN lower(trim(e)) IN ('release', 'released', 'batch_done', 'complete', 'ack') THEN 'release'
    WHEN lower(trim(e)) IN ('expire', 'lease_expired', 'expired') THEN 'expire'
    WHEN lower(trim(e)) IN ('start', 'worker_start', 'startup', 'boot', 'started') THEN 'start'
    WHEN lower(trim(e)) IN ('error', 'send_error', 'send_failed', 'exception') THEN 'error'
    ELSE lower(trim(e)) END;
CREATE OR REPLACE TEMP MACRO mm_ok_status(s) AS
    s IS NULL OR lower(trim(s)) IN ('sent', 'ok', 'success', 'accepted', 'queued', 'delivered');
CREATE OR REPLACE TEMP MACRO mm_msg_id(m) AS
    nullif(trim(CASE WHEN regexp_full_match(trim(m), '<.*>') THEN trim(m)[2:-2] ELSE trim(m) END), '');
CREATE OR REPLACE TEMP MACRO mm_unquote(v) AS CASE
    WHEN v LIKE '"%"' AND length(v) >= 2 THEN replace(replace(v[2:-2], '\"', '"'), '\\', '\')
    ELSE v END;
CREATE OR REPLACE TEMP MACRO mm_unusable(ts_text, event_text, msg_id_text) AS
    mm_ts(ts_text) IS NULL OR (nullif(trim(event_text), '') IS NULL AND mm_msg_id(msg_id_text) IS NULL);
-- A line's text is kept only where it is needed (a skip's text, or events.raw in a saved case): at 10M
-- lines the text alone is several GB.
CREATE OR REPLACE TEMP MACRO mm_kept_line(line, keep_raw, problem, ts_text, event_text, msg_id_text) AS
    CASE WHEN keep_raw OR problem IS NOT NULL OR mm_unusable(ts_text, event_text, msg_id_text) THEN line END;
-- Every physical line of a file with its number: DuckDB's CSV reader with a delimiter no log contains
-- (read in parallel, order kept, blank lines kept as NULL).
CREATE OR REPLACE TEMP MACRO mm_lines(path, sep) AS TABLE
    SELECT row_number() OVER () AS line_no, line
    FROM read_csv(path, delim = sep, quote = '', escape = '', header = false,
                  columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
                  null_padding = true, max_line_size = 16000000)

-- name: create_parsed
-- Staging table: one row per physical line with the raw text of each canonical field, or why it is not a record.
CREATE OR REPLACE TEMP TABLE parsed (
    source VARCHAR, line_no BIGINT, line VARCHAR,
    ts_text VARCHAR, event_text VARCHAR, worker VARCHAR, incarnation VARCHAR, campaign VARCHAR, step VARCHAR,
    recipient_text VARCHAR, candidate VARCHAR, msg_id_text VARCHAR, shard VARCHAR, lease_text VARCHAR,
    test_id VARCHAR, variant VARCHAR, status VARCHAR, attempt_text VARCHAR, error VARCHAR, count_text VARCHAR,
    problem VARCHAR
)

-- name: read_file_lines
-- Number a file's lines into a table first: the numbering is one ordered pipeline, and everything parsed
-- from the table afterwards runs on every core.
CREATE OR REPLACE TEMP TABLE file_lines AS SELECT line_no, line FROM mm_lines(:path, :delim)

-- name: sample_logfmt_keys
-- The keys used on a sample of a file's lines (so only those get a regex each; see parse_logfmt).
SELECT DISTINCT unnest(regexp_extract_all(' ' || line, '\s([^\s="]+)=', 1)) AS key
FROM (SELECT line FROM file_lines USING SAMPLE 20000 ROWS)

-- name: logfmt_value
-- Template for one key of a logfmt line `l` (padded with a leading space). The cheap `contains` guard lets
-- RE2 run only where the key occurs; the literal prefix keeps it fast; values are unquoted once, later. {key} and {key_re} are filled by
-- ingest.logfmt_field (SQL-quoted, regex-escaped); the fallback order of several keys is a coalesce.
CASE WHEN contains(l, ' {key}=') THEN regexp_extract(l, ' {key_re}=("(?:[^"\\]|\\.)*"|[^\s"]*)', 1) END

-- name: parse_logfmt
-- logfmt: key=value pairs (quoted values may hold spaces and \" escapes); an ISO timestamp may lead the line.
-- {fields} is the list of canonical field expressions built from logfmt_value: the sampled keys first, then
-- (only on lines where :rare_keys matches, one regex) every other alias of the vocabulary.
INSERT INTO parsed
WITH lines AS (
    SELECT line_no, line, ' ' || line AS l, regexp_matches(' ' || line, :rare_keys) AS rare FROM file_lines
), fields AS (
    SELECT line_no, line, {fields},
           nullif(regexp_extract(line, '^\s*([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)(?:\s|$)', 1), '') AS lead_ts
    FROM lines
), unquoted AS (
    SELECT line_no, line, coalesce(mm_unquote(ts_text), lead_ts) AS ts_text, mm_unquote(event_text) AS event_text,
           mm_unquote(worker) AS worker, mm_unquote(incarnation) AS incarnation, mm_unquote(campaign) AS campaign,
           mm_unquote(step) AS step, mm_unquote(recipient_text) AS recipient_text, mm_unquote(candidate) AS candidate,
           mm_unquote(msg_id_text) AS msg_id_text, mm_unquote(shard) AS shard, mm_unquote(lease_text) AS lease_text,
           mm_unquote(test_id) AS test_id, mm_unquote(variant) AS variant, mm_unquote(status) AS status,
           mm_unquote(attempt_text) AS attempt_text, mm_unquote(error) AS error, mm_unquote(count_text) AS count_text,
           CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
                WHEN NOT contains(line, '=') THEN 'no key=value pairs' END AS problem
    FROM fields
)
SELECT :label, line_no, mm_kept_line(line, :keep_raw, problem, ts_text, event_text, msg_id_text),
       ts_text, event_text, worker, incarnation, campaign, step, recipient_text, candidate, msg_id_text, shard,
       lease_text, test_id, variant, status, attempt_text, error, count_text, problem
FROM unquoted

-- name: parse_jsonl
-- JSON Lines: one object per line; nested keys are read as dotted paths (:keys) through JSONPaths (:paths);
-- :k_<field> lists the keys that feed each canonical field.
INSERT INTO parsed
WITH lines AS (
    SELECT line_no, line FROM file_lines
), typed AS (
    SELECT line_no, line, CASE WHEN json_valid(line) THEN json_type(line) END AS jtype FROM lines
), valued AS (
    SELECT line_no, line, jtype,
           CASE WHEN jtype = 'OBJECT' THEN json_extract_string(line, :paths::VARCHAR[]) END AS vals
    FROM typed
), picked AS (
    SELECT line_no, line, {picks},
           CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
                WHEN jtype IS NULL THEN 'not valid JSON'
                WHEN jtype <> 'OBJECT' THEN 'JSON but not an object' END AS problem
    FROM valued
)
SELECT :label, line_no, mm_kept_line(line, :keep_raw, problem, ts_text, event_text, msg_id_text),
       ts_text, event_text, worker, incarnation, campaign, step, recipient_text, candidate, msg_id_text, shard,
       lease_text, test_id, variant, status, attempt_text, error, count_text, problem
FROM picked

-- name: pick_value
-- Template: the first non-empty value among the keys that feed one canonical field ({column} is its name).
mm_pick(:keys::VARCHAR[], vals, :k_{field}::VARCHAR[]) AS {column}

-- name: json_structure
-- The union of the key structure of the JSON objects in a sample of a file (to discover dotted paths).
SELECT json_group_structure(json(line)) AS structure
FROM (SELECT line FROM file_lines USING SAMPLE 100000 ROWS)
WHERE json_valid(line) AND json_type(line) = 'OBJECT'

-- name: parse_csv
-- CSV: the first non-blank line is the header (:keys); cells may be "quoted, with "" escapes"; empty = absent.
INSERT INTO parsed
WITH lines AS (
    SELECT line_no, line FROM file_lines
), cells AS (
    SELECT line_no, line,
           list_transform(regexp_extract_all(',' || line, ',("(?:[^"]|"")*"|[^,]*)', 1),
                          lambda c: nullif(CASE WHEN c LIKE '"%"' AND length(c) >= 2
                                                THEN replace(c[2:-2], '""', '"') ELSE c END, '')) AS vals
    FROM lines WHERE line_no > :header_line
), picked AS (
    SELECT line_no, line, {picks},
           CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
                WHEN len(vals) <> len(:keys::VARCHAR[]) THEN 'wrong number of CSV cells' END AS problem
    FROM cells
)
SELECT :label, line_no, mm_kept_line(line, :keep_raw, problem, ts_text, event_text, msg_id_text),
       ts_text, event_text, worker, incarnation, campaign, step, recipient_text, candidate, msg_id_text, shard,
       lease_text, test_id, variant, status, attempt_text, error, count_text, problem
FROM picked

-- name: mark_truncated_last_line
-- A last line without a newline was cut off mid-write: never trust it as a record.
UPDATE parsed SET problem = 'truncated last line (no newline at end of file)',
                  line = (SELECT f.line FROM file_lines f WHERE f.line_no = parsed.line_no)
WHERE source = :label AND line_no = (SELECT max(line_no) FROM parsed WHERE source = :label)
  AND problem IS NULL

-- name: build_events
-- Canonical events: one row per record (a line with a readable timestamp and an event or a msg_id), typed.
-- The original line is kept as `raw` only when :keep_raw (a saved case), to bound memory on big cases.
CREATE OR REPLACE TABLE events AS
SELECT source, line_no, mm_ts(ts_text) AS ts,
       CASE WHEN nullif(trim(event_text), '') IS NOT NULL THEN mm_event(event_text)
            WHEN msg_id_text IS NOT NULL AND status IS NOT NULL AND mm_ok_status(status) THEN 'send' END AS event,
       worker, incarnation, campaign, step,
       lower(trim(recipient_text)) AS recipient, candidate, mm_msg_id(msg_id_text) AS msg_id,
       shard, mm_seconds(lease_text) AS lease_s, test_id, variant, status,
       TRY_CAST(attempt_text AS INTEGER) AS attempt, error, TRY_CAST(count_text AS BIGINT) AS count,
       recipient_text AS recipient_raw, CASE WHEN :keep_raw THEN line END AS raw
FROM parsed
WHERE problem IS NULL AND NOT mm_unusable(ts_text, event_text, msg_id_text)

-- name: create_skipped
-- Lines that are not records, with where they are and why.
CREATE OR REPLACE TABLE skipped AS
SELECT source, line_no,
       coalesce(problem, CASE WHEN mm_ts(ts_text) IS NULL THEN 'no readable timestamp'
                              ELSE 'no event or msg_id' END) AS reason,
       line AS text
FROM parsed
WHERE problem IS NOT NULL OR mm_unusable(ts_text, event_text, msg_id_text)

-- name: drop_staging
-- Free the staged lines once events and skipped are built.
DROP TABLE IF EXISTS parsed;
DROP TABLE IF EXISTS file_lines

-- name: build_sends
-- Real sends: a send event with a msg_id and a success (or absent) status; one row per msg_id and recipient
-- (a line logged twice is one send; one provider id may cover several recipients of one API call).
CREATE OR REPLACE TABLE sends AS
SELECT source, line_no AS line, ts, worker, incarnation, coalesce(campaign, '') AS campaign,
       coalesce(step, '') AS step, recipient, candidate, msg_id, shard, test_id, variant, attempt
FROM events
WHERE event = 'send' AND msg_id IS NOT NULL AND mm_ok_status(status) AND recipient IS NOT NULL AND recipient <> ''
QUALIFY row_number() OVER (PARTITION BY msg_id, recipient ORDER BY ts, source, line_no) = 1

-- name: file_counts
-- Per input file: physical lines, records kept, lines skipped, and the first skipped line numbers.
SELECT p.source,
       max(line_no) AS lines,
       (SELECT count(*) FROM events e WHERE e.source = p.source) AS records,
       (SELECT count(*) FROM skipped s WHERE s.source = p.source) AS skipped,
       (SELECT list(line_no ORDER BY line_no)[1:10] FROM skipped s WHERE s.source = p.source) AS first_skipped_lines
FROM parsed p GROUP BY p.source

-- name: forget_source
-- Drop a file's staged lines before it is read again (e.g. as Latin-1 after bad UTF-8).
DELETE FROM parsed WHERE source = :label

-- name: first_fatal_skip
-- The first non-blank line that is not a record (what --strict stops on).
SELECT source, line_no, reason FROM skipped WHERE reason <> 'blank line' ORDER BY source, line_no LIMIT 1
