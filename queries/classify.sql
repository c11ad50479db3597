-- Classification: every duplicate (two or more real sends, different msg_ids, same
-- campaign + step + recipient) gets exactly one of the five kinds, with the evidence.
-- Input tables: events, sends (see ingest.sql). Parameter :skew_s tolerates clock skew between workers.

-- name: classify_pairs
-- Consecutive sends of each duplicated person, with what the logs show between them.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_pairs AS
WITH repeated AS (
    -- people whose key hash occurs twice; the windows below then run over those sends only
    SELECT hash(campaign, step, recipient) AS h FROM sends GROUP BY h HAVING count(*) >= 2
), dup AS (
    SELECT campaign, step, recipient, candidate, test_id, worker, incarnation, ts, shard,
           row_number() OVER w AS seq, count(*) OVER (PARTITION BY campaign, step, recipient) AS n_sends,
           lead(worker) OVER w AS next_worker, lead(incarnation) OVER w AS next_incarnation,
           lead(ts) OVER w AS next_ts, lead(shard) OVER w AS next_shard, lead(attempt) OVER w AS next_attempt,
           lead(test_id) OVER w AS next_test_id
    FROM sends
    WHERE hash(campaign, step, recipient) IN (SELECT h FROM repeated)
    WINDOW w AS (PARTITION BY campaign, step, recipient ORDER BY ts, msg_id)
), failures AS (
    -- error records and failed attempts: what a retry leaves between two sends
    SELECT worker, recipient, candidate, ts FROM events
    WHERE event = 'error' OR (event = 'send' AND NOT mm_ok_status(status))
), pairs AS (
    -- each send with the next one to the same person
    SELECT campaign, step, recipient, n_sends, seq,
           worker AS worker1, next_worker AS worker2, incarnation AS inc1, next_incarnation AS inc2,
           ts AS ts1, next_ts AS ts2, shard AS shard1, next_shard AS shard2, next_attempt AS attempt2,
           candidate, coalesce(test_id, next_test_id) AS test_id
    FROM dup WHERE n_sends >= 2 AND seq < n_sends
)
SELECT p.*,
       epoch(p.ts2) - epoch(p.ts1) AS gap_s,
       EXISTS (SELECT 1 FROM events e WHERE e.event = 'start' AND e.worker = p.worker2
                 AND e.ts > p.ts1 AND e.ts <= p.ts2) AS start_between,
       (p.inc1 IS NOT NULL AND p.inc2 IS NOT NULL AND p.inc1 <> p.inc2) AS incarnation_changed,
       (coalesce(p.attempt2, 1) >= 2
        OR EXISTS (SELECT 1 FROM failures f WHERE f.worker = p.worker1 AND f.recipient = p.recipient
                     AND f.ts >= p.ts1 AND f.ts <= p.ts2)
        OR EXISTS (SELECT 1 FROM failures f WHERE f.worker = p.worker1 AND f.candidate = p.candidate
                     AND f.ts >= p.ts1 AND f.ts <= p.ts2)) AS error_between
FROM pairs p

