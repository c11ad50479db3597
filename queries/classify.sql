-- Classification: each duplicated person (two or more real sends, different msg_ids, one campaign, step and
-- recipient) gets one of the five kinds, with its evidence. Reads events and sends; :skew_s tolerates clock skew
-- between workers. The working tables (mm_*, TEMP) hold identities as integer codes numbered in the order of their
-- text (so ORDER BY and least/greatest on codes agree with the text); the duplicated people are found first and
-- every later join runs over their sends only. Text comes back only in dup_people, incidents and dup_pairs.

-- name: classify_identities
-- Sends per combination of identities (campaign, step, worker, shard, incarnation, test, variant) with their first
-- and last time, from one scan of sends: the dictionaries, steps, reach and incarnation spans are read from it, not
-- from sends again.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_identities AS
SELECT campaign, step, worker, shard, incarnation, test_id, variant, count(*) AS sends, min(ts) AS first_ts,
       max(ts) AS last_ts
FROM sends GROUP BY campaign, step, worker, shard, incarnation, test_id, variant

-- name: classify_dictionary
-- One identity's dictionary ({ident:column} → {ident:code}, numbered in the order of the text) in the TEMP table
-- {ident:dictionary}.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE {ident:dictionary} AS
SELECT (row_number() OVER (ORDER BY {ident:column}))::INTEGER AS {ident:code}, {ident:column}
FROM (SELECT DISTINCT {ident:column} FROM mm_identities WHERE {ident:column} IS NOT NULL)

-- name: classify_codes
-- The campaign-step dictionary, the evidence records of the workers that sent (starts, claims, renews; failures:
-- error records and failed attempts), and the duplicated people with their sends, coded.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_cs AS
SELECT (row_number() OVER (ORDER BY campaign, step))::INTEGER AS cs, campaign, step
FROM (SELECT DISTINCT campaign, step FROM mm_identities);
CREATE OR REPLACE TEMP TABLE mm_evidence AS
SELECT CASE WHEN e.event IN ('start', 'claim', 'renew') THEN e.event ELSE 'failure' END AS what,
       w.w, h.sh, e.ts, e.lease_s,
       CASE WHEN e.event NOT IN ('start', 'claim', 'renew') THEN e.recipient END AS recipient,
       CASE WHEN e.event NOT IN ('start', 'claim', 'renew') THEN e.candidate END AS candidate
FROM events e JOIN mm_workers w ON w.worker = e.worker
LEFT JOIN mm_shards h ON h.shard = e.shard
WHERE e.event IN ('start', 'claim', 'renew', 'error') OR (e.event = 'send' AND NOT mm_ok_status(e.status));
-- recipients and candidates named by a failure, numbered: what a pair's first send is matched on
CREATE OR REPLACE TEMP TABLE mm_failed_recipients AS
SELECT (row_number() OVER ())::INTEGER AS r, recipient
FROM (SELECT DISTINCT recipient FROM mm_evidence WHERE what = 'failure' AND recipient IS NOT NULL);
CREATE OR REPLACE TEMP TABLE mm_failed_candidates AS
SELECT (row_number() OVER ())::INTEGER AS c, candidate
FROM (SELECT DISTINCT candidate FROM mm_evidence WHERE what = 'failure' AND candidate IS NOT NULL);
CREATE OR REPLACE TEMP TABLE mm_failures AS
SELECT e.w, r.r, c.c, e.ts FROM mm_evidence e
LEFT JOIN mm_failed_recipients r USING (recipient) LEFT JOIN mm_failed_candidates c USING (candidate)
WHERE e.what = 'failure';
-- the sends whose key (campaign, step, recipient) hash occurs twice, coded: every duplicated person's sends,
-- read from sends in the same scan that finds them (no wide hash table over every send, and no third scan)
CREATE OR REPLACE TEMP TABLE mm_repeated_sends AS
WITH repeated AS (  -- sorted, as build_sends finds its repeated hashes
    SELECT h FROM (SELECT h, lag(h) OVER (ORDER BY h) AS prev FROM (SELECT hash(campaign, step, recipient) AS h FROM sends))
    WHERE h = prev
)
SELECT k.cs, s.recipient, mm_send_id(s.source, s.line) AS sid, w.w, i.i AS inc, s.ts, h.sh, s.attempt, t.t,
       v.v, r.r, c.c, s.msg_id
