-- JSON Lines (one object per line, nested keys as dotted paths) → a staged table, read by SQL (stage_jsonl) or by
-- the compiled reader (stage_jsonl_tokens, which leaves the lines it cannot read to the same SQL): both give the
-- same rows. Shared pieces: ingest.sql.

-- name: stage_jsonl
-- JSON Lines read by SQL: each field from one JSONPath extraction of :paths (:rare_paths only on lines :rare_keys
-- matches), picked by {list:picks} from `vals` or `rare_vals`. {frag:lines}: the file, or the lines inside its
-- envelope.
-- dialect: duckdb
-- fragments: picks=text_column
-- fragments: lines=mm_lines|mm_unwrapped
CREATE OR REPLACE TABLE {ident:staged} AS
WITH lines AS (
    SELECT line, env, TRUE AS deferred, NULL::VARCHAR AS settled_problem FROM {frag:lines}(:path, :delim)
), {block:jsonl_texts}, {block:typed_in_sql}, {block:typed_columns}

-- name: stage_jsonl_tokens
-- JSON Lines read by the compiled reader: {ident:tokens} is its Arrow stream (stage_jsonl's text columns, named by
-- {idents:text_columns}, a problem code: 1 blank, 2 left to SQL, and the fields it typed itself). A line it left
-- (`deferred`) and a time without a zone are read and typed as stage_jsonl does, into staged_table. {frag:env}: no
-- envelope, or the stream's `env`.
-- dialect: duckdb
-- fragments: picks=deferred_text_column|carried_column
-- fragments: env=mm_no_envelope()|env
{block:staged_table};
INSERT INTO {ident:staged}
WITH lines AS (
    SELECT line, {frag:env} AS env,
           {idents:text_columns},
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
-- Template: the text columns and problem of the JSON Lines `lines` that SQL reads (`deferred`): one JSON parse per
-- object line (try() gives NULL on invalid JSON); only a line that is not an object is validated and typed.
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
-- Template: a column of the compiled JSON Lines reader's stream, carried as it is.
-- dialect: duckdb
{ident:column}

-- name: deferred_text_column
-- Template: a text column from the compiled reader ({ident:column}) or, on a line it left to SQL, as stage_jsonl
-- reads it ({frag:value}).
-- dialect: duckdb
-- fragments: value=pick_value|pick_rare_value|first_value|NULL
CASE WHEN deferred THEN {frag:value} ELSE {ident:column} END AS {ident:column}

-- name: pick_rare_value
-- Template: pick_value of a rare key (`rare_vals` at {lit:at}). NULL first where the line has no rare key: taking
-- an element of a NULL list row by row is slow, and a CASE chain is cheaper than an AND.
-- dialect: duckdb
CASE WHEN rare_vals IS NULL THEN NULL WHEN trim(rare_vals[{lit:at}]) <> '' THEN rare_vals[{lit:at}] END

-- name: json_structure
-- The key structure of the JSON objects among a file's first lines (to find dotted paths).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_unwrapped
SELECT json_group_structure(json(line)) AS structure
FROM (SELECT line FROM {frag:lines}(:path, :delim) LIMIT 20000)
WHERE json_valid(line) AND json_type(line) = 'OBJECT'
