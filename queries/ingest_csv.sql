-- CSV with a header line → a staged table (read by SQL only). Shared pieces: ingest.sql.

-- name: stage_csv
-- CSV: line :header_line is the header (:keys); a cell may be "quoted, with "" escapes"; empty is absent. The lines
-- up to the header are staged too (the views leave them out).
-- dialect: duckdb
-- fragments: picks=text_column
CREATE OR REPLACE TABLE {ident:staged} AS
WITH lines AS (
    SELECT line, env FROM mm_lines(:path, :delim)
), cells AS (
    SELECT line, env,
           list_transform(regexp_extract_all(',' || line, ',("(?:[^"]|"")*"|[^,]*)', 1),
                          lambda c: nullif(CASE WHEN c LIKE '"%"' AND length(c) >= 2
                                                THEN replace(c[2:-2], '""', '"') ELSE c END, '')) AS vals
    FROM lines
), texts AS (
    SELECT line, env, {list:picks},
           CASE WHEN line IS NULL OR mm_blank(line) THEN 'blank line'
                WHEN len(vals) <> len(:keys::VARCHAR[]) THEN 'wrong number of CSV cells' END AS problem
    FROM cells
), {block:typed_in_sql}, {block:typed_columns}
