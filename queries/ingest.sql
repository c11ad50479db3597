-- Ingest: raw lines → parsed key/value lists → canonical `events`.
-- Everything runs inside DuckDB; Python only chooses files and key names.

-- name: ingest_macros
-- Helper macros: pick the first non-empty value among keys, parse timestamps, durations, event names.
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
    ELSE v END

-- name: create_parsed
-- Staging table: one row per physical line, with its key/value lists or why it could not be parsed.
CREATE OR REPLACE TEMP TABLE parsed (
    source VARCHAR, line_no BIGINT, line VARCHAR,
    keys VARCHAR[], vals VARCHAR[], problem VARCHAR
)

-- name: parse_logfmt
-- logfmt: key=value pairs (quoted values may hold spaces and \" escapes); an ISO timestamp may lead the line.
INSERT INTO parsed
WITH lines AS (
    SELECT row_number() OVER () AS line_no, line
    FROM read_csv(:path, delim = :delim, quote = '', escape = '', header = false,
                  columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
                  null_padding = true, max_line_size = 16000000)
), pairs AS (
    SELECT line_no, line,
           regexp_extract_all(line, '([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)') AS kv,
           regexp_extract(line, '^\s*([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)(?:\s|$)', 1) AS lead_ts
    FROM lines
)
SELECT :label, line_no, line,
       list_transform(kv, lambda p: split_part(p, '=', 1)) || CASE WHEN lead_ts <> '' THEN ['_line_ts'] ELSE [] END,
       list_transform(kv, lambda p: mm_unquote(p[strpos(p, '=') + 1:])) || CASE WHEN lead_ts <> '' THEN [lead_ts] ELSE [] END,
       CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
            WHEN len(kv) = 0 THEN 'no key=value pairs' END
FROM pairs

-- name: parse_jsonl
-- JSON Lines: one object per line; nested keys are read as dotted paths (:keys) through JSONPaths (:paths).
INSERT INTO parsed
WITH lines AS (
    SELECT row_number() OVER () AS line_no, line
    FROM read_csv(:path, delim = :delim, quote = '', escape = '', header = false,
                  columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
                  null_padding = true, max_line_size = 16000000)
), typed AS (
    SELECT line_no, line, CASE WHEN json_valid(line) THEN json_type(line) END AS jtype FROM lines
)
SELECT :label, line_no, line,
       CASE WHEN jtype = 'OBJECT' THEN :keys::VARCHAR[] END,
       CASE WHEN jtype = 'OBJECT' THEN json_extract_string(line, :paths::VARCHAR[]) END,
       CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
            WHEN jtype IS NULL THEN 'not valid JSON'
            WHEN jtype <> 'OBJECT' THEN 'JSON but not an object' END
FROM typed

-- name: json_structure
-- The union of the key structure of every JSON object in a file (to discover dotted paths).
SELECT json_group_structure(json(line)) AS structure
FROM read_csv(:path, delim = :delim, quote = '', escape = '', header = false,
              columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
              null_padding = true, max_line_size = 16000000)
WHERE json_valid(line) AND json_type(line) = 'OBJECT'

-- name: parse_csv
-- CSV: the first non-blank line is the header (:keys); cells may be "quoted, with "" escapes"; empty = absent.
INSERT INTO parsed
WITH lines AS (
    SELECT row_number() OVER () AS line_no, line
    FROM read_csv(:path, delim = :delim, quote = '', escape = '', header = false,
                  columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
                  null_padding = true, max_line_size = 16000000)
), cells AS (
    SELECT line_no, line,
           list_transform(regexp_extract_all(',' || line, ',("(?:[^"]|"")*"|[^,]*)', 1),
                          lambda c: nullif(CASE WHEN c LIKE '"%"' AND length(c) >= 2
                                                THEN replace(c[2:-2], '""', '"') ELSE c END, '')) AS cell
    FROM lines WHERE line_no > :header_line
)
SELECT :label, line_no, line, :keys::VARCHAR[], cell,
       CASE WHEN line IS NULL OR trim(line) = '' THEN 'blank line'
            WHEN len(cell) <> len(:keys::VARCHAR[]) THEN 'wrong number of CSV cells' END
FROM cells

-- name: mark_truncated_last_line
-- A last line without a newline was cut off mid-write: never trust it as a record.
UPDATE parsed SET problem = 'truncated last line (no newline at end of file)'
WHERE source = :label AND line_no = (SELECT max(line_no) FROM parsed WHERE source = :label)
  AND problem IS NULL

-- name: build_events
-- Canonical events: one row per record, typed columns; :k_<field> lists the present keys for each field.
CREATE OR REPLACE TABLE events AS
WITH picked AS (
    SELECT source, line_no, line,
           mm_pick(keys, vals, :k_ts) AS ts_text,
           mm_pick(keys, vals, :k_event) AS event_text,
           mm_pick(keys, vals, :k_worker) AS worker,
           mm_pick(keys, vals, :k_incarnation) AS incarnation,
           mm_pick(keys, vals, :k_campaign) AS campaign,
           mm_pick(keys, vals, :k_step) AS step,
           mm_pick(keys, vals, :k_recipient) AS recipient_text,
           mm_pick(keys, vals, :k_candidate) AS candidate,
           mm_pick(keys, vals, :k_msg_id) AS msg_id_text,
           mm_pick(keys, vals, :k_shard) AS shard,
           mm_pick(keys, vals, :k_lease) AS lease_text,
           mm_pick(keys, vals, :k_test_id) AS test_id,
           mm_pick(keys, vals, :k_variant) AS variant,
           mm_pick(keys, vals, :k_status) AS status,
           mm_pick(keys, vals, :k_attempt) AS attempt_text,
           mm_pick(keys, vals, :k_error) AS error,
           mm_pick(keys, vals, :k_count) AS count_text
    FROM parsed WHERE problem IS NULL
)
SELECT source, line_no, mm_ts(ts_text) AS ts,
       CASE WHEN event_text IS NOT NULL THEN mm_event(event_text)
            WHEN msg_id_text IS NOT NULL AND status IS NOT NULL AND mm_ok_status(status) THEN 'send' END AS event,
       worker, incarnation, campaign, step,
       lower(trim(recipient_text)) AS recipient, candidate, mm_msg_id(msg_id_text) AS msg_id,
       shard, mm_seconds(lease_text) AS lease_s, test_id, variant, status,
       TRY_CAST(attempt_text AS INTEGER) AS attempt, error, TRY_CAST(count_text AS BIGINT) AS count,
       recipient_text AS recipient_raw, line AS raw
FROM picked

-- name: split_unusable_records
-- Records without a readable timestamp, or with neither an event nor a msg_id, are skips, not events.
INSERT INTO skipped
SELECT source, line_no, CASE WHEN ts IS NULL THEN 'no readable timestamp' ELSE 'no event or msg_id' END, raw
FROM events WHERE ts IS NULL OR (event IS NULL AND msg_id IS NULL);
DELETE FROM events WHERE ts IS NULL OR (event IS NULL AND msg_id IS NULL)

-- name: create_skipped
-- Lines that are not records, with where they are and why.
CREATE OR REPLACE TABLE skipped AS
SELECT source, line_no, problem AS reason, line AS text FROM parsed WHERE problem IS NOT NULL

-- name: build_sends
-- Real sends: a send event with a msg_id and a success (or absent) status; one row per msg_id.
CREATE OR REPLACE TABLE sends AS
SELECT source, line_no AS line, ts, worker, incarnation, coalesce(campaign, '') AS campaign,
       coalesce(step, '') AS step, recipient, candidate, msg_id, shard, test_id, variant, attempt
FROM events
WHERE event = 'send' AND msg_id IS NOT NULL AND mm_ok_status(status) AND recipient IS NOT NULL AND recipient <> ''
QUALIFY row_number() OVER (PARTITION BY msg_id ORDER BY ts, source, line_no) = 1

-- name: file_counts
-- Per input file: physical lines, records kept, lines skipped, and the first skipped line numbers.
SELECT p.source,
       count(*) AS lines,
       (SELECT count(*) FROM events e WHERE e.source = p.source) AS records,
       (SELECT count(*) FROM skipped s WHERE s.source = p.source) AS skipped,
       (SELECT list(line_no ORDER BY line_no)[1:10] FROM skipped s WHERE s.source = p.source) AS first_skipped_lines
FROM parsed p GROUP BY p.source

-- name: parsed_keys
-- The distinct keys seen in one logfmt file (to resolve aliases once per case, not per line).
SELECT DISTINCT unnest(keys) AS key FROM parsed WHERE source = :label

-- name: forget_source
-- Drop a file's staged lines before it is read again (e.g. as Latin-1 after bad UTF-8).
DELETE FROM parsed WHERE source = :label

-- name: first_fatal_skip
-- The first non-blank line that is not a record (what --strict stops on).
SELECT source, line_no, reason FROM skipped WHERE reason <> 'blank line' ORDER BY source, line_no LIMIT 1