FROM sends s
JOIN mm_cs k ON k.campaign = s.campaign AND k.step = s.step
LEFT JOIN mm_workers w ON w.worker = s.worker
LEFT JOIN mm_incarnations i ON i.incarnation = s.incarnation
LEFT JOIN mm_shards h ON h.shard = s.shard
LEFT JOIN mm_tests t ON t.test_id = s.test_id
LEFT JOIN mm_variants v ON v.variant = s.variant
LEFT JOIN mm_failed_recipients r ON r.recipient = s.recipient
LEFT JOIN mm_failed_candidates c ON c.candidate = s.candidate
WHERE hash(s.campaign, s.step, s.recipient) IN (SELECT h FROM repeated);
-- the people among them, counted exactly (two keys that only share a hash are two people of one send each)
CREATE OR REPLACE TEMP TABLE mm_people AS
SELECT (row_number() OVER ())::INTEGER AS p, cs, recipient, n_sends
FROM (SELECT cs, recipient, count(*) AS n_sends FROM mm_repeated_sends GROUP BY cs, recipient HAVING count(*) >= 2)

-- name: classify_dup_sends
-- The duplicated people's sends numbered per person in time order (seq); each step's reach (people, shards, people
-- each worker reached); each incarnation's first and last send, which tells a restart from two processes of one
-- worker sending at once.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_incarnation_spans AS
SELECT w.w, i.i AS inc, min(x.first_ts) AS first_ts, max(x.last_ts) AS last_ts
FROM mm_identities x JOIN mm_workers w ON w.worker = x.worker JOIN mm_incarnations i ON i.incarnation = x.incarnation
GROUP BY ALL;
CREATE OR REPLACE TEMP TABLE mm_dup_sends AS
SELECT p.p, p.cs, s.sid, s.w, s.inc, s.ts, s.sh, s.attempt, s.t, s.v, s.r, s.c,
       (row_number() OVER (PARTITION BY p.p ORDER BY s.ts, s.msg_id))::INTEGER AS seq
