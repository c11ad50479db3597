-- logfmt (key=value pairs) → a staged table: read by SQL (stage_logfmt) or by the compiled reader
-- (stage_logfmt_tokens); both give the same rows. Shared pieces (text_column, typed_columns): ingest.sql.

-- name: sample_logfmt_keys
-- The keys used on a sample of a file's first lines (so only those get a regex each; see stage_logfmt), read
-- from the file (mm_lines) or from the lines inside its envelope (mm_unwrapped, queries/envelopes.sql).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_unwrapped
SELECT DISTINCT unnest(regexp_extract_all(' ' || line, '\s([^\s="]+)=', 1)) AS key
FROM (SELECT line FROM {frag:lines}(:path, :delim) LIMIT 20000)

-- name: logfmt_value
-- Template for one key of a logfmt line `l` (padded with a leading space). The cheap `contains` guard lets
-- RE2 run only where the key occurs; the literal prefix keeps it fast; values are unquoted once, later. On a
-- line whose quoted value itself holds ` k=` (`shady`, e.g. error="retry lead=x"), the value comes from the
-- line's pairs (`pair_keys`/`pair_values`, see stage_logfmt), where a quoted value is one pair whatever it
-- holds (NULL if the key occurs only inside one). {lit:key} is the key, {lit:key_re} the key as a regex
-- (ingest.logfmt_field): literals, so each regex is constant; several keys of a field are a first_value.
-- dialect: duckdb
CASE WHEN contains(l, ' ' || {lit:key} || '=') THEN
    CASE WHEN shady THEN pair_values[list_position(pair_keys, {lit:key})]
         ELSE regexp_extract(l, ' ' || {lit:key_re} || '=("(?:[^"\\]|\\.)*"|[^\s"]*)', 1) END END

-- name: when_rare
-- Template: a logfmt field's value from the keys tried only on lines flagged `rare` (where one regex found
-- one of them).
-- dialect: duckdb
-- fragments: value=logfmt_value|first_value
CASE WHEN rare THEN {frag:value} END

-- name: stage_logfmt
-- logfmt: key=value pairs (quoted values may hold spaces and \" escapes); an ISO timestamp may lead the line.
-- One parallel pass straight from the file into typed columns: the staged table ({ident:staged}) keeps the
-- file's line order, so a line's number is its rowid + 1. {list:fields} are the canonical text columns, each
-- from logfmt_value: the sampled keys first, then (only on lines where :rare_keys matches, one regex) every
-- other alias of the vocabulary. {block:typed_columns} is that block. {frag:lines} reads the file, or the lines
-- inside its envelope.
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
-- logfmt read by the compiled tokenizer (forensics.ingest.tokenizer): {ident:tokens} is its Arrow stream, one
-- row per line in file order, of the text columns stage_logfmt computes with regexes (the line where it may be
-- kept, each canonical field's unquoted text, the leading timestamp already in ts_text), a problem code, and
-- the fields it typed itself (the recipient's normal form, the msg_id, the timestamp when it has an explicit
-- zone, else NULL), typed here exactly as stage_logfmt types them (the same columns: staged rows of both paths
-- are held equal). {block:typed_columns} is that block. {frag:env} is the lines' envelope: none for a file's
-- lines, else the `env` column of the tokens (envelope_tokens).
-- The table is staged_table's.
-- dialect: duckdb
-- fragments: env=mm_no_envelope()|env
{block:staged_table};
INSERT INTO {ident:staged}
WITH unquoted AS (
    SELECT line, {frag:env} AS env,
           ts_text, event_text, worker, incarnation, campaign, step, recipient_text, candidate, msg_id_text, shard,
           lease_text, test_id, variant, status, attempt_text, error, count_text,
           -- the tokenizer types every recipient and msg_id (NULL only where mm_address / mm_msg_id give NULL),
           -- and the times with a zone: any other time is typed as the SQL parsers type it (CASE, not coalesce:
           -- DuckDB's coalesce evaluates every argument on every row)
           CASE WHEN ts_typed IS NOT NULL THEN ts_typed ELSE mm_ts(ts_text) END AS ts_typed,
           recipient_typed, msg_id_typed,
           CASE problem_code WHEN 1 THEN 'blank line' WHEN 2 THEN 'no key=value pairs' END AS problem
    FROM {ident:tokens}
), {block:typed_columns}
