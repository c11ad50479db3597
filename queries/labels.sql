-- The normal form of a label (a campaign, a step, an A/B test id): the SQL twin of
-- forensics.addresses.normalize_label, written once (label_normal_form) for PostgreSQL's label_pg_function and
-- DuckDB's label_duckdb_macro (macros.sql). tests/test_labels.py keeps Python, DuckDB and PostgreSQL equal; the
-- whitespace code points are WHITESPACE_CODE_POINTS, in order.

-- name: label_whitespace
-- Template: the code points a label is trimmed of (forensics.addresses.WHITESPACE), as one text.
-- dialect: duckdb postgres
(chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160) ||
 chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196) || chr(8197) ||
 chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202) || chr(8203) || chr(8232) ||
 chr(8233) || chr(8239) || chr(8287) || chr(12288) || chr(65279))

-- name: label_folded
-- Template: the text `label_text` trimmed of label_whitespace, ASCII A-Z lower-cased (translate, never lower(),
-- whose result depends on the engine and the server's locale).
-- dialect: duckdb postgres
translate(trim(BOTH {block:label_whitespace} FROM label_text), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')

-- name: label_normal_form
-- Template: mm_label's body: label_folded, and a label of ASCII digits only without its leading zeros (one 0 kept).
-- dialect: duckdb postgres
CASE WHEN {block:label_folded} <> '' AND ltrim({block:label_folded}, '0123456789') = ''
     THEN coalesce(nullif(ltrim({block:label_folded}, '0'), ''), '0')
     ELSE {block:label_folded} END

-- name: label_pg_function
-- PostgreSQL: pg_temp.mm_label(text) for this session (always call it qualified), the same normal form. One
-- expression, so the planner inlines it; it reads no locale (translate, trim and ltrim compare code points).
-- dialect: postgres
CREATE OR REPLACE FUNCTION pg_temp.mm_label(label_text text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT {block:label_normal_form}
$$