FROM mm_repeated_sends s JOIN mm_people p ON p.cs = s.cs AND p.recipient = s.recipient;
-- how many each worker sent to each shard of each step with duplicates (a few rows per shard)
CREATE OR REPLACE TEMP TABLE mm_sent AS
SELECT k.cs, w.w, h.sh, sum(x.sends) AS sends
FROM mm_identities x JOIN mm_cs k ON k.campaign = x.campaign AND k.step = x.step
LEFT JOIN mm_workers w ON w.worker = x.worker LEFT JOIN mm_shards h ON h.shard = x.shard
WHERE k.cs IN (SELECT cs FROM mm_people)
GROUP BY ALL;
-- people of a step, exactly without a distinct count over its addresses: every send is one person's, and
-- only a duplicated person has more than one (people = sends - the duplicated people's extra sends)
CREATE OR REPLACE TEMP TABLE mm_steps AS
SELECT t.cs, (t.sends - d.extra)::BIGINT AS people, t.shards
FROM (SELECT cs, sum(sends) AS sends, count(DISTINCT sh) AS shards FROM mm_sent GROUP BY cs) t
JOIN (SELECT cs, sum(n_sends - 1) AS extra FROM mm_people GROUP BY cs) d USING (cs);
-- likewise the people a worker reached: its sends less its repeated sends to one duplicated person
CREATE OR REPLACE TEMP TABLE mm_reach AS
SELECT t.cs, t.w, (t.sends - coalesce(d.extra, 0))::BIGINT AS reached
FROM (SELECT cs, w, sum(sends) AS sends FROM mm_sent WHERE w IS NOT NULL GROUP BY ALL) t
LEFT JOIN (SELECT cs, w, sum(n - 1) AS extra
           FROM (SELECT cs, w, p, count(*) AS n FROM mm_dup_sends WHERE w IS NOT NULL GROUP BY ALL)
           GROUP BY ALL) d USING (cs, w)

-- name: classify_release_scans
-- Free what was read from sends once the duplicated people's sends are coded: their copy with text, and the
-- per-shard counts.
-- dialect: duckdb
DROP TABLE IF EXISTS mm_repeated_sends;
DROP TABLE IF EXISTS mm_sent;
DROP TABLE IF EXISTS mm_identities

-- name: classify_pairs
-- Consecutive sends of each duplicated person and what the logs show between them: a start of the second sender, a
-- new incarnation, an error or failed attempt of the first (to that recipient or candidate) or an attempt ≥ 2; and
-- whether one worker's two incarnations overlapped (two senders at once, which a restart cannot be).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_pairs AS
WITH bare AS MATERIALIZED (
    SELECT * FROM (
        SELECT p, cs, seq, sid, w AS w1, lead(w) OVER win AS w2, inc AS inc1, lead(inc) OVER win AS inc2,
               ts AS ts1, lead(ts) OVER win AS ts2, sh AS sh1, lead(sh) OVER win AS sh2,
               lead(attempt) OVER win AS attempt2, r, c, coalesce(t, lead(t) OVER win) AS t
        FROM mm_dup_sends WINDOW win AS (PARTITION BY p ORDER BY seq))
    WHERE ts2 IS NOT NULL
), start_hits AS (
    SELECT DISTINCT q.p, q.seq FROM mm_evidence e
    JOIN bare q ON e.w = q.w2 AND e.ts > q.ts1 AND e.ts <= q.ts2
    WHERE e.what = 'start'
), failure_hits AS (
    SELECT q.p, q.seq FROM mm_failures f JOIN bare q ON f.w = q.w1 AND f.r = q.r AND f.ts >= q.ts1 AND f.ts <= q.ts2
    UNION
    SELECT q.p, q.seq FROM mm_failures f JOIN bare q ON f.w = q.w1 AND f.c = q.c AND f.ts >= q.ts1 AND f.ts <= q.ts2
)
SELECT q.* EXCLUDE (r, c), epoch(q.ts2) - epoch(q.ts1) AS gap_s, sh.p IS NOT NULL AS start_between,
       (q.inc1 IS NOT NULL AND q.inc2 IS NOT NULL AND q.inc1 <> q.inc2) AS incarnation_changed,
       (coalesce(q.attempt2, 1) >= 2 OR fh.p IS NOT NULL) AS error_between,
       coalesce(q.w1 = q.w2 AND q.inc1 <> q.inc2 AND a.last_ts >= b.first_ts, false) AS incarnations_overlap
FROM bare q LEFT JOIN start_hits sh USING (p, seq) LEFT JOIN failure_hits fh USING (p, seq)
LEFT JOIN mm_incarnation_spans a ON a.w = q.w1 AND a.inc = q.inc1
LEFT JOIN mm_incarnation_spans b ON b.w = q.w2 AND b.inc = q.inc2

-- name: save_dup_pairs
-- A saved case's dup_pairs: the consecutive sends of each duplicated person with their evidence, as text.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_pairs AS
SELECT k.campaign, k.step, pe.recipient, pe.n_sends, q.seq::BIGINT AS seq, w1.worker AS worker1, w2.worker AS worker2,
       i1.incarnation AS inc1, i2.incarnation AS inc2, q.ts1, q.ts2, h1.shard AS shard1, h2.shard AS shard2,
       q.attempt2, s.candidate, t.test_id, q.gap_s, q.start_between, q.incarnation_changed, q.error_between,
       q.incarnations_overlap
FROM mm_pairs q JOIN mm_people pe USING (p) JOIN mm_cs k ON k.cs = q.cs
JOIN (SELECT mm_send_id(source, line) AS sid, candidate FROM sends) s ON s.sid = q.sid
LEFT JOIN mm_workers w1 ON w1.w = q.w1 LEFT JOIN mm_workers w2 ON w2.w = q.w2
LEFT JOIN mm_incarnations i1 ON i1.i = q.inc1 LEFT JOIN mm_incarnations i2 ON i2.i = q.inc2
LEFT JOIN mm_shards h1 ON h1.sh = q.sh1 LEFT JOIN mm_shards h2 ON h2.sh = q.sh2
LEFT JOIN mm_tests t ON t.t = q.t

-- name: classify_leases
-- For a first pair on one shard by two workers: each one's latest claim before its send (as-of joins), and whether
-- the earlier claim's lease had run out (no renew between) when the other claimed. The checks run once per (holder,
-- shard, claims), however many people share them.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_pair_claims AS
WITH claims AS (
    SELECT w, sh, ts, max(lease_s) AS lease_s FROM mm_evidence WHERE what = 'claim' AND sh IS NOT NULL GROUP BY ALL
), shared AS (
    SELECT p, sh1, w1, w2, ts1 + to_seconds(:skew_s) AS until_a, ts2 + to_seconds(:skew_s) AS until_b
    FROM mm_pairs WHERE seq = 1 AND w1 <> w2 AND sh1 IS NOT NULL AND sh1 = sh2
), covering AS (
    SELECT q.p, q.sh1, q.w1, q.w2, a.ts AS claim_a_ts, b.ts AS claim_b_ts
    FROM shared q
    ASOF JOIN claims a ON a.w = q.w1 AND a.sh = q.sh1 AND q.until_a >= a.ts
    ASOF JOIN claims b ON b.w = q.w2 AND b.sh = q.sh1 AND q.until_b >= b.ts
), ordered AS (
    SELECT p, sh1,
           CASE WHEN claim_a_ts <= claim_b_ts THEN w1 ELSE w2 END AS holder,
           least(claim_a_ts, claim_b_ts) AS claim1_ts, greatest(claim_a_ts, claim_b_ts) AS claim2_ts
    FROM covering
), spans AS (
    SELECT DISTINCT holder, sh1, claim1_ts, claim2_ts FROM ordered
), renewed AS (
    SELECT DISTINCT o.holder, o.sh1, o.claim1_ts, o.claim2_ts FROM mm_evidence r
    JOIN spans o ON r.w = o.holder AND r.sh = o.sh1 AND r.ts > o.claim1_ts AND r.ts < o.claim2_ts
    WHERE r.what = 'renew'
), after_claim AS (
    SELECT o.holder, o.sh1, o.claim2_ts, count(*) AS sends_after
    FROM (SELECT DISTINCT holder, sh1, claim2_ts FROM ordered) o
    JOIN mm_workers w ON w.w = o.holder JOIN mm_shards h ON h.sh = o.sh1
    JOIN sends s ON s.worker = w.worker AND s.shard = h.shard AND s.ts > o.claim2_ts
    GROUP BY ALL
)
SELECT o.p, o.claim1_ts, o.claim2_ts, c1.lease_s,
       o.claim2_ts > o.claim1_ts AND c1.lease_s IS NOT NULL
         AND epoch(o.claim2_ts) >= epoch(o.claim1_ts) + c1.lease_s - :skew_s
         AND rn.holder IS NULL AS lease_ran_out,
       coalesce(a.sends_after, 0) AS holder_sends_after_second_claim
