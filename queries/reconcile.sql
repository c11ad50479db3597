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

-- name: reconcile_provider_unplaced
-- Per export file, the provider sends that no grouping can look for duplicates among: the log does not hold them
-- and the chosen grouping (:grouped_by; '' for none) cannot place them in a campaign step, or they have no message
-- id or address. Lost evidence for a diagnose that reads logs beside the export.
-- dialect: duckdb
SELECT p.source_file AS path, count(*) AS sends, list(p.source_line ORDER BY p.source_line)[1:5] AS first_lines
FROM {ident:provider_table} AS p
WHERE p.verdict = 'sent'
  AND NOT EXISTS (SELECT 1 FROM sends AS s WHERE s.msg_id = p.msg_id AND s.recipient = p.recipient)
  AND (p.msg_id IS NULL OR p.recipient IS NULL OR NOT CASE :grouped_by
           WHEN 'metadata' THEN p.campaign IS NOT NULL AND p.step IS NOT NULL
           WHEN 'template' THEN p.template IS NOT NULL
           WHEN 'subject' THEN p.subject IS NOT NULL
           ELSE false END)
GROUP BY p.source_file
ORDER BY p.source_file

-- name: provider_no_log_sends
-- An empty stand-in for the log's sends when only exports are read (the grouping blocks join it).
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW provider_no_log AS
SELECT NULL::VARCHAR AS msg_id, NULL::VARCHAR AS recipient, NULL::VARCHAR AS campaign, NULL::VARCHAR AS step
WHERE false

-- name: provider_grouping_coverage
-- Per export file, its provider-confirmed sends and how many of those carry each grouping: the provider's
-- campaign and step (metadata), a template, a subject, the log's campaign and step (log); `unkeyed` sends have
-- no message id or address and cannot be compared at all.
-- dialect: duckdb
SELECT p.source_file, any_value(p.provider) AS provider, count(*) AS sends,
    count(*) FILTER (WHERE p.msg_id IS NULL OR p.recipient IS NULL) AS unkeyed,
    count(*) FILTER (WHERE p.msg_id IS NOT NULL AND p.recipient IS NOT NULL
                     AND p.campaign IS NOT NULL AND p.step IS NOT NULL) AS metadata,
    count(*) FILTER (WHERE p.msg_id IS NOT NULL AND p.recipient IS NOT NULL AND p.template IS NOT NULL) AS template,
    count(*) FILTER (WHERE p.msg_id IS NOT NULL AND p.recipient IS NOT NULL AND p.subject IS NOT NULL) AS subject,
    count(*) FILTER (WHERE p.msg_id IS NOT NULL AND p.recipient IS NOT NULL AND l.step <> '') AS log
FROM {ident:provider_table} AS p
LEFT JOIN {ident:log_sends} AS l ON l.msg_id = p.msg_id AND l.recipient = p.recipient
WHERE p.verdict = 'sent'
GROUP BY p.source_file
ORDER BY p.source_file

-- name: provider_duplicate_groups
-- Provider-confirmed duplicates: the provider's sends grouped by :grouped_by (metadata, template, subject or log
-- campaign and step) and normalised address, where a group holds two or more message ids and the log does not split
-- it into two steps. `in_log`: how many of its message ids the log holds.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE provider_duplicates AS
WITH sent AS (
    SELECT p.*, l.campaign AS log_campaign, l.step AS log_step, l.msg_id IS NOT NULL AS in_log
    FROM {ident:provider_table} AS p
    LEFT JOIN {ident:log_sends} AS l ON l.msg_id = p.msg_id AND l.recipient = p.recipient
    WHERE p.verdict = 'sent' AND p.msg_id IS NOT NULL AND p.recipient IS NOT NULL
), keyed AS (
    SELECT *,
        CASE :grouped_by WHEN 'metadata' THEN CASE WHEN step IS NOT NULL THEN campaign END
                         WHEN 'log' THEN CASE WHEN log_step <> '' THEN log_campaign END
                         ELSE coalesce(campaign, '') END AS k1,
        CASE :grouped_by WHEN 'metadata' THEN CASE WHEN campaign IS NOT NULL THEN step END
                         WHEN 'template' THEN template WHEN 'subject' THEN subject
                         WHEN 'log' THEN nullif(log_step, '') END AS k2
    FROM sent
), candidates AS (  -- two or more rows per key: the few groups the exact aggregates below look at
    SELECT recipient, k1, k2 FROM keyed WHERE k1 IS NOT NULL AND k2 IS NOT NULL
    GROUP BY recipient, k1, k2 HAVING count(*) >= 2
)
SELECT recipient, :grouped_by AS grouped_by,
    CASE WHEN :grouped_by IN ('metadata', 'log') THEN k1 ELSE coalesce(nullif(k1, ''), max(log_campaign)) END AS campaign,
    CASE WHEN :grouped_by IN ('metadata', 'log') THEN k2 ELSE max(log_step) END AS step,
    CASE WHEN :grouped_by IN ('template', 'subject') THEN k2 END AS label,
    count(DISTINCT msg_id) AS sends,
    list(msg_id ORDER BY sent_at NULLS LAST, msg_id) AS msg_ids,
    min(sent_at) AS first_sent_at, max(sent_at) AS last_sent_at,
    count(DISTINCT msg_id) FILTER (WHERE in_log) AS in_log,
    list(DISTINCT provider ORDER BY provider) AS providers
FROM keyed SEMI JOIN candidates USING (recipient, k1, k2)
GROUP BY recipient, k1, k2
HAVING count(DISTINCT msg_id) >= 2 AND count(DISTINCT [log_campaign, log_step]) FILTER (WHERE in_log) <= 1

-- name: provider_duplicate_rows
-- The provider-confirmed duplicates, one row per person and campaign step (or template/subject); those the log
-- cannot show (it holds fewer than two of their message ids) have sends - not_in_log < 2.
-- dialect: duckdb
SELECT campaign, step, grouped_by, label, recipient, sends, msg_ids, first_sent_at, last_sent_at,
    sends - in_log AS not_in_log, providers
FROM provider_duplicates
ORDER BY campaign NULLS LAST, step NULLS LAST, label NULLS LAST, recipient

-- name: provider_duplicate_summary
-- Counts of a provider-only diagnosis: provider-confirmed sends that can be compared, the people they reached,
-- duplicated people (per campaign step or template/subject) and the sends beyond the first to each.
-- dialect: duckdb
SELECT (SELECT count(*) FROM {ident:provider_table} WHERE verdict = 'sent' AND msg_id IS NOT NULL
            AND recipient IS NOT NULL) AS sends,
    (SELECT count(DISTINCT recipient) FROM {ident:provider_table} WHERE verdict = 'sent' AND msg_id IS NOT NULL)
        AS people,
    (SELECT count(*) FROM provider_duplicates) AS duplicated_people,
    (SELECT coalesce(sum(sends - 1), 0) FROM provider_duplicates)::BIGINT AS extra_sends

-- name: provider_send_campaigns
-- The campaigns the provider's sends name (what `affected --campaign` may pick), most sends first.
-- dialect: duckdb
SELECT campaign, count(*) AS sends
FROM provider_sends
WHERE verdict = 'sent' AND campaign IS NOT NULL
GROUP BY campaign
ORDER BY sends DESC, campaign
