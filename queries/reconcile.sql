-- Reconcile the mail-send log's real sends (table sends) with the provider's history
-- (table provider_sends, loaded by forensics.reconcile.load_provider_sends). DuckDB.

-- name: reconcile_provider_table_create
-- The provider rows diagnose reconciles against (one row per message and recipient).
-- dialect: duckdb
CREATE OR REPLACE TABLE provider_sends AS SELECT * FROM provider_sends_arrow

-- name: reconcile_log_not_at_provider
-- Sends the log claims whose message id the provider never saw for that recipient.
-- dialect: duckdb
SELECT s.campaign, s.step, s.recipient, s.msg_id, s.ts, s.worker, s.source, s.line
FROM sends AS s
WHERE s.msg_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM {ident:provider_table} AS p
                  WHERE p.verdict = 'sent' AND p.msg_id = s.msg_id AND p.recipient = s.recipient)
ORDER BY s.ts NULLS LAST, s.recipient

-- name: reconcile_provider_not_in_log
-- Provider sends the log never mentions: the missing-log case of a state-loss.
-- dialect: duckdb
SELECT p.campaign, p.step, p.recipient, p.msg_id, p.sent_at, p.provider, p.source_file, p.source_line
FROM {ident:provider_table} AS p
WHERE p.verdict = 'sent' AND p.msg_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM sends AS s WHERE s.msg_id = p.msg_id AND s.recipient = p.recipient)
ORDER BY p.sent_at NULLS LAST, p.recipient

-- name: reconcile_provider_duplicates
-- People with two or more provider-confirmed sends for the same campaign and step.
-- dialect: duckdb
SELECT coalesce(p.campaign, s.campaign, '') AS campaign, coalesce(p.step, s.step, '') AS step, p.recipient,
       count(DISTINCT p.msg_id) AS sends, list(DISTINCT p.msg_id ORDER BY p.msg_id) AS msg_ids,
       min(p.sent_at) AS first_sent_at, max(p.sent_at) AS last_sent_at
FROM {ident:provider_table} AS p
LEFT JOIN sends AS s ON s.msg_id = p.msg_id AND s.recipient = p.recipient
WHERE p.verdict = 'sent' AND p.msg_id IS NOT NULL
GROUP BY ALL
HAVING count(DISTINCT p.msg_id) >= 2
ORDER BY sends DESC, campaign, step, recipient
