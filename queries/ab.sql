-- A/B contamination: analysis over the case's `sends` (DuckDB), then the
-- exclusion/assignment tables in the durable store (PostgreSQL or DuckDB).
-- The unit is the candidate id (trimmed; in its normal form when it is an address: mm_address),
-- else the normalised recipient address. A test id is compared in normal form ({twin:mm_label}, as a
-- campaign is: `Subj-1` is ` subj-1`) and stored as given.

-- name: ab_sends_build
-- The real sends of one test (its id in normal form: :test_key) with their unit and trimmed variant (DuckDB temp
-- table ab_sends).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE ab_sends AS
WITH tagged AS (
    SELECT
        nullif(trim(candidate), '') AS cand,
        nullif(trim(recipient), '') AS recipient,
        nullif(trim(variant), '') AS variant,
        ts, source, line, msg_id
    FROM sends
    WHERE mm_label(test_id) = :test_key
)
SELECT
    coalesce(CASE WHEN strpos(cand, '@') > 0 THEN coalesce(mm_address(cand), cand) ELSE cand END, recipient) AS unit,
    variant, recipient, ts, source, line, msg_id
FROM tagged

-- name: ab_units_build
-- One row per unit of the test: its distinct variants, first-seen variant, sends and time span.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE ab_units AS
SELECT
    unit,
    list(DISTINCT variant ORDER BY variant) AS variants,
    count(DISTINCT variant) AS n_variants,
    first(variant ORDER BY ts NULLS LAST, source, line) AS first_variant,
    count(*) AS sends,
    min(ts) AS first_seen,
    max(ts) AS last_seen,
    list(DISTINCT recipient ORDER BY recipient) FILTER (WHERE recipient IS NOT NULL) AS recipients
FROM ab_sends
WHERE unit IS NOT NULL AND variant IS NOT NULL
GROUP BY unit

-- name: ab_overview
-- Totals for one test: sends, sends lacking a variant or a unit, units, contaminated units.
-- dialect: duckdb
SELECT
    (SELECT count(*) FROM ab_sends) AS sends,
    (SELECT count(*) FROM ab_sends WHERE variant IS NULL) AS sends_without_variant,
    (SELECT count(*) FROM ab_sends WHERE unit IS NULL) AS sends_without_unit,
    (SELECT count(*) FROM ab_units) AS units,
    (SELECT count(*) FROM ab_units WHERE n_variants > 1) AS contaminated

-- name: ab_arm_counts
-- Per arm: units that received it (all), units that received only it (clean), units first assigned to it, sends.
-- dialect: duckdb
SELECT
    s.variant,
    count(DISTINCT s.unit) AS units_all,
    count(DISTINCT s.unit) FILTER (WHERE u.n_variants = 1) AS units_clean,
    count(DISTINCT s.unit) FILTER (WHERE u.first_variant = s.variant) AS units_first_seen,
    count(*) AS sends
FROM ab_sends AS s
JOIN ab_units AS u USING (unit)
WHERE s.variant IS NOT NULL
GROUP BY s.variant
ORDER BY s.variant

-- name: ab_contaminated
-- Units that received more than one variant of the test, earliest first.
-- dialect: duckdb
SELECT unit, variants, first_variant, sends, first_seen, last_seen, recipients
FROM ab_units
WHERE n_variants > 1
ORDER BY first_seen NULLS LAST, unit

-- name: ab_test_ids
-- Test ids present in the sends (for the error message when --test-id matches nothing).
-- dialect: duckdb
SELECT DISTINCT trim(test_id) AS test_id
FROM sends
WHERE nullif(trim(test_id), '') IS NOT NULL
ORDER BY test_id
LIMIT 10

-- name: ab_plan_exclusions
-- Planned ab_exclusions rows: every contaminated unit, with its variants.
-- dialect: duckdb
SELECT
    CAST(:test_id AS VARCHAR) AS test_id,
    unit,
    'multiple-variants' AS reason,
    array_to_string(variants, ',') AS variants,
    CAST(:run_id AS VARCHAR) AS run_id
FROM ab_units
WHERE n_variants > 1
ORDER BY unit

-- name: ab_plan_assignments
-- Planned ab_assignments rows: every unit of the test, sticky to its first-seen variant.
-- dialect: duckdb
SELECT
    CAST(:test_id AS VARCHAR) AS test_id,
    unit,
    first_variant AS variant,
    CAST(:source AS VARCHAR) AS source
FROM ab_units
ORDER BY unit

-- name: ab_pg_ddl_lock
-- PostgreSQL: serialise concurrent first-time creation of the A/B tables (transaction-scoped).
-- dialect: postgres
SELECT pg_advisory_xact_lock(hashtextextended('mailmortem ab ddl', 0))

-- name: ab_create_exclusions
-- The exclusion list: units to leave out of a test's analysis (PostgreSQL and DuckDB).
-- dialect: duckdb postgres
CREATE TABLE IF NOT EXISTS ab_exclusions (
    test_id TEXT NOT NULL,
    unit TEXT NOT NULL,
    reason TEXT NOT NULL,
    variants TEXT NOT NULL,
    excluded_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    run_id TEXT NOT NULL,
    PRIMARY KEY (test_id, unit)
)

