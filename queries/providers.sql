-- Provider send history → one normalised row per event and recipient (DuckDB only).
-- Input: a registered table provider_docs(provider, source_file, source_line, text) with one
-- JSON document per row (a JSON Lines line, or a whole single-payload file).
-- Verdicts and normalisation: docs/sentlog.md, section What counts as "went out".

-- name: provider_malformed_docs
-- Documents that are not JSON at all: reported with file:line, never fatal for JSON Lines.
-- dialect: duckdb
SELECT source_file, source_line, 'not valid JSON' AS reason
FROM provider_docs
WHERE provider <> 'postfix' AND trim(text) <> '' AND NOT json_valid(text)
ORDER BY source_file, source_line

-- name: provider_events_unwrap
-- Valid documents → one JSON event each (view provider_events): batches, paging containers and envelopes unwrapped.
-- Fast path: a document that starts with '{' from a provider without containers or envelopes
-- (SendGrid, Resend, Brevo, generic) is the event itself, read in place without further parsing or copying.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE provider_events_unwrapped AS
WITH valid AS (
    SELECT provider, source_file, source_line, text::JSON AS j
    FROM provider_docs
    WHERE provider <> 'postfix' AND NOT (provider IN ('sendgrid', 'resend', 'brevo', 'generic') AND starts_with(text, '{'))
      AND json_valid(text)
), batches AS (
    SELECT provider, source_file, source_line, unnest(
        CASE WHEN json_type(j) = 'ARRAY' THEN json_extract(j, '$[*]')
             WHEN provider = 'mailgun' AND json_type(j -> 'items') = 'ARRAY' THEN json_extract(j, '$.items[*]')
             WHEN provider = 'postmark' AND json_type(j -> 'Messages') = 'ARRAY' THEN json_extract(j, '$.Messages[*]')
             WHEN provider = 'ses' AND json_type(j -> 'Records') = 'ARRAY' THEN json_extract(j, '$.Records[*].Sns')
             ELSE [j] END) AS e
    FROM valid
), inner_arrays AS (
    -- JSON Lines of SendGrid batches: a line may itself be an array
    SELECT provider, source_file, source_line, unnest(
        CASE WHEN json_type(e) = 'ARRAY' THEN json_extract(e, '$[*]') ELSE [e] END) AS e
    FROM batches
)
SELECT provider, source_file, source_line,
    CASE WHEN provider = 'mailgun' AND json_type(e -> 'event-data') = 'OBJECT' THEN e -> 'event-data'
         WHEN provider = 'ses' AND e ->> 'Type' = 'Notification' AND json_valid(e ->> 'Message')
              THEN (e ->> 'Message')::JSON
         ELSE e END::VARCHAR AS e
FROM inner_arrays;
CREATE OR REPLACE TEMP VIEW provider_events AS
SELECT provider, source_file, source_line, text AS e
FROM provider_docs
WHERE provider IN ('sendgrid', 'resend', 'brevo', 'generic') AND starts_with(text, '{') AND json_valid(text)
UNION ALL
SELECT provider, source_file, source_line, e FROM provider_events_unwrapped