-- name: classify_leases
-- For pairs on one shard by two workers: the claims covering each send, and whether the earlier
-- claim's lease had run out (no renew in between) when the other worker claimed the shard.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_pair_claims AS
WITH claims AS (
    SELECT worker, shard, ts, max(lease_s) AS lease_s FROM events
    WHERE event = 'claim' AND shard IS NOT NULL GROUP BY ALL
), renews AS (
    SELECT worker, shard, ts FROM events WHERE event = 'renew' AND shard IS NOT NULL
), covering AS (
    SELECT p.campaign, p.step, p.recipient, p.seq, p.shard1,
           (SELECT max(c.ts) FROM claims c WHERE c.worker = p.worker1 AND c.shard = p.shard1
              AND c.ts <= p.ts1 + to_seconds(:skew_s)) AS claim_a_ts,
           (SELECT max(c.ts) FROM claims c WHERE c.worker = p.worker2 AND c.shard = p.shard1
              AND c.ts <= p.ts2 + to_seconds(:skew_s)) AS claim_b_ts,
           p.worker1, p.worker2
    FROM dup_pairs p
    WHERE p.worker1 <> p.worker2 AND p.shard1 IS NOT NULL AND p.shard1 = p.shard2
), ordered AS (
    SELECT campaign, step, recipient, seq, shard1,
           CASE WHEN claim_a_ts <= claim_b_ts THEN worker1 ELSE worker2 END AS holder,
           CASE WHEN claim_a_ts <= claim_b_ts THEN worker2 ELSE worker1 END AS claimer,
           least(claim_a_ts, claim_b_ts) AS claim1_ts, greatest(claim_a_ts, claim_b_ts) AS claim2_ts
    FROM covering WHERE claim_a_ts IS NOT NULL AND claim_b_ts IS NOT NULL
)
SELECT o.*, c1.lease_s,
       o.claim2_ts > o.claim1_ts AND c1.lease_s IS NOT NULL
         AND epoch(o.claim2_ts) >= epoch(o.claim1_ts) + c1.lease_s - :skew_s
         AND NOT EXISTS (SELECT 1 FROM renews r WHERE r.worker = o.holder AND r.shard = o.shard1
                           AND r.ts > o.claim1_ts AND r.ts < o.claim2_ts) AS lease_ran_out,
       (SELECT count(*) FROM sends s WHERE s.worker = o.holder AND s.shard = o.shard1
          AND s.ts > o.claim2_ts) AS holder_sends_after_second_claim
FROM ordered o
LEFT JOIN claims c1 ON c1.worker = o.holder AND c1.shard = o.shard1 AND c1.ts = o.claim1_ts

-- name: classify_groups
-- Group-level shape: how much of the list each worker pair covered, whether one worker replayed a run,
-- and whether duplicates are confined to a few shards.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_groups AS
WITH first_pairs AS (SELECT * FROM dup_pairs WHERE seq = 1),
same_worker AS (
    SELECT campaign, step, worker1 AS worker, count(*) AS replayed,
           min(ts2) AS replay_start, max(ts2) AS replay_end,
           corr(epoch(ts1), epoch(ts2)) AS order_corr,
           median(gap_s) AS median_gap_s
    FROM first_pairs WHERE worker1 = worker2 GROUP BY ALL
), density AS (
    SELECT w.*, (SELECT count(*) FROM sends s WHERE s.worker = w.worker AND s.campaign = w.campaign
                   AND s.step = w.step AND s.ts BETWEEN w.replay_start AND w.replay_end) AS sends_in_replay,
           (SELECT count(*) FROM sends s WHERE s.worker = w.worker AND s.campaign = w.campaign
                   AND s.step = w.step) AS worker_sends
    FROM same_worker w
)
SELECT *, replayed / greatest(sends_in_replay, 1) AS replay_density FROM density

-- name: classify_coverage
-- For each pair of workers that both sent one campaign step: how much of its people each reached.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_coverage AS
WITH people AS (
    SELECT campaign, step, count(DISTINCT recipient) AS people, count(DISTINCT shard) AS shards
    FROM sends GROUP BY ALL
), per_worker AS (
    SELECT campaign, step, worker, count(DISTINCT recipient) AS reached, min(ts) AS first_ts, max(ts) AS last_ts
    FROM sends GROUP BY ALL
), pair_groups AS (
    SELECT campaign, step, least(worker1, worker2) AS wa, greatest(worker1, worker2) AS wb,
           count(*) AS dup_people, count(DISTINCT shard1) FILTER (WHERE shard1 = shard2) AS dup_shards
    FROM dup_pairs WHERE seq = 1 AND worker1 <> worker2 GROUP BY ALL
)
SELECT g.*, p.people, p.shards, a.reached AS reached_a, b.reached AS reached_b,
       a.first_ts AS first_a, b.first_ts AS first_b, a.last_ts AS last_a, b.last_ts AS last_b,
       (SELECT count(*) FROM events e WHERE e.event = 'claim' AND e.worker IN (g.wa, g.wb)) AS claims
FROM pair_groups g
JOIN people p USING (campaign, step)
JOIN per_worker a ON a.campaign = g.campaign AND a.step = g.step AND a.worker = g.wa
JOIN per_worker b ON b.campaign = g.campaign AND b.step = g.step AND b.worker = g.wb