-- name: ab_create_assignments
-- Sticky arm per (test, unit); a row, once written, is never changed by mailmortem.
-- dialect: duckdb postgres
CREATE TABLE IF NOT EXISTS ab_assignments (
    test_id TEXT NOT NULL,
    unit TEXT NOT NULL,
    variant TEXT NOT NULL,
    assigned_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    source TEXT NOT NULL,
    PRIMARY KEY (test_id, unit)
)

-- name: ab_pg_stage_exclusions
-- PostgreSQL: a transaction-scoped staging table for the planned exclusions.
-- dialect: postgres
CREATE TEMP TABLE ab_stage_exclusions (
    test_id TEXT, unit TEXT, reason TEXT, variants TEXT, run_id TEXT
) ON COMMIT DROP

-- name: ab_pg_stage_assignments
-- PostgreSQL: a transaction-scoped staging table for the planned assignments.
-- dialect: postgres
CREATE TEMP TABLE ab_stage_assignments (
    test_id TEXT, unit TEXT, variant TEXT, source TEXT
) ON COMMIT DROP

-- name: ab_pg_copy_exclusions
-- PostgreSQL: bulk-load the planned exclusions (CSV with a header) into staging.
-- dialect: postgres
COPY ab_stage_exclusions (test_id, unit, reason, variants, run_id) FROM STDIN WITH (FORMAT csv, HEADER true)

-- name: ab_pg_copy_assignments
-- PostgreSQL: bulk-load the planned assignments (CSV with a header) into staging.
-- dialect: postgres
COPY ab_stage_assignments (test_id, unit, variant, source) FROM STDIN WITH (FORMAT csv, HEADER true)

-- name: ab_assignment_conflicts
-- Planned assignments whose unit already has a stored assignment, and how many of those differ.
-- dialect: duckdb postgres
SELECT
    count(*) AS existing,
    count(*) FILTER (WHERE a.variant <> s.variant) AS differing
FROM ab_stage_assignments AS s
JOIN ab_assignments AS a ON {twin:mm_label}(a.test_id) = {twin:mm_label}(s.test_id) AND a.unit = s.unit

-- name: ab_insert_exclusions
-- Write the staged exclusions; rows already there (in any spelling of the test id) are left exactly as they are.
-- Returns the units inserted.
-- dialect: duckdb postgres
INSERT INTO ab_exclusions (test_id, unit, reason, variants, excluded_at, run_id)
SELECT s.test_id, s.unit, s.reason, s.variants, current_timestamp, s.run_id
FROM ab_stage_exclusions AS s
WHERE NOT EXISTS (SELECT 1 FROM ab_exclusions AS e
                  WHERE {twin:mm_label}(e.test_id) = {twin:mm_label}(s.test_id) AND e.unit = s.unit)
ON CONFLICT (test_id, unit) DO NOTHING
RETURNING unit

-- name: ab_insert_assignments
-- Write the staged assignments; an existing assignment (in any spelling of the test id) is never changed nor
-- doubled (sticky). Returns the units inserted.
-- dialect: duckdb postgres
INSERT INTO ab_assignments (test_id, unit, variant, assigned_at, source)
SELECT s.test_id, s.unit, s.variant, current_timestamp, s.source
FROM ab_stage_assignments AS s
WHERE NOT EXISTS (SELECT 1 FROM ab_assignments AS a
                  WHERE {twin:mm_label}(a.test_id) = {twin:mm_label}(s.test_id) AND a.unit = s.unit)
ON CONFLICT (test_id, unit) DO NOTHING
RETURNING unit

-- name: ab_assignments_present
-- Whether the ab_assignments table exists in the current schema (PostgreSQL and DuckDB).
-- dialect: duckdb postgres
SELECT count(*) AS present
FROM information_schema.tables
WHERE table_name = 'ab_assignments' AND table_schema = current_schema()

-- name: ab_lookup_assignment
-- The stored arm of one unit in one test (its id in normal form: :test_key), if any; the first one stored when
-- two spellings of the test id hold one.
-- dialect: duckdb postgres
SELECT variant, assigned_at, source
FROM ab_assignments
WHERE {twin:mm_label}(test_id) = :test_key AND unit = :unit
ORDER BY assigned_at, test_id
LIMIT 1

-- name: ab_stored_exclusion_units
-- The units a test (its id in normal form) already excludes (a plan leaves them out: they are not a change).
-- dialect: duckdb postgres
SELECT DISTINCT unit FROM ab_exclusions WHERE {twin:mm_label}(test_id) = :test_key

-- name: ab_stored_assignments
-- The arms a test (its id in normal form) already stores per unit, the first stored per unit (a plan leaves them
-- out; sticky, never changed).
-- dialect: duckdb postgres
SELECT unit, variant FROM (
    SELECT unit, variant, row_number() OVER (PARTITION BY unit ORDER BY assigned_at, test_id) AS n
    FROM ab_assignments WHERE {twin:mm_label}(test_id) = :test_key
) AS stored
WHERE n = 1
