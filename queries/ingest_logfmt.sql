-- logfmt (key=value pairs, an ISO time may lead the line) → a staged table, read by SQL (stage_logfmt) or by the
-- compiled reader (stage_logfmt_tokens): both give the same rows. Shared pieces: ingest.sql.

-- name: sample_logfmt_keys
-- The keys used on a file's first lines (only those get a regex each in stage_logfmt), from the file or from the
-- lines inside its envelope.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_unwrapped
SELECT DISTINCT unnest(regexp_extract_all(' ' || line, '\s([^\s="]+)=', 1)) AS key
FROM (SELECT line FROM {frag:lines}(:path, :delim) LIMIT 20000)

-- name: logfmt_value
-- Template: key {lit:key}'s value on the padded line `l`; the `contains` guard runs the regex only where the key
-- occurs. On a `shady` line (a quoted value holding ` k=`) the value comes from the line's pairs, where a quoted
-- value is one pair whatever it holds. Literals keep each regex constant.
-- dialect: duckdb
CASE WHEN contains(l, ' ' || {lit:key} || '=') THEN
    CASE WHEN shady THEN pair_values[list_position(pair_keys, {lit:key})]
         ELSE regexp_extract(l, ' ' || {lit:key_re} || '=("(?:[^"\\]|\\.)*"|[^\s"]*)', 1) END END

-- name: when_rare
-- Template: a field's value from the keys tried only on lines flagged `rare` (where one regex found one of them).
-- dialect: duckdb
-- fragments: value=logfmt_value|first_value
CASE WHEN rare THEN {frag:value} END

-- name: stage_logfmt
-- logfmt read by SQL in one parallel pass into typed columns; the staged table keeps the file's order (a line's
-- number is rowid + 1). {list:fields}: each canonical column from the sampled keys, then, on lines :rare_keys
-- matches, every other alias. {frag:lines}: the file, or the lines inside its envelope.
-- dialect: duckdb
-- fragments: fields=text_column
-- fragments: lines=mm_lines|mm_unwrapped
CREATE OR REPLACE TABLE {ident:staged} AS
WITH lines AS (
    SELECT line, env, ' ' || line AS l, regexp_matches(' ' || line, :rare_keys) AS rare,
           contains(line, '="') AND regexp_matches(line, '="(?:[^"\\]|\\.)*?\s[^\s="]+=') AS shady
    FROM {frag:lines}(:path, :delim)
), paired AS (
    -- a shady line's key=value pairs, left to right: a quoted value is consumed whole, so a `k=` inside it
    -- is never taken for a key
    SELECT *, CASE WHEN shady THEN regexp_extract_all(l, '\s([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)', 1) END AS pair_keys,
              CASE WHEN shady THEN regexp_extract_all(l, '\s([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)', 2) END AS pair_values
    FROM lines
), fields AS (
    SELECT line, env, {list:fields},
           nullif(regexp_extract(line, '^\s*([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)(?:\s|$)', 1), '') AS lead_ts
    FROM paired
), texts AS (
    SELECT line, env, coalesce(mm_unquote(ts_text), lead_ts) AS ts_text, mm_unquote(event_text) AS event_text,
           mm_unquote(worker) AS worker, mm_unquote(incarnation) AS incarnation, mm_unquote(campaign) AS campaign,
           mm_unquote(step) AS step, mm_unquote(recipient_text) AS recipient_text, mm_unquote(candidate) AS candidate,
           mm_unquote(msg_id_text) AS msg_id_text, mm_unquote(shard) AS shard, mm_unquote(lease_text) AS lease_text,
           mm_unquote(test_id) AS test_id, mm_unquote(variant) AS variant, mm_unquote(status) AS status,
           mm_unquote(attempt_text) AS attempt_text, mm_unquote(error) AS error, mm_unquote(count_text) AS count_text,
           CASE WHEN line IS NULL OR mm_blank(line) THEN 'blank line'
                WHEN NOT contains(line, '=') THEN 'no key=value pairs' END AS problem
    FROM fields
), {block:typed_in_sql}, {block:typed_columns}

-- name: stage_logfmt_tokens
-- logfmt read by the compiled reader: {ident:tokens} is its Arrow stream (stage_logfmt's text columns, named by
-- {idents:text_columns}, a problem code, and the recipient, msg_id and zoned time it typed itself), typed here as
-- stage_logfmt types them into staged_table. {frag:env}: no envelope, or the stream's `env`.
-- dialect: duckdb
-- fragments: env=mm_no_envelope()|env
{block:staged_table};
INSERT INTO {ident:staged}
WITH unquoted AS (
    SELECT line, {frag:env} AS env,
           {idents:text_columns},
           -- a time without a zone is typed as stage_logfmt types it (CASE, not coalesce, which evaluates
           -- every argument on every row)
           CASE WHEN ts_typed IS NOT NULL THEN ts_typed ELSE mm_ts(ts_text) END AS ts_typed,
           recipient_typed, msg_id_typed,
           CASE problem_code WHEN 1 THEN 'blank line' WHEN 2 THEN 'no key=value pairs' END AS problem
    FROM {ident:tokens}
), {block:typed_columns}