-- name: classify_people
-- One row per duplicated person: the kind (precedence: differing variants in a test → ab-contamination,
-- the mechanism kept as cause) and the confidence.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_people AS
WITH mech AS (
    SELECT p.*, lc.lease_ran_out, lc.claim1_ts, lc.claim2_ts, lc.lease_s, lc.holder_sends_after_second_claim,
           cov.dup_shards, cov.shards AS campaign_shards, cov.claims AS pair_claims,
           cov.reached_a, cov.reached_b, cov.people AS campaign_people,
           g.replay_density, g.replayed,
           CASE
             WHEN p.worker1 <> p.worker2 AND lc.lease_ran_out THEN 'lease-expiry'
             WHEN p.worker1 <> p.worker2 AND coalesce(cov.claims, 0) = 0 AND p.shard1 = p.shard2
                  AND cov.shards >= 3 AND cov.dup_shards * 3 <= cov.shards THEN 'lease-expiry'
             WHEN p.worker1 <> p.worker2 THEN 'parallel-worker'
             WHEN p.incarnation_changed OR p.start_between THEN 'state-loss'
             WHEN p.error_between THEN 'retry'
             WHEN g.replayed >= 3 AND g.replay_density >= 0.5 THEN 'state-loss'
             ELSE 'retry' END AS mechanism,
           CASE
             WHEN p.worker1 <> p.worker2 AND lc.lease_ran_out THEN 0.95
             WHEN p.worker1 <> p.worker2 AND coalesce(cov.claims, 0) = 0 AND p.shard1 = p.shard2
                  AND cov.shards >= 3 AND cov.dup_shards * 3 <= cov.shards THEN 0.6
             WHEN p.worker1 <> p.worker2 AND least(cov.reached_a, cov.reached_b) >= 0.5 * cov.people THEN 0.95
             WHEN p.worker1 <> p.worker2 THEN 0.75
             WHEN p.incarnation_changed OR p.start_between THEN 0.95
             WHEN p.error_between THEN 0.95
             WHEN g.replayed >= 3 AND g.replay_density >= 0.5 THEN 0.65
             WHEN p.inc1 IS NOT NULL AND p.inc1 = p.inc2 THEN 0.8
             ELSE 0.6 END AS mechanism_confidence
    FROM dup_pairs p
    LEFT JOIN dup_pair_claims lc USING (campaign, step, recipient, seq)
    LEFT JOIN dup_groups g ON g.campaign = p.campaign AND g.step = p.step AND g.worker = p.worker1
    LEFT JOIN dup_coverage cov ON cov.campaign = p.campaign AND cov.step = p.step
         AND cov.wa = least(p.worker1, p.worker2) AND cov.wb = greatest(p.worker1, p.worker2)
    WHERE p.seq = 1
), variants AS (
    SELECT campaign, step, recipient, count(DISTINCT variant) AS n_variants,
           list(DISTINCT variant ORDER BY variant) AS variants,
           list(DISTINCT worker ORDER BY worker) AS workers, count(*) AS n_sends
    FROM sends WHERE (campaign, step, recipient) IN (SELECT (campaign, step, recipient) FROM mech)
    GROUP BY campaign, step, recipient
)
SELECT m.campaign, m.step, m.recipient, m.test_id, v.n_sends, v.n_sends - 1 AS extra_sends,
       CASE WHEN v.n_variants >= 2 THEN 'ab-contamination' ELSE m.mechanism END AS kind,
       CASE WHEN v.n_variants >= 2 THEN m.mechanism END AS cause,
       CASE WHEN v.n_variants >= 2 THEN 0.97 ELSE m.mechanism_confidence END AS confidence,
       v.variants, v.workers, m.worker1, m.worker2, m.gap_s, m.start_between, m.incarnation_changed,
       m.error_between, m.inc1, m.inc2, m.shard1, m.lease_ran_out, m.claim1_ts, m.claim2_ts, m.lease_s,
       m.holder_sends_after_second_claim, m.replay_density, m.replayed,
       m.reached_a, m.reached_b, m.campaign_people, m.pair_claims, m.dup_shards, m.campaign_shards