-- name: provider_rows_sendgrid
-- SendGrid Event Webhook: processed = sent; delivered/bounce/deferred prove it; dropped = not sent.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line,
        json_extract_string(e, ['$.event', '$.sg_message_id', '$."smtp-id"', '$.email', '$.timestamp',
                                '$.subject', '$.sg_template_id', '$.template_id']
            || mm_meta_all(['$', '$.unique_args', '$.custom_args'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'sendgrid'
), named AS (
    SELECT source_file, source_line, v[1] AS event, nullif(trim(v[2]), '') AS sg, v[3] AS smtp_id, v[4] AS email,
        v[5] AS ts, mm_provider_label(v[6]) AS subject, mm_provider_label(coalesce(v[7], v[8])) AS template,
        mm_meta_at(v, 9, 3, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM picked
)
SELECT 'sendgrid' AS provider, source_file, source_line,
    event AS event_type,
    CASE WHEN event IN ('processed', 'delivered', 'bounce', 'blocked', 'deferred') THEN 'sent'
         WHEN event IN ('dropped') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    -- the join key is the part of sg_message_id before the first '.', unless it has no prefix
    CASE WHEN sg IS NULL OR starts_with(sg, 'filter') OR starts_with(sg, 'recvd-') THEN NULL
         ELSE split_part(sg, '.', 1) END AS msg_id,
    mm_msg_id(smtp_id) AS alt_id,
    coalesce(sg, smtp_id) AS provider_msg_id,
    mm_address(email) AS recipient,
    mm_provider_ts(ts) AS sent_at,
    m.campaign, m.step, m.candidate, subject, template
FROM named

-- name: provider_rows_mailgun
-- Mailgun events (webhook event-data, Events API items, legacy form posts): accepted = sent.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line,
        json_extract_string(e, ['$.event', '$.message.headers."message-id"', '$."Message-Id"', '$.recipient',
                                '$.message.headers.to', '$.timestamp', '$.message.headers.subject']
            || mm_meta_all(['$."user-variables"', '$'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'mailgun'
), named AS (
    SELECT source_file, source_line, v[1] AS event, coalesce(v[2], v[3]) AS raw_id, v[4] AS rcpt, v[5] AS header_to,
        v[6] AS ts, mm_provider_label(v[7]) AS subject, mm_meta_at(v, 8, 2, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM picked
)
SELECT 'mailgun' AS provider, source_file, source_line,
    event AS event_type,
    CASE WHEN event IN ('accepted', 'delivered', 'bounced') THEN 'sent'
         WHEN event IN ('rejected', 'failed', 'dropped') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(raw_id) AS msg_id,
    NULL AS alt_id,
    raw_id AS provider_msg_id,
    mm_address(coalesce(rcpt, CASE WHEN header_to NOT LIKE '%,%' THEN header_to END)) AS recipient,
    mm_provider_ts(ts) AS sent_at,
    m.campaign, m.step, m.candidate, subject, NULL::VARCHAR AS template
FROM named

-- name: provider_rows_ses
-- Amazon SES events and notifications: Send = sent; Delivery/Bounce/DeliveryDelay prove it; Reject and Rendering Failure = not sent.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line, e,
        json_extract_string(e, ['$.eventType', '$.notificationType', '$.Type', '$.mail.messageId', '$.mail.timestamp',
                                '$.mail.commonHeaders.subject']
            || mm_meta_all(['$.mail.tags'], '[0]', :campaign_keys, :step_keys, :candidate_keys)) AS v,
        json_type(e, '$.mail') = 'OBJECT' AS has_mail
    FROM provider_events WHERE provider = 'ses'
), typed AS (
    SELECT *, coalesce(v[1], v[2], v[3]) AS kind, mm_meta_at(v, 7, 1, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM picked
), exploded AS (
    SELECT *, unnest(coalesce(
        CASE kind
            WHEN 'Delivery' THEN mm_some(json_extract_string(e, '$.delivery.recipients[*]'))
            WHEN 'Bounce' THEN mm_some(json_extract_string(e, '$.bounce.bouncedRecipients[*].emailAddress'))
            WHEN 'Complaint' THEN mm_some(json_extract_string(e, '$.complaint.complainedRecipients[*].emailAddress'))
            WHEN 'DeliveryDelay' THEN mm_some(json_extract_string(e, '$.deliveryDelay.delayedRecipients[*].emailAddress'))
        END,
        mm_some(json_extract_string(e, '$.mail.destination[*]')),
        [NULL::VARCHAR])) AS raw_recipient
    FROM typed
)
SELECT 'ses' AS provider, source_file, source_line,
    kind AS event_type,
    CASE WHEN kind IN ('Send', 'Delivery', 'Bounce', 'DeliveryDelay') AND has_mail THEN 'sent'
         WHEN kind IN ('Reject', 'Rendering Failure', 'RenderingFailure') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(v[4]) AS msg_id,
    NULL AS alt_id,
    v[4] AS provider_msg_id,
    mm_address(raw_recipient) AS recipient,
    mm_provider_ts(v[5]) AS sent_at,
    m.campaign, m.step, m.candidate, mm_provider_label(v[6]) AS subject, NULL::VARCHAR AS template
FROM exploded

-- name: provider_rows_postmark
-- Postmark webhooks (Delivery/Bounce prove a send) and outbound search results (Status Sent/Queued/Processed).
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line, e,
        json_extract_string(e, ['$.RecordType', '$.Status', '$.Recipient', '$.Email', '$.MessageID', '$.MessageId',
                                '$.messageid', '$.ReceivedAt', '$.DeliveredAt', '$.BouncedAt', '$.ChangedAt', '$.Subject']
            || mm_meta_all(['$.Metadata'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'postmark'
), typed AS (
    SELECT *, coalesce(v[1], v[2]) AS kind, v[1] IS NULL AS is_outbound,
        mm_meta_at(v, 13, 1, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM picked
), exploded AS (
    SELECT *, unnest(CASE
        WHEN is_outbound THEN coalesce(mm_some(json_extract_string(e, '$.Recipients[*]')),
                                       mm_some(json_extract_string(e, '$.To[*].Email')), [NULL::VARCHAR])
        ELSE [coalesce(v[3], v[4])] END) AS raw_recipient
    FROM typed
)
SELECT 'postmark' AS provider, source_file, source_line,
    kind AS event_type,
    CASE WHEN is_outbound AND lower(kind) IN ('sent', 'queued', 'processed') THEN 'sent'
         WHEN is_outbound THEN 'not_sent'
         WHEN kind IN ('Delivery', 'Bounce') THEN 'sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(coalesce(v[5], v[6], v[7])) AS msg_id,
    NULL AS alt_id,
    coalesce(v[5], v[6], v[7]) AS provider_msg_id,
    mm_address(raw_recipient) AS recipient,
    mm_provider_ts(coalesce(v[8], v[9], v[10], v[11])) AS sent_at,
    m.campaign, m.step, m.candidate, mm_provider_label(v[12]) AS subject, NULL::VARCHAR AS template
FROM exploded

-- name: provider_rows_resend
-- Resend webhooks: email.sent = sent; delivered/delayed/bounced prove it, except a suppressed bounce.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line, e,
        json_extract_string(e, ['$.type', '$.data.bounce.message', '$.data.email_id', '$.data.created_at',
                                '$.created_at', '$.data.to', '$.data.subject']
            || mm_meta_all(['$.data.tags'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'resend'
), exploded AS (
    SELECT *, v[1] AS kind, mm_meta_at(v, 8, 1, :campaign_keys, :step_keys, :candidate_keys) AS m,
        unnest(coalesce(mm_some(json_extract_string(e, '$.data.to[*]')), [v[6]])) AS raw_recipient
    FROM picked
)
SELECT 'resend' AS provider, source_file, source_line,
    kind AS event_type,
    CASE WHEN kind = 'email.bounced' AND v[2] ILIKE '%suppressed%' THEN 'not_sent'
         WHEN kind IN ('email.sent', 'email.delivered', 'email.delivery_delayed', 'email.bounced') THEN 'sent'
         WHEN kind IN ('email.failed', 'email.suppressed') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(v[3]) AS msg_id,
    NULL AS alt_id,
    v[3] AS provider_msg_id,
    mm_address(raw_recipient) AS recipient,
    mm_provider_ts(coalesce(v[4], v[5])) AS sent_at,
    m.campaign, m.step, m.candidate, mm_provider_label(v[7]) AS subject, NULL::VARCHAR AS template
FROM exploded

-- name: provider_rows_brevo
-- Brevo transactional webhooks: request = sent; delivered/bounces/deferred prove it; blocked/invalid/error = not sent.
-- Metadata is looked up in the X-Mailin-custom JSON first, then at the top level.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line,
        json_extract_string(e, ['$.event', '$."message-id"', '$.email', '$.ts_epoch', '$.ts_event', '$."X-Mailin-custom"',
                                '$.subject', '$.template_id', '$.templateId']
            || mm_meta_all(['$'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'brevo'
), custom AS (
    SELECT *, CASE WHEN json_valid(v[6]) THEN
        json_extract_string(v[6], mm_meta_all(['$'], '', :campaign_keys, :step_keys, :candidate_keys)) END AS xv
    FROM picked
), named AS (
    SELECT *, mm_meta_at(xv, 1, 1, :campaign_keys, :step_keys, :candidate_keys) AS xm,
        mm_meta_at(v, 10, 1, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM custom
)
SELECT 'brevo' AS provider, source_file, source_line,
    v[1] AS event_type,
    CASE WHEN v[1] IN ('request', 'delivered', 'hard_bounce', 'soft_bounce', 'deferred') THEN 'sent'
         WHEN v[1] IN ('blocked', 'invalid_email', 'error') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(v[2]) AS msg_id,
    NULL AS alt_id,
    v[2] AS provider_msg_id,
    mm_address(v[3]) AS recipient,
    coalesce(mm_provider_ts(v[4]), mm_provider_ts(v[5])) AS sent_at,
    coalesce(xm.campaign, m.campaign) AS campaign,
    coalesce(xm.step, m.step) AS step,
    coalesce(xm.candidate, m.candidate) AS candidate,
    mm_provider_label(v[7]) AS subject, mm_provider_label(coalesce(v[8], v[9])) AS template
FROM named

-- name: provider_rows_generic
-- Generic JSON Lines: each field is the first non-empty of its keys (a --map names one; otherwise the
-- canonical name, the time names, the metadata keys). Every event is a send unless an event value says otherwise.
-- dialect: duckdb
WITH picked AS (
    SELECT source_file, source_line,
        json_extract_string(e, mm_meta_paths(['$'], :event_keys, '') || mm_meta_paths(['$'], :msg_id_keys, '')
            || mm_meta_paths(['$'], :recipient_keys, '') || mm_meta_paths(['$'], :sent_at_keys, '')
            || mm_meta_paths(['$'], :subject_keys, '') || mm_meta_paths(['$'], :template_keys, '')
            || mm_meta_all(['$'], '', :campaign_keys, :step_keys, :candidate_keys)) AS v
    FROM provider_events WHERE provider = 'generic'
), named AS (
    SELECT source_file, source_line,
        mm_first_in(v, 1, len(:event_keys)) AS event,
        mm_first_in(v, 1 + len(:event_keys), len(:msg_id_keys)) AS raw_id,
        mm_first_in(v, 1 + len(:event_keys) + len(:msg_id_keys), len(:recipient_keys)) AS rcpt,
        mm_first_in(v, 1 + len(:event_keys) + len(:msg_id_keys) + len(:recipient_keys), len(:sent_at_keys)) AS ts,
        mm_first_in(v, 1 + len(:event_keys) + len(:msg_id_keys) + len(:recipient_keys) + len(:sent_at_keys),
                    len(:subject_keys)) AS subject,
        mm_first_in(v, 1 + len(:event_keys) + len(:msg_id_keys) + len(:recipient_keys) + len(:sent_at_keys)
                       + len(:subject_keys), len(:template_keys)) AS template,
        mm_meta_at(v, 1 + len(:event_keys) + len(:msg_id_keys) + len(:recipient_keys) + len(:sent_at_keys)
                      + len(:subject_keys) + len(:template_keys), 1, :campaign_keys, :step_keys, :candidate_keys) AS m
    FROM picked
)
SELECT 'generic' AS provider, source_file, source_line,
    coalesce(event, 'send') AS event_type,
    CASE WHEN event IS NULL THEN 'sent'
         WHEN list_contains(:sent_words, lower(trim(event))) THEN 'sent'
         WHEN list_contains(:not_sent_words, lower(trim(event))) THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msg_id(raw_id) AS msg_id,
    NULL AS alt_id,
    raw_id AS provider_msg_id,
    mm_address(rcpt) AS recipient,
    mm_provider_ts(ts) AS sent_at,
    m.campaign, m.step, m.candidate, mm_provider_label(subject) AS subject, mm_provider_label(template) AS template
FROM named

-- name: provider_rows_postfix
-- Postfix maillog lines (provider_docs rows of provider 'postfix'): status=sent to a non-local relay = sent;
-- hand-offs to a local content filter and "forwarded as" are not sends; bounced/deferred = not sent.
-- queue id → message-id comes from the nearest earlier cleanup line of the same file (queue ids are reused).
-- dialect: duckdb
WITH lines AS (
    SELECT source_file, source_line, text,
        regexp_extract(text, 'postfix(?:-[A-Za-z0-9_.-]+)?/([A-Za-z0-9_/-]+)\[[0-9]+\]: ([0-9A-Za-z]{5,}): (.*)$',
                       ['daemon', 'qid', 'rest']) AS p
    FROM provider_docs WHERE provider = 'postfix'
), stamped AS (
    SELECT *,
        regexp_extract(text, '^([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})',
                       ['mon', 'day', 'h', 'm', 's']) AS c,
        TRY_CAST(regexp_replace(regexp_extract(text, '^([0-9]{4}-[0-9]{2}-[0-9]{2}T\S+)', 1),
                                '(\.[0-9]{6})[0-9]+', '\1') AS TIMESTAMPTZ) AS rfc_ts
    FROM lines WHERE p.qid <> ''
), months AS (
    SELECT *, (strpos('JanFebMarAprMayJunJulAugSepOctNovDec', c.mon) + 2) // 3 AS month FROM stamped
), rollover AS (
    SELECT *, CASE WHEN month < lag(month) OVER (PARTITION BY source_file ORDER BY source_line) THEN 1 ELSE 0 END AS wrapped
    FROM months
), years AS (
    SELECT *, CAST(sum(wrapped) OVER (PARTITION BY source_file ORDER BY source_line) AS BIGINT) AS year_offset
    FROM rollover
), dated AS (
    SELECT *, coalesce(rfc_ts, timezone(:tz, try(make_timestamp(
            CAST(:year AS BIGINT) + year_offset,
            month, TRY_CAST(c.day AS BIGINT), TRY_CAST(c.h AS BIGINT), TRY_CAST(c.m AS BIGINT),
            TRY_CAST(c.s AS DOUBLE))))) AS ts
    FROM years
), cleanups AS (
    SELECT source_file, source_line, p.qid AS qid, mm_msg_id(regexp_extract(p.rest, '^message-id=(\S*)', 1)) AS msgid
    FROM dated WHERE p.daemon LIKE '%cleanup' AND p.rest LIKE 'message-id=%'
), deliveries AS (
    SELECT source_file, source_line, ts, p.qid AS qid,
        regexp_extract(p.rest,
            '^to=<([^>]*)>, (?:orig_to=<[^>]*>, )?relay=([^,]+), (?:conn_use=[^,]+, )?delay=[^,]+, (?:delays=[^,]+, )?(?:dsn=[^,]+, )?status=(\S+)(.*)$',
            ['rcpt', 'relay', 'status', 'response']) AS d
    FROM dated WHERE p.rest LIKE 'to=<%'
)
SELECT 'postfix' AS provider, d.source_file, d.source_line,
    'status=' || d.d.status AS event_type,
    CASE WHEN d.d.status = 'sent' AND regexp_matches(d.d.relay, '(^localhost|^127\.|\[127\.|\[::1\]|^::1)') THEN 'not_a_send_event'
         WHEN d.d.status = 'sent' AND d.d.response LIKE '%forwarded as %' THEN 'not_a_send_event'
         WHEN d.d.status = 'sent' THEN 'sent'
         ELSE 'not_sent' END AS verdict,
    c.msgid AS msg_id,
    'postfix-queue:' || d.qid AS alt_id,
    d.qid AS provider_msg_id,
    mm_address(d.d.rcpt) AS recipient,
    d.ts AS sent_at,
    NULL::VARCHAR AS campaign, NULL::VARCHAR AS step, NULL::VARCHAR AS candidate,
    NULL::VARCHAR AS subject, NULL::VARCHAR AS template
FROM deliveries AS d
ASOF LEFT JOIN cleanups AS c
    ON d.source_file = c.source_file AND d.qid = c.qid AND d.source_line >= c.source_line
WHERE d.d.rcpt <> ''

-- name: provider_rows_csv
-- A CSV export already renamed to canonical columns (recipient, msg_id, sent_at, event, campaign, step,
-- candidate) and registered as provider_csv; SendGrid's activity export keeps only the sg_message_id prefix.
-- dialect: duckdb
SELECT :provider AS provider, source_file, source_line,
    coalesce(event, 'send') AS event_type,
    CASE WHEN event IS NULL THEN 'sent'
         WHEN list_contains(:sent_words, lower(trim(event))) THEN 'sent'
         WHEN list_contains(:not_sent_words, lower(trim(event))) THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    CASE WHEN :provider = 'sendgrid' AND NOT regexp_matches(trim(msg_id), '^(filter|recvd-)')
         THEN split_part(trim(msg_id), '.', 1) ELSE mm_msg_id(msg_id) END AS msg_id,
    NULL AS alt_id,
    msg_id AS provider_msg_id,
    mm_address(recipient) AS recipient,
    mm_provider_ts(sent_at) AS sent_at,
    nullif(trim(campaign), '') AS campaign, nullif(trim(step), '') AS step, nullif(trim(candidate), '') AS candidate,
    mm_provider_label(subject) AS subject, mm_provider_label(template) AS template
FROM provider_csv

-- name: provider_collapse
-- One row per (provider, message, recipient): a send wins over not-sent over other events, the first by (verdict
-- rank, sent_at, file, line), its missing metadata filled from the group; a row without a message id borrows one
-- through its alternate id (smtp-id, queue id). One hash aggregation carrying the kept row's number, no window
-- sort.
-- dialect: duckdb
WITH numbered AS (
    SELECT * FROM provider_event_rows
), alternates AS (
    SELECT provider, alt_id, recipient, min(msg_id) AS alt_msg_id
    FROM numbered WHERE msg_id IS NOT NULL AND alt_id IS NOT NULL
    GROUP BY provider, alt_id, recipient
), keyed AS (
    SELECT *, msg_id AS key_id FROM numbered WHERE msg_id IS NOT NULL
    UNION ALL
    SELECT r.*, coalesce(a.alt_msg_id, r.alt_id) AS key_id
    FROM (SELECT * FROM numbered WHERE msg_id IS NULL) AS r
    LEFT JOIN alternates AS a ON a.provider = r.provider AND a.alt_id = r.alt_id AND a.recipient = r.recipient
), ranked AS (
    SELECT *, CASE verdict WHEN 'sent' THEN 0 WHEN 'not_sent' THEN 1 ELSE 2 END AS vrank FROM keyed
), grouped AS (
    SELECT provider, key_id, recipient, min(vrank) AS vrank,
        arg_min(rid, struct_pack(vrank, no_time := sent_at IS NULL,
                                 t := coalesce(sent_at, TIMESTAMPTZ '1970-01-01 00:00:00+00'), source_file, source_line)) AS kept,
        max(campaign) AS any_campaign, max(step) AS any_step, max(candidate) AS any_candidate,
        max(subject) AS any_subject, max(template) AS any_template
    FROM ranked WHERE key_id IS NOT NULL AND recipient IS NOT NULL
    GROUP BY provider, key_id, recipient
), chosen AS (
    SELECT g.provider, r.source_file, r.source_line, r.event_type, g.vrank, g.key_id AS msg_id, r.provider_msg_id,
        g.recipient, r.sent_at, coalesce(r.campaign, g.any_campaign) AS campaign,
        coalesce(r.step, g.any_step) AS step, coalesce(r.candidate, g.any_candidate) AS candidate,
        coalesce(r.subject, g.any_subject) AS subject, coalesce(r.template, g.any_template) AS template
    FROM grouped AS g JOIN numbered AS r ON r.rid = g.kept
    UNION ALL
    SELECT provider, source_file, source_line, event_type, vrank, key_id AS msg_id, provider_msg_id,
        recipient, sent_at, campaign, step, candidate, subject, template
    FROM ranked WHERE key_id IS NULL OR recipient IS NULL
)
SELECT provider, source_file, source_line, event_type,
    CASE vrank WHEN 0 THEN 'sent' WHEN 1 THEN 'not_sent' ELSE 'not_a_send_event' END AS verdict,
    msg_id, provider_msg_id, recipient, sent_at, campaign, step, candidate, subject, template
FROM chosen

-- name: provider_session_utc
-- Reader sessions compute and print times in UTC.
-- dialect: duckdb
SET TimeZone = 'UTC'