FROM ordered o
LEFT JOIN claims c1 ON c1.w = o.holder AND c1.sh = o.sh1 AND c1.ts = o.claim1_ts
LEFT JOIN renewed rn ON rn.holder = o.holder AND rn.sh1 = o.sh1 AND rn.claim1_ts = o.claim1_ts
     AND rn.claim2_ts = o.claim2_ts
LEFT JOIN after_claim a ON a.holder = o.holder AND a.sh1 = o.sh1 AND a.claim2_ts = o.claim2_ts

-- name: classify_groups
-- Per campaign step and worker that re-sent to its own people: how many, and how dense the re-sends were
-- among that worker's sends in the replay window (whether one worker replayed a run).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_groups AS
WITH same_worker AS (
    SELECT cs, w1 AS w, count(*) AS replayed, min(ts2) AS replay_start, max(ts2) AS replay_end
    FROM mm_pairs WHERE seq = 1 AND w1 = w2 GROUP BY ALL
), in_replay AS (
    SELECT g.cs, g.w, count(*) AS sends_in_replay
    FROM same_worker g JOIN mm_cs k USING (cs) JOIN mm_workers w USING (w)
    JOIN sends s ON s.campaign = k.campaign AND s.step = k.step AND s.worker = w.worker
         AND s.ts BETWEEN g.replay_start AND g.replay_end
    GROUP BY ALL
)
SELECT g.cs, g.w, g.replayed, g.replayed / greatest(coalesce(r.sends_in_replay, 0), 1) AS replay_density
FROM same_worker g LEFT JOIN in_replay r USING (cs, w)

