-- name: affected_people
-- Every duplicated person of the incidents :incident_ids, narrowed by :kind, :incident and :campaign (NULL: any),
-- with their incident and the sends they received, oldest first: one row each, in the order of the "affected"
-- list (docs/diagnose-json.md). Read as Arrow batches and written by the columnar writers (forensics/affected.py);
-- asked for a batch of incidents at a time so the lists stay within the memory limit.
-- dialect: duckdb
SELECT d.recipient, nullif(d.campaign, '') AS campaign, nullif(d.step, '') AS step, d.kind, d.cause,
       i.id AS incident,
       list({'ts': strftime(s.ts, '%Y-%m-%dT%H:%M:%S.%g') || 'Z', 'worker': s.worker,
             'incarnation': s.incarnation, 'msg_id': s.msg_id, 'variant': s.variant, 'shard': s.shard}
            ORDER BY s.ts, s.msg_id) AS sends
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
     AND list_contains(:incident_ids::VARCHAR[], i.id)
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
WHERE (:kind::VARCHAR IS NULL OR d.kind = :kind::VARCHAR)
  AND (:incident::VARCHAR IS NULL OR i.id = :incident::VARCHAR)
  AND (:campaign::VARCHAR IS NULL OR coalesce(d.campaign, '') = :campaign::VARCHAR)
GROUP BY d.recipient, d.campaign, d.step, d.kind, d.cause, i.id
ORDER BY i.id, d.campaign, d.step, d.recipient
