-- The postmortem report (`mailmortem report`): what the timeline draws, aggregated in DuckDB so a large case
-- becomes a few thousand marks. Reads events, sends, dup_people and incidents; times leave as epoch milliseconds
-- (UTC for Vega-Lite).

-- name: report_marks_build
-- Every send and lifecycle record, narrow: time `t` (epoch ms), lane (worker · incarnation; a lifecycle record
-- without one goes to the incarnation its worker started last) and where it came from (`src`, `rid`, `rsource`), so
-- details are fetched only for the few marks drawn one by one.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE report_marks AS
WITH dup AS (
    SELECT DISTINCT campaign, step, recipient FROM dup_people
), spans AS (
    SELECT worker, incarnation AS inc, min(ts) AS since
    FROM events WHERE worker IS NOT NULL AND incarnation IS NOT NULL AND ts IS NOT NULL
    GROUP BY ALL
), first_span AS (
    SELECT worker, arg_min(inc, since) AS inc FROM spans GROUP BY worker
), sends_drawn AS (
    SELECT s.ts, s.worker, s.incarnation AS inc,
           CASE WHEN d.recipient IS NULL THEN 'send' ELSE 'duplicate send' END AS what,
           'sends' AS src, mm_send_id(s.source, s.line) AS rid, NULL::VARCHAR AS rsource, NULL::VARCHAR AS shard,
           NULL::DOUBLE AS lease_s
    FROM sends s
    LEFT JOIN dup d ON d.campaign = s.campaign AND d.step = s.step AND d.recipient = s.recipient
    WHERE s.ts IS NOT NULL
), lifecycle AS (
    SELECT e.ts, e.worker, e.incarnation, e.event AS what, 'events' AS src, e.line_no AS rid, e.source AS rsource,
           e.shard, e.lease_s
    FROM events e
    WHERE e.ts IS NOT NULL AND e.event IN ('claim', 'renew', 'release', 'expire', 'start', 'error')
), lifecycle_drawn AS (
    SELECT l.ts, l.worker, coalesce(l.incarnation, a.inc, f.inc) AS inc, l.what, l.src, l.rid, l.rsource, l.shard, l.lease_s
    FROM lifecycle l
    ASOF LEFT JOIN spans a ON l.worker = a.worker AND l.ts >= a.since
    LEFT JOIN first_span f ON f.worker = l.worker
)
SELECT epoch_ms(ts) AS t, worker, inc, what, src, rid, rsource, shard, lease_s
FROM (SELECT * FROM sends_drawn UNION ALL BY NAME SELECT * FROM lifecycle_drawn)

-- name: report_lanes
-- One row per lane (worker · incarnation) active between :t_from and :t_to (epoch ms): how much it did
-- and when, in worker then start order.
-- dialect: duckdb
SELECT mm_lane(worker, inc) AS lane, worker, inc AS incarnation, count(*) AS marks,
       count(*) FILTER (WHERE what IN ('send', 'duplicate send')) AS sends,
       count(*) FILTER (WHERE what = 'duplicate send') AS duplicate_sends,
       count(DISTINCT what) AS categories, min(t) AS first_ms, max(t) AS last_ms
FROM report_marks
WHERE t BETWEEN :t_from AND :t_to
GROUP BY worker, inc
ORDER BY worker NULLS LAST, min(t), lane

-- name: report_span
-- The time span the timeline covers and how many records it holds.
-- dialect: duckdb
SELECT min(t) AS first_ms, max(t) AS last_ms, count(*) AS marks FROM report_marks

-- name: report_range_count
-- How many records fall between :t_from and :t_to (epoch ms).
-- dialect: duckdb
SELECT count(*) AS marks FROM report_marks WHERE t BETWEEN :t_from AND :t_to