-- name: classify_coverage
-- For each pair of workers that both sent one campaign step: how much of its people each reached, on how
-- many shards their duplicates fell, and how many claims they logged.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_coverage AS
WITH pair_groups AS (
    SELECT cs, least(w1, w2) AS wa, greatest(w1, w2) AS wb,
           count(*) AS dup_people, count(DISTINCT sh1) FILTER (WHERE sh1 = sh2) AS dup_shards
    FROM mm_pairs WHERE seq = 1 AND w1 <> w2 GROUP BY ALL
), claims AS (
    SELECT w, count(*) AS claims FROM mm_evidence WHERE what = 'claim' GROUP BY w
)
SELECT g.*, st.people, st.shards, a.reached AS reached_a, b.reached AS reached_b,
       coalesce(ca.claims, 0) + coalesce(cb.claims, 0) AS claims
FROM pair_groups g JOIN mm_steps st USING (cs)
JOIN mm_reach a ON a.cs = g.cs AND a.w = g.wa
JOIN mm_reach b ON b.cs = g.cs AND b.w = g.wb
LEFT JOIN claims ca ON ca.w = g.wa LEFT JOIN claims cb ON cb.w = g.wb

-- name: classify_people
-- One row per duplicated person: the rule the evidence meets first, and from it the kind and confidence; differing
-- variants in a test make it ab-contamination, the rule's kind kept as cause. The lists of each person's variants
-- and workers are left to save_dup_people (only a saved case shows them, and they cost more than the rest).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE mm_verdicts AS
WITH ruled AS (
    SELECT q.*, lc.lease_ran_out, lc.claim1_ts, lc.claim2_ts, lc.lease_s, lc.holder_sends_after_second_claim,
           cov.dup_shards, cov.shards AS campaign_shards, cov.claims AS pair_claims,
           cov.reached_a, cov.reached_b, cov.people AS campaign_people,
           g.replay_density, g.replayed,
           -- the first rule the pair's evidence meets, in order of precedence
           CASE
             WHEN q.w1 <> q.w2 AND lc.lease_ran_out THEN 'lease_ran_out'
             WHEN q.w1 <> q.w2 AND coalesce(cov.claims, 0) = 0 AND q.sh1 = q.sh2
                  AND cov.shards >= 3 AND cov.dup_shards * 3 <= cov.shards THEN 'few_shards_no_claims'
             WHEN q.w1 <> q.w2 AND least(cov.reached_a, cov.reached_b) >= 0.5 * cov.people THEN 'two_workers_each_half'
             WHEN q.w1 <> q.w2 THEN 'two_workers'
             WHEN q.incarnations_overlap THEN 'incarnations_overlap'
             WHEN q.incarnation_changed OR q.start_between THEN 'restart_between'
             WHEN q.error_between THEN 'error_between'
             WHEN g.replayed >= 3 AND g.replay_density >= 0.5 THEN 'replayed_run'
             WHEN q.inc1 IS NOT NULL AND q.inc1 = q.inc2 THEN 'same_incarnation'
             ELSE 'no_evidence' END AS rule
    FROM mm_pairs q
    LEFT JOIN mm_pair_claims lc USING (p)
    LEFT JOIN mm_groups g ON g.cs = q.cs AND g.w = q.w1
    LEFT JOIN mm_coverage cov ON cov.cs = q.cs AND cov.wa = least(q.w1, q.w2) AND cov.wb = greatest(q.w1, q.w2)
    WHERE q.seq = 1
), mech AS (  -- each rule's kind (the mechanism) and confidence
    SELECT *,
           CASE rule WHEN 'lease_ran_out' THEN 'lease-expiry'
                     WHEN 'few_shards_no_claims' THEN 'lease-expiry'
                     WHEN 'two_workers_each_half' THEN 'parallel-worker'
                     WHEN 'two_workers' THEN 'parallel-worker'
                     WHEN 'incarnations_overlap' THEN 'parallel-worker'
                     WHEN 'restart_between' THEN 'state-loss'
                     WHEN 'error_between' THEN 'retry'
                     WHEN 'replayed_run' THEN 'state-loss'
                     WHEN 'same_incarnation' THEN 'retry'
                     WHEN 'no_evidence' THEN 'retry' END AS mechanism,
           CASE rule WHEN 'lease_ran_out' THEN 0.95
                     WHEN 'few_shards_no_claims' THEN 0.6
                     WHEN 'two_workers_each_half' THEN 0.95
                     WHEN 'two_workers' THEN 0.75
                     WHEN 'incarnations_overlap' THEN 0.9
                     WHEN 'restart_between' THEN 0.95
                     WHEN 'error_between' THEN 0.95
                     WHEN 'replayed_run' THEN 0.65
                     WHEN 'same_incarnation' THEN 0.8
                     WHEN 'no_evidence' THEN 0.6 END AS mechanism_confidence
    FROM ruled
), sent AS (
    -- two variants differ where the smallest and largest differ (codes: NULL is no variant)
    SELECT p, count(*) AS n_sends, min(v) < max(v) AS variants_differ FROM mm_dup_sends GROUP BY p
)
SELECT k.campaign, k.step, pe.recipient, t.test_id, d.n_sends, d.n_sends - 1 AS extra_sends,
       CASE WHEN d.variants_differ THEN 'ab-contamination' ELSE m.mechanism END AS kind,
       CASE WHEN d.variants_differ THEN m.mechanism END AS cause,
       CASE WHEN d.variants_differ THEN 0.97 ELSE m.mechanism_confidence END AS confidence,
       w1.worker AS worker1, w2.worker AS worker2, m.gap_s, m.start_between,
       m.incarnation_changed, m.incarnations_overlap, m.error_between, i1.incarnation AS inc1, i2.incarnation AS inc2, h1.shard AS shard1,
       m.lease_ran_out, m.claim1_ts, m.claim2_ts, m.lease_s,
       m.holder_sends_after_second_claim, m.replay_density, m.replayed,
       m.reached_a, m.reached_b, m.campaign_people, m.pair_claims, m.dup_shards, m.campaign_shards, m.p, m.cs