FROM mech m JOIN variants v USING (campaign, step, recipient)

-- name: build_incidents
-- One incident per kind, campaign and step (and test, for ab-contamination): the people it hit, its evidence
-- counts, and figures per worker (people of the campaign step each reached, duplicated people each sent to)
-- and per shard (duplicated people whose first send was in it, and that shard's first and second claim).
-- dialect: duckdb
CREATE OR REPLACE TABLE incidents AS
WITH keyed AS (
    SELECT *, CASE WHEN kind = 'ab-contamination' THEN test_id END AS incident_test FROM dup_people
), grouped AS (
    SELECT kind, campaign, step, incident_test AS test_id,
           count(*) AS people, sum(extra_sends) AS extra_sends, round(avg(confidence), 2) AS confidence,
           count(*) FILTER (WHERE start_between) AS with_start_record,
           count(*) FILTER (WHERE incarnation_changed) AS with_new_incarnation,
           count(*) FILTER (WHERE error_between) AS with_error_or_attempt,
           count(*) FILTER (WHERE lease_ran_out) AS with_expired_lease,
           count(*) FILTER (WHERE inc1 IS NOT NULL) AS with_incarnation,
           median(gap_s) AS median_gap_s, max(gap_s) AS max_gap_s,
           min(claim1_ts) AS first_claim_ts, max(claim2_ts) AS second_claim_ts, max(lease_s) AS lease_s,
           max(holder_sends_after_second_claim) AS holder_sends_after_second_claim,
           max(replay_density) AS replay_density, max(replayed) AS replayed,
           max(campaign_people) AS campaign_people, min(recipient) AS first_recipient,
           max(pair_claims) AS pair_claims, max(campaign_shards) AS campaign_shards,
           list(DISTINCT cause) FILTER (WHERE cause IS NOT NULL) AS causes,
           mode(cause) AS main_cause,
           flatten(list(variants)) AS all_variants,
           any_value(inc1) AS inc_before, any_value(inc2) AS inc_after
    FROM keyed GROUP BY kind, campaign, step, incident_test
), incident_sends AS (
    SELECT d.kind, d.campaign, d.step, d.incident_test AS test_id, d.recipient, s.ts, s.worker, s.shard
    FROM keyed d JOIN sends s USING (campaign, step, recipient)
), spans AS (
    SELECT kind, campaign, step, test_id, min(ts) AS first_send, max(ts) AS last_send,
           list(DISTINCT worker ORDER BY worker) FILTER (WHERE worker IS NOT NULL) AS workers,
           list(DISTINCT shard ORDER BY shard) FILTER (WHERE shard IS NOT NULL) AS shards
    FROM incident_sends GROUP BY ALL
), reach AS (
    SELECT campaign, step, worker, count(DISTINCT recipient) AS reached
    FROM sends WHERE worker IS NOT NULL AND (campaign, step) IN (SELECT (campaign, step) FROM grouped)
    GROUP BY ALL
), by_worker AS (
    SELECT i.kind, i.campaign, i.step, i.test_id,
           list({'worker': i.worker, 'reached': r.reached, 'duplicated_people': i.duplicated_people}
                ORDER BY r.reached DESC, i.worker) AS per_worker
    FROM (SELECT kind, campaign, step, test_id, worker, count(DISTINCT recipient) AS duplicated_people
          FROM incident_sends WHERE worker IS NOT NULL GROUP BY ALL) i
    JOIN reach r USING (campaign, step, worker)
    GROUP BY ALL
), by_shard AS (
    SELECT kind, campaign, step, incident_test AS test_id,
           list({'shard': shard1, 'duplicated_people': people, 'first_claim_ts': first_claim_ts,
                 'second_claim_ts': second_claim_ts} ORDER BY people DESC, shard1) AS per_shard
    FROM (SELECT kind, campaign, step, incident_test, shard1, count(*) AS people,
                 min(claim1_ts) AS first_claim_ts, max(claim2_ts) AS second_claim_ts
          FROM keyed WHERE shard1 IS NOT NULL GROUP BY ALL)
    GROUP BY ALL
)
SELECT 'INC-' || row_number() OVER (ORDER BY g.people DESC, g.kind, g.campaign, g.step, g.test_id) AS id,
       g.*, sp.first_send, sp.last_send, coalesce(sp.workers, []) AS workers, coalesce(sp.shards, []) AS shards,
       coalesce(w.per_worker, []) AS per_worker, coalesce(sh.per_shard, []) AS per_shard,
       list_sort(list_distinct(g.all_variants)) AS variants
FROM grouped g
JOIN spans sp USING (kind, campaign, step)
LEFT JOIN by_worker w USING (kind, campaign, step)
LEFT JOIN by_shard sh USING (kind, campaign, step)
WHERE sp.test_id IS NOT DISTINCT FROM g.test_id
  AND (w.test_id IS NULL OR w.test_id IS NOT DISTINCT FROM g.test_id)
  AND (sh.test_id IS NULL OR sh.test_id IS NOT DISTINCT FROM g.test_id)

-- name: incident_sizes
-- Incidents in the order of the "affected" list, with their size (to batch affected_sends).
-- dialect: duckdb
SELECT id, people FROM incidents ORDER BY id

-- name: affected_sends
-- Every duplicated person of the incidents :incident_ids with their incident and the sends they received,
-- oldest first, as one JSON object each (docs/diagnose-json.md, "affected"), built inside DuckDB so large cases
-- stream out fast; asked for a batch of incidents at a time so the lists stay within the memory limit.
-- dialect: duckdb
SELECT to_json({
    'recipient': d.recipient, 'campaign': nullif(d.campaign, ''), 'step': nullif(d.step, ''),
    'kind': d.kind, 'cause': d.cause, 'incident': i.id,
    'sends': list({'ts': strftime(s.ts, '%Y-%m-%dT%H:%M:%S.%g') || 'Z', 'worker': s.worker,
                   'incarnation': s.incarnation, 'msg_id': s.msg_id, 'variant': s.variant, 'shard': s.shard}
                  ORDER BY s.ts, s.msg_id)})::VARCHAR AS affected
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
     AND list_contains(:incident_ids::VARCHAR[], i.id)
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
GROUP BY d.recipient, d.campaign, d.step, d.kind, d.cause, i.id
ORDER BY i.id, d.campaign, d.step, d.recipient

-- name: summary_counts
-- Case-wide totals for the summary block.
-- dialect: duckdb
SELECT (SELECT count(*) FROM sends) AS sends,
       (SELECT count(DISTINCT recipient) FROM sends) AS people,
       (SELECT count(*) FROM dup_people) AS duplicated_people,
       (SELECT coalesce(sum(extra_sends), 0) FROM dup_people) AS extra_sends

-- name: people_by_kind
-- Duplicated people per kind.
-- dialect: duckdb
SELECT kind, count(*) AS people FROM dup_people GROUP BY kind

-- name: incident_rows
-- All incidents, largest first.
-- dialect: duckdb
SELECT * FROM incidents ORDER BY people DESC, id

-- name: campaign_send_counts
-- Every campaign in the case's real sends with its send count, busiest first (names what a filter can match).
-- dialect: duckdb
SELECT coalesce(campaign, '') AS campaign, count(*) AS sends FROM sends GROUP BY 1 ORDER BY 2 DESC, 1

-- name: candidates_at_two_addresses
-- Candidates (a person's id from the logs) sent one campaign step at two or more different addresses: the
-- same person emailed twice under two addresses, which the (campaign, step, recipient) key cannot see.
-- dialect: duckdb
SELECT candidate, nullif(campaign, '') AS campaign, nullif(step, '') AS step,
       list(DISTINCT recipient ORDER BY recipient) AS recipients, count(*) AS sends,
       list(msg_id ORDER BY ts, msg_id) AS msg_ids,
       strftime(min(ts), '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS first_send,
       strftime(max(ts), '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS last_send
FROM sends
WHERE candidate IS NOT NULL AND trim(candidate) <> ''
GROUP BY candidate, campaign, step
HAVING count(DISTINCT recipient) >= 2
ORDER BY candidate, campaign, step