-- name: report_points
-- Few records between :t_from and :t_to: each its own mark with its details (lanes outside :kept fold
-- into :other), oldest first.
-- dialect: duckdb
WITH drawn AS (
    SELECT *, mm_lane(worker, inc) AS lane FROM report_marks
    WHERE t BETWEEN :t_from AND :t_to ORDER BY t, lane LIMIT :limit
), dup AS (
    SELECT campaign, step, recipient, any_value(kind) AS kind FROM dup_people GROUP BY ALL
)
SELECT CASE WHEN m.lane IN (SELECT unnest(:kept)) THEN m.lane ELSE :other END AS lane, m.t, m.what,
       coalesce(s.recipient, e.recipient) AS recipient, coalesce(s.campaign, e.campaign) AS campaign,
       coalesce(s.step, e.step) AS step, coalesce(s.shard, e.shard) AS shard,
       coalesce(s.msg_id, e.msg_id) AS msg_id, s.variant, m.lease_s, d.kind, e.error
FROM drawn m
LEFT JOIN (SELECT *, mm_send_id(source, line) AS sid FROM sends) s ON m.src = 'sends' AND s.sid = m.rid
LEFT JOIN events e ON m.src = 'events' AND e.source = m.rsource AND e.line_no = m.rid
LEFT JOIN dup d ON d.campaign = s.campaign AND d.step = s.step AND d.recipient = s.recipient
ORDER BY m.t, lane

-- name: report_bins
-- Many records: counted per lane, kind of record and time bin of :bin_ms milliseconds from :t_from
-- (lanes outside :kept fold into :other).
-- dialect: duckdb
WITH binned AS (
    SELECT worker, inc, what, (t - :t_from) // :bin_ms AS bin, count(*) AS n
    FROM report_marks
    WHERE t BETWEEN :t_from AND :t_to
    GROUP BY ALL
), laned AS (
    SELECT CASE WHEN mm_lane(worker, inc) IN (SELECT unnest(:kept)) THEN mm_lane(worker, inc) ELSE :other END AS lane,
           what, bin, n
    FROM binned
)
SELECT lane, what, :t_from + bin * :bin_ms AS t, :t_from + (bin + 1) * :bin_ms AS t2, sum(n)::BIGINT AS n
FROM laned
GROUP BY ALL
ORDER BY t, lane, what

-- name: report_leases
-- Claims with a lease overlapping :t_from..:t_to, as intervals from the claim to the moment the lease
-- runs out (first :limit; lanes outside :kept fold into :other).
-- dialect: duckdb
WITH claims AS (
    SELECT mm_lane(worker, inc) AS lane, t, t + (lease_s * 1000)::BIGINT AS t2, shard, lease_s
    FROM report_marks
    WHERE what = 'claim' AND lease_s > 0 AND t <= :t_to AND t + lease_s * 1000 >= :t_from
    ORDER BY t, lane
    LIMIT :limit
)
SELECT CASE WHEN lane IN (SELECT unnest(:kept)) THEN lane ELSE :other END AS lane, t, t2, shard, lease_s
FROM claims
ORDER BY t, lane

-- name: report_affected_first
-- The first :limit duplicated people (by incident, campaign, step, recipient) with their sends.
-- dialect: duckdb
SELECT d.recipient, d.campaign, d.step, d.kind, i.id AS incident, count(*) AS sends,
       list(DISTINCT s.worker ORDER BY s.worker) FILTER (WHERE s.worker IS NOT NULL) AS workers,
       list(DISTINCT s.variant ORDER BY s.variant) FILTER (WHERE s.variant IS NOT NULL) AS variants,
       min(s.ts) AS first_send, max(s.ts) AS last_send
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
GROUP BY ALL
ORDER BY i.id, d.campaign, d.step, d.recipient
LIMIT :limit

-- name: report_affected_count
-- How many duplicated people there are in all.
-- dialect: duckdb
SELECT count(*) AS people FROM dup_people

-- name: report_tests_involved
-- A/B tests that carry duplicated people, most affected first (at most :limit).
-- dialect: duckdb
SELECT test_id, count(*) AS people
FROM dup_people
WHERE test_id IS NOT NULL AND test_id <> ''
GROUP BY test_id
ORDER BY people DESC, test_id
LIMIT :limit
