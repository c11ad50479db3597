-- name: affected_people_sends
-- Every send to a duplicated person of the incidents :incident_ids (those the filters chose: a person's kind
-- and campaign are their incident's), with the person and their incident: one row a send, in the order of the "affected" list
-- (docs/diagnose-json.md) and oldest send first within a person. Read as Arrow batches and grouped into one
-- row a person by polars (forensics/affected.py): a plain sort, where an ordered list() per person costs
-- several times more; asked for a batch of incidents at a time to bound the sort.
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