FROM mech m JOIN sent d USING (p) JOIN mm_people pe USING (p) JOIN mm_cs k ON k.cs = m.cs
LEFT JOIN mm_tests t ON t.t = m.t
LEFT JOIN mm_workers w1 ON w1.w = m.w1 LEFT JOIN mm_workers w2 ON w2.w = m.w2
LEFT JOIN mm_incarnations i1 ON i1.i = m.inc1 LEFT JOIN mm_incarnations i2 ON i2.i = m.inc2
LEFT JOIN mm_shards h1 ON h1.sh = m.sh1

-- name: dup_people_view
-- dup_people: the duplicated people as text (mm_verdicts without the codes), a view: nothing copied. It has no
-- lists of each person's variants and workers (a saved case's table has: save_dup_people).
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW dup_people AS SELECT * EXCLUDE (p, cs) FROM mm_verdicts

-- name: save_dup_people
-- A saved case's dup_people: the duplicated people as text (mm_verdicts without the codes), a table of its own,
-- with each person's variants and workers: the distinct values in order (as list(DISTINCT x ORDER BY x) of the
-- text; codes sort like their text), then NULL if one of the person's sends had none.
-- dialect: duckdb
CREATE OR REPLACE TABLE dup_people AS
WITH sent AS (
    SELECT p, list(v) AS vs, list(w) AS ws, count(*) AS n_sends, count(v) AS with_variant, count(w) AS with_worker
    FROM mm_dup_sends GROUP BY p
), names AS (
    SELECT (SELECT list(variant ORDER BY v) FROM mm_variants) AS variants,
           (SELECT list(worker ORDER BY w) FROM mm_workers) AS workers
), lists AS (
    SELECT d.p,
           list_transform(list_sort(list_distinct(d.vs)), lambda x: n.variants[x])
             || CASE WHEN d.with_variant < d.n_sends THEN [NULL::VARCHAR] ELSE [] END AS variants,
           list_transform(list_sort(list_distinct(d.ws)), lambda x: n.workers[x])
             || CASE WHEN d.with_worker < d.n_sends THEN [NULL::VARCHAR] ELSE [] END AS workers
    FROM sent d CROSS JOIN names n
)
SELECT m.campaign, m.step, m.recipient, m.test_id, m.n_sends, m.extra_sends, m.kind, m.cause, m.confidence,
       l.variants, l.workers,
       m.* EXCLUDE (campaign, step, recipient, test_id, n_sends, extra_sends, kind, cause, confidence, p, cs)
FROM mm_verdicts m JOIN lists l USING (p)

