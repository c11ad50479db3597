-- name: affected_people_sends
-- Every send to a duplicated person of the incidents :incident_ids, with the person and incident, in the affected
-- list's order (docs/diagnose-json.md), oldest send first. Grouped per person by polars (forensics/affected.py),
-- cheaper than an ordered list() per person; asked a batch of incidents at a time to bound the sort.
-- dialect: duckdb
SELECT d.recipient, nullif(d.campaign, '') AS campaign, nullif(d.step, '') AS step, d.kind, d.cause,
       i.id AS incident, strftime(s.ts, '%Y-%m-%dT%H:%M:%S.%g') || 'Z' AS ts, s.worker, s.incarnation, s.msg_id,
       s.variant, s.shard, s.candidate
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
     AND list_contains(:incident_ids::VARCHAR[], i.id)
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
ORDER BY i.id, d.campaign, d.step, d.recipient, s.ts, s.msg_id
