-- JSON Lines → a staged table: read by SQL (stage_jsonl) or by the compiled reader (stage_jsonl_tokens, which
-- leaves the lines it cannot read to the same SQL); both give the same rows. Shared pieces: ingest.sql.

-- name: stage_jsonl
-- JSON Lines: one object per line; nested keys are read as dotted paths through JSONPaths (:paths), and
-- :rare_paths only on lines where :rare_keys matches; {list:picks} (pick_value, pick_rare_value) reads each canonical
-- field from `vals` or `rare_vals`. {block:jsonl_texts} and {block:typed_columns} are those blocks. {frag:lines}
-- reads the file, or the lines inside its envelope. Every line is read here (`deferred`).
-- dialect: duckdb
-- fragments: picks=text_column
-- fragments: lines=mm_lines|mm_unwrapped
CREATE OR REPLACE TABLE {ident:staged} AS
WITH lines AS (
    SELECT line, env, TRUE AS deferred, NULL::VARCHAR AS settled_problem FROM {frag:lines}(:path, :delim)
), {block:jsonl_texts}, {block:typed_in_sql}, {block:typed_columns}

-- name: stage_jsonl_tokens
-- JSON Lines read by the compiled reader (forensics.ingest.jsontokenizer): {ident:tokens} is its Arrow stream, one
-- row per line in file order, of the line, the canonical text columns stage_jsonl computes, a problem code
-- (1 a blank line, 2 a line it left to SQL: deferred, which is then read here with stage_jsonl's own expressions,
-- a CASE computing them on those rows only) and the fields it typed itself on the lines it read, as the logfmt
-- tokenizer types them (see stage_logfmt_tokens). Each of {list:picks} (deferred_text_column) takes the compiled
-- reader's column or, on a deferred line, the SQL's, the typed ones (carried_column) are carried through. A
-- deferred line, and a time without a zone, are typed as stage_jsonl types them (staged rows of both paths are
-- held equal). {frag:env} is the lines' envelope: none for a file's lines, else the `env` column of the tokens
-- (envelope_tokens). The table is staged_table's.
-- dialect: duckdb
-- fragments: picks=deferred_text_column|carried_column
-- fragments: env=mm_no_envelope()|env
{block:staged_table};
INSERT INTO {ident:staged}
WITH lines AS (
    SELECT line, {frag:env} AS env,
           ts_text, event_text, worker, incarnation, campaign, step, recipient_text, candidate, msg_id_text, shard,
           lease_text, test_id, variant, status, attempt_text, error, count_text,
           recipient_typed, msg_id_typed, ts_typed, problem_code = 2 AS deferred,
           CASE WHEN problem_code = 1 THEN 'blank line' END AS settled_problem
    FROM {ident:tokens}
), {block:jsonl_texts}, unquoted AS (
    SELECT * REPLACE (CASE WHEN ts_typed IS NOT NULL THEN ts_typed ELSE mm_ts(ts_text) END AS ts_typed,
                      CASE WHEN deferred THEN mm_address(recipient_text) ELSE recipient_typed END AS recipient_typed,
                      CASE WHEN deferred THEN mm_msg_id(msg_id_text) ELSE msg_id_typed END AS msg_id_typed)
    FROM texts
), {block:typed_columns}

-- name: jsonl_texts
-- Template: the text columns of the JSON Lines `lines` (line, env, whether SQL reads it: `deferred`, and the
-- problem of a line it does not read, settled_problem), for stage_jsonl and stage_jsonl_tokens. One JSON parse
-- per object line (invalid JSON makes the extraction fail: try() gives NULL); only lines that are not objects
-- are validated and typed. {list:picks} are the canonical text columns.
-- dialect: duckdb
-- fragments: picks=text_column|deferred_text_column|carried_column
objects AS (
    SELECT *, CASE WHEN deferred AND regexp_matches(line, '^[ \t\r]*\{')
                   THEN try(json_extract_string(line, :paths::VARCHAR[])) END AS vals
    FROM lines
), valued AS (
    SELECT *, CASE WHEN vals IS NOT NULL THEN 'OBJECT' WHEN deferred AND json_valid(line) THEN json_type(line) END AS jtype,
           CASE WHEN vals IS NOT NULL AND regexp_matches(line, :rare_keys)
                THEN json_extract_string(line, :rare_paths::VARCHAR[]) END AS rare_vals
    FROM objects
), texts AS (
    SELECT line, env, {list:picks},
           CASE WHEN NOT deferred THEN settled_problem
                WHEN line IS NULL OR mm_blank(line) THEN 'blank line'
                WHEN jtype IS NULL THEN 'not valid JSON'
                WHEN jtype <> 'OBJECT' THEN 'JSON but not an object' END AS problem
    FROM valued
)

-- name: carried_column
-- Template: a column of the compiled JSON Lines reader's stream carried as it is through jsonl_texts.
-- dialect: duckdb
{ident:column}

-- name: deferred_text_column
-- Template: one canonical text column of a line the compiled JSON Lines reader read ({ident:column}, its own),
-- or, on a line it deferred, read by SQL ({frag:value}, as stage_jsonl reads it).
-- dialect: duckdb
-- fragments: value=pick_value|pick_rare_value|first_value|NULL
CASE WHEN deferred THEN {frag:value} ELSE {ident:column} END AS {ident:column}

-- name: pick_rare_value
-- Template: pick_value of a rare key (`rare_vals` at position {lit:at}). It answers NULL first where the line has no
-- rare key (rare_vals NULL): taking an element of a NULL list row by row cost each chunk holding one line with a
-- rare key about 5,000 instructions a line (100,000 JSON lines, 64 of them naming a rare key: 517M more than
-- without those 64, 6.6 % of the read; 49M now). A CASE chain, not `rare_vals IS NOT NULL AND …`, which cost a
-- clean file 0.8 %.
-- dialect: duckdb
CASE WHEN rare_vals IS NULL THEN NULL WHEN trim(rare_vals[{lit:at}]) <> '' THEN rare_vals[{lit:at}] END

-- name: json_structure
-- The union of the key structure of the JSON objects among a file's first lines (to discover dotted paths).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_unwrapped
SELECT json_group_structure(json(line)) AS structure
FROM (SELECT line FROM {frag:lines}(:path, :delim) LIMIT 20000)
WHERE json_valid(line) AND json_type(line) = 'OBJECT'