-- name: classify_release_pairs
-- Free the working tables of pairs and evidence once every person has a kind (incidents read people and sends
-- only).
-- dialect: duckdb
DROP TABLE IF EXISTS mm_pairs;
DROP TABLE IF EXISTS mm_pair_claims;
DROP TABLE IF EXISTS mm_groups;
DROP TABLE IF EXISTS mm_coverage;
DROP TABLE IF EXISTS mm_steps;
DROP TABLE IF EXISTS mm_evidence;
DROP TABLE IF EXISTS mm_failures;
DROP TABLE IF EXISTS mm_failed_recipients;
DROP TABLE IF EXISTS mm_failed_candidates;
DROP TABLE IF EXISTS mm_people;
DROP TABLE IF EXISTS mm_incarnations;
DROP TABLE IF EXISTS mm_incarnation_spans;
DROP TABLE IF EXISTS mm_tests

-- name: classify_release_sends
-- Free the coded sends and the dictionaries once the incidents are built (dup_people reads mm_verdicts only).
-- dialect: duckdb
DROP TABLE IF EXISTS mm_variants;
DROP TABLE IF EXISTS mm_dup_sends;
DROP TABLE IF EXISTS mm_reach;
DROP TABLE IF EXISTS mm_cs;
DROP TABLE IF EXISTS mm_workers;
DROP TABLE IF EXISTS mm_shards

