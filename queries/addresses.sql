-- The normal form of an address on PostgreSQL: the twin of forensics.addresses.normalize_address (its docstring
-- defines it) and of the DuckDB macro mm_address (macros.sql, address_duckdb_macro). tests/test_addresses.py keeps
-- the three equal; the whitespace code points are WHITESPACE_CODE_POINTS, in order.

-- name: address_pg_function
-- PostgreSQL: pg_temp.mm_address(text), this session's own (call it qualified: no schema privilege needed, always
-- this version). One expression, so the planner inlines it; `ws` is a constant default, never passed. COLLATE "C"
-- makes it locale-proof: lower() there changes ASCII A-Z only.
-- dialect: postgres
CREATE OR REPLACE FUNCTION pg_temp.mm_address(address text, ws text DEFAULT
            chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160) ||
            chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196) || chr(8197) ||
            chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202) || chr(8203) || chr(8232) ||
            chr(8233) || chr(8239) || chr(8287) || chr(12288) || chr(65279))
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT nullif(lower(CASE WHEN right(btrim(address COLLATE "C", ws), 1) = '>'
                         THEN coalesce(btrim(substring(btrim(address COLLATE "C", ws) FROM '<([^<]*)>$'), ws),
                                       btrim(address COLLATE "C", ws))
                         ELSE btrim(address COLLATE "C", ws) END), '')
$$

-- name: sql_twins_pg_present
-- PostgreSQL: has this session created pg_temp.mm_address and pg_temp.mm_label (queries/labels.sql) yet?
-- dialect: postgres
SELECT to_regprocedure('pg_temp.mm_address(text, text)') IS NOT NULL AS address,
       to_regprocedure('pg_temp.mm_label(text)') IS NOT NULL AS label
