-- The postmortem report (`mailmortem report`): what the timeline draws, aggregated in DuckDB so a
-- 10M-line case becomes at most a few thousand marks. Input tables: events, sends, dup_people,
-- incidents (after classification). Times leave as epoch milliseconds (Vega-Lite reads them as UTC).

-- name: report_marks_build
-- Every send and lifecycle record (claim, renew, release, expire, start, error) with its lane: the worker
-- and its incarnation, filled from the worker's nearest record when a line (e.g. a claim) carries none.
CREATE OR REPLACE TEMP TABLE report_marks AS
WITH dup AS (
    SELECT campaign, step, recipient, any_value(kind) AS kind FROM dup_people GROUP BY ALL
), raw AS (
    SELECT s.ts, s.worker, s.incarnation,
           CASE WHEN d.kind IS NULL THEN 'send' ELSE 'duplicate send' END AS what,
           s.recipient, s.campaign, s.step, s.shard, s.msg_id, s.variant, NULL::DOUBLE AS lease_s,
           d.kind, NULL::VARCHAR AS error
    FROM sends s LEFT JOIN dup d USING (campaign, step, recipient)
    WHERE s.ts IS NOT NULL
    UNION ALL
    SELECT e.ts, e.worker, e.incarnation, e.event, e.recipient, e.campaign, e.step, e.shard, NULL, NULL,
           e.lease_s, NULL, e.error
    FROM events e
    WHERE e.ts IS NOT NULL AND e.event IN ('claim', 'renew', 'release', 'expire', 'start', 'error')
), filled AS (
    SELECT *, coalesce(incarnation,
               last_value(incarnation IGNORE NULLS) OVER (PARTITION BY worker ORDER BY ts
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
               first_value(incarnation IGNORE NULLS) OVER (PARTITION BY worker ORDER BY ts
                   ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)) AS inc
    FROM raw
)
SELECT *, coalesce(worker, '(no worker)') || coalesce(' · ' || inc, '') AS lane
FROM filled

-- name: report_lanes
-- One row per lane (worker · incarnation) active between :t_from and :t_to (epoch ms): how much it did
-- and when, in worker then start order.
SELECT lane, worker, inc AS incarnation, count(*) AS marks,
       count(*) FILTER (WHERE what IN ('send', 'duplicate send')) AS sends,
       count(*) FILTER (WHERE what = 'duplicate send') AS duplicate_sends,
       count(DISTINCT what) AS categories,
       epoch_ms(min(ts)) AS first_ms, epoch_ms(max(ts)) AS last_ms
FROM report_marks
WHERE epoch_ms(ts) BETWEEN :t_from AND :t_to
GROUP BY ALL
ORDER BY worker NULLS LAST, min(ts), lane

-- name: report_span
-- The time span the timeline covers and how many records it holds.
SELECT epoch_ms(min(ts)) AS first_ms, epoch_ms(max(ts)) AS last_ms, count(*) AS marks FROM report_marks

-- name: report_range_count
-- How many records fall between :t_from and :t_to (epoch ms).
SELECT count(*) AS marks FROM report_marks WHERE epoch_ms(ts) BETWEEN :t_from AND :t_to

-- name: report_points
-- Few records between :t_from and :t_to: each its own mark (lanes outside :kept fold into :other).
SELECT CASE WHEN list_contains(:kept, lane) THEN lane ELSE :other END AS lane,
       epoch_ms(ts) AS t, what, recipient, campaign, step, shard, msg_id, variant, lease_s, kind, error
FROM report_marks
WHERE epoch_ms(ts) BETWEEN :t_from AND :t_to
ORDER BY ts, lane
LIMIT :limit

-- name: report_bins
-- Many records: counted per lane, kind of record and time bin of :bin_ms milliseconds from :t_from.
WITH binned AS (
    SELECT CASE WHEN list_contains(:kept, lane) THEN lane ELSE :other END AS lane, what, recipient,
           floor((epoch_ms(ts) - :t_from) / :bin_ms)::BIGINT AS bin
    FROM report_marks
    WHERE epoch_ms(ts) BETWEEN :t_from AND :t_to
)
SELECT lane, what, :t_from + bin * :bin_ms AS t, :t_from + (bin + 1) * :bin_ms AS t2,
       count(*) AS n, count(DISTINCT recipient) AS people
FROM binned
GROUP BY ALL
ORDER BY t, lane, what

-- name: report_leases
-- Claims with a lease overlapping :t_from..:t_to, as intervals from the claim to the moment the lease
-- runs out (first :limit).
SELECT CASE WHEN list_contains(:kept, lane) THEN lane ELSE :other END AS lane,
       epoch_ms(ts) AS t, epoch_ms(ts) + (lease_s * 1000)::BIGINT AS t2, shard, lease_s
FROM report_marks
WHERE what = 'claim' AND lease_s IS NOT NULL AND lease_s > 0
  AND epoch_ms(ts) <= :t_to AND epoch_ms(ts) + lease_s * 1000 >= :t_from
ORDER BY ts, lane
LIMIT :limit

-- name: report_affected_first
-- The first :limit duplicated people (by incident, campaign, step, recipient) with their sends.
SELECT d.recipient, d.campaign, d.step, d.kind, i.id AS incident, count(*) AS sends,
       list(DISTINCT s.worker ORDER BY s.worker) FILTER (WHERE s.worker IS NOT NULL) AS workers,
       list(DISTINCT s.variant ORDER BY s.variant) FILTER (WHERE s.variant IS NOT NULL) AS variants,
       min(s.ts) AS first_send, max(s.ts) AS last_send
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step AND i.group_key = d.group_key
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
GROUP BY ALL
ORDER BY i.id, d.campaign, d.step, d.recipient
LIMIT :limit

-- name: report_affected_count
-- How many duplicated people there are in all.
SELECT count(*) AS people FROM dup_people

-- name: report_tests_involved
-- A/B tests that carry duplicated people, most affected first (at most :limit).
SELECT test_id, count(*) AS people
FROM dup_people
WHERE test_id IS NOT NULL AND test_id <> ''
GROUP BY test_id
ORDER BY people DESC, test_id
LIMIT :limit