-- name: build_incidents
-- One incident per kind, campaign and step (and test, for ab-contamination): its people, evidence counts, and
-- figures per worker (people it reached, duplicated people it sent to) and per shard (people whose first send was
-- there, its first and second claim). Works on codes, numbered once per incident (ik); text comes back from the
-- dictionaries at the end.
-- dialect: duckdb
CREATE OR REPLACE TABLE incidents AS
WITH keyed AS NOT MATERIALIZED (
    SELECT *, CASE WHEN kind = 'ab-contamination' THEN test_id END AS incident_test FROM mm_verdicts
), grouped AS (
    SELECT (row_number() OVER ())::INTEGER AS ik, * FROM (
        SELECT kind, campaign, step, incident_test AS test_id, any_value(cs) AS cs,
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
               -- one person's restart (the first by address among those whose incarnation changed)
               arg_min(inc1, recipient) FILTER (WHERE incarnation_changed) AS inc_before,
               arg_min(inc2, recipient) FILTER (WHERE incarnation_changed) AS inc_after,
               -- two incarnations of one worker that sent at once (the first such person's)
               count(*) FILTER (WHERE incarnations_overlap) AS with_overlapping_incarnations,
               arg_min(worker1, recipient) FILTER (WHERE incarnations_overlap) AS overlap_worker,
               arg_min(inc1, recipient) FILTER (WHERE incarnations_overlap) AS overlap_inc_a,
               arg_min(inc2, recipient) FILTER (WHERE incarnations_overlap) AS overlap_inc_b,
               count(*) FILTER (WHERE worker1 <> worker2) AS with_two_workers
        FROM keyed GROUP BY kind, campaign, step, incident_test)
), person AS MATERIALIZED (  -- each duplicated person's incident: two integers a row, read twice
    SELECT k.p, g.ik FROM keyed k JOIN grouped g ON g.kind = k.kind AND g.cs = k.cs
         AND g.test_id IS NOT DISTINCT FROM k.incident_test
), incident_sends AS MATERIALIZED (  -- every duplicated person's sends with their incident: six numbers a send,
    -- written once and read four times rather than joined anew for each read
    SELECT pe.ik, s.p, s.ts, s.w, s.sh, s.v FROM person pe JOIN mm_dup_sends s USING (p)
), names AS (
    SELECT (SELECT list(worker ORDER BY w) FROM mm_workers) AS workers,
           (SELECT list(shard ORDER BY sh) FROM mm_shards) AS shards,
           (SELECT list(variant ORDER BY v) FROM mm_variants) AS variants
), distinct_codes AS (
    -- each incident's workers, shards and variants, distinct and sorted (codes sort like their text)
    SELECT ik, list(DISTINCT code ORDER BY code) FILTER (WHERE what = 'w') AS ws,
           list(DISTINCT code ORDER BY code) FILTER (WHERE what = 'sh') AS shs,
           list(DISTINCT code ORDER BY code) FILTER (WHERE what = 'v') AS vs
    FROM (SELECT DISTINCT ik, 'w' AS what, w AS code FROM incident_sends WHERE w IS NOT NULL
          UNION ALL SELECT DISTINCT ik, 'sh', sh FROM incident_sends WHERE sh IS NOT NULL
          UNION ALL SELECT DISTINCT ik, 'v', v FROM incident_sends WHERE v IS NOT NULL)
    GROUP BY ik
), spans AS (
    SELECT t.ik, t.first_send, t.last_send,
           list_transform(coalesce(d.ws, []), lambda x: n.workers[x]) AS workers,
           list_transform(coalesce(d.shs, []), lambda x: n.shards[x]) AS shards,
           list_transform(coalesce(d.vs, []), lambda x: n.variants[x]) AS variants
    FROM (SELECT ik, min(ts) AS first_send, max(ts) AS last_send FROM incident_sends GROUP BY ik) t
    LEFT JOIN distinct_codes d USING (ik) CROSS JOIN names n
), by_worker AS (
    SELECT i.ik, list({'worker': w.worker, 'reached': r.reached, 'duplicated_people': i.duplicated_people}
                      ORDER BY r.reached DESC, w.worker) AS per_worker
    FROM (SELECT ik, w, count(DISTINCT p) AS duplicated_people FROM incident_sends WHERE w IS NOT NULL
          GROUP BY ALL) i
    JOIN grouped g USING (ik) JOIN mm_reach r ON r.cs = g.cs AND r.w = i.w JOIN mm_workers w ON w.w = i.w
    GROUP BY i.ik
), by_shard AS (
    SELECT ik, list({'shard': shard1, 'duplicated_people': people, 'first_claim_ts': first_claim_ts,
                     'second_claim_ts': second_claim_ts} ORDER BY people DESC, shard1) AS per_shard
    FROM (SELECT pe.ik, k.shard1, count(*) AS people, min(k.claim1_ts) AS first_claim_ts,
                 max(k.claim2_ts) AS second_claim_ts
          FROM keyed k JOIN person pe USING (p) WHERE k.shard1 IS NOT NULL GROUP BY ALL)
    GROUP BY ik
)
SELECT 'INC-' || row_number() OVER (ORDER BY g.people DESC, g.kind, g.campaign, g.step, g.test_id) AS id,
       g.* EXCLUDE (ik, cs), sp.first_send, sp.last_send, sp.workers, sp.shards,
       coalesce(w.per_worker, []) AS per_worker, coalesce(sh.per_shard, []) AS per_shard, sp.variants
FROM grouped g
JOIN spans sp USING (ik)
LEFT JOIN by_worker w USING (ik)
LEFT JOIN by_shard sh USING (ik)

-- name: incident_sizes
-- Incidents in the order of the affected list, with size, kind and campaign ('' for none): what affected batches by
-- and its --kind, --incident and --campaign choose among.
-- dialect: duckdb
SELECT id, people, kind, coalesce(campaign, '') AS campaign FROM incidents ORDER BY id

-- name: summary_counts
-- Case-wide totals: sends and their people from one scan of `sends` (a view, read again by each scan), duplicated
-- people and their extra sends.
-- dialect: duckdb
SELECT s.sends, s.people, d.duplicated_people, d.extra_sends
FROM (SELECT count(*) AS sends, count(DISTINCT recipient) AS people FROM sends) s,
     (SELECT count(*) AS duplicated_people, coalesce(sum(extra_sends), 0) AS extra_sends FROM dup_people) d

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
-- Candidates (a person's id in the logs) sent one campaign step at two or more addresses, which the (campaign,
-- step, recipient) key cannot see. Grouped by hashes first (no text held per group), then exactly within the groups
-- whose address hashes differ.
-- dialect: duckdb
WITH named AS NOT MATERIALIZED (
    SELECT * FROM sends WHERE candidate IS NOT NULL AND trim(candidate) <> ''
), split AS (
    SELECT hash(candidate, campaign, step) AS h FROM named
    GROUP BY h HAVING min(hash(recipient)) <> max(hash(recipient))
)
SELECT candidate, nullif(campaign, '') AS campaign, nullif(step, '') AS step,
       list(DISTINCT recipient ORDER BY recipient) AS recipients, count(*) AS sends,
       list(msg_id ORDER BY ts, msg_id) AS msg_ids,
       strftime(min(ts), '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS first_send,
       strftime(max(ts), '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS last_send
FROM named
WHERE hash(candidate, campaign, step) IN (SELECT h FROM split)
GROUP BY candidate, campaign, step
HAVING count(DISTINCT recipient) >= 2
ORDER BY candidate, campaign, step
