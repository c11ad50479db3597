-- Provider send history → one normalised row per event and recipient (DuckDB only).
-- Input: a registered table provider_docs(provider, source_file, source_line, text) with one
-- JSON document per row (a JSON Lines line, or a whole single-payload file).
-- Verdicts follow shared/spec/provider-formats.md §0 and §8.

-- name: provider_macros
-- Helper macros: metadata lookup, address and message-id normalisation, tolerant timestamps.
CREATE OR REPLACE TEMP MACRO mm_meta(objs, keys, suffix) AS (
    list_filter(
        flatten(list_transform(objs, lambda o: list_transform(keys,
            lambda k: json_extract_string(o, '$."' || replace(k, '"', '\"') || '"' || suffix)))),
        lambda x: x IS NOT NULL AND x <> '')[1]
);
CREATE OR REPLACE TEMP MACRO mm_addr(x) AS (
    nullif(lower(trim(CASE WHEN x LIKE '%<%>%' THEN regexp_extract(x, '<([^>]*)>', 1) ELSE x END)), '')
);
CREATE OR REPLACE TEMP MACRO mm_msgid(x) AS (
    nullif(trim(CASE WHEN starts_with(trim(x), '<') AND ends_with(trim(x), '>')
                     THEN trim(x)[2:-2] ELSE trim(x) END), '')
);
CREATE OR REPLACE TEMP MACRO mm_some(l) AS (CASE WHEN len(l) > 0 THEN l END);
CREATE OR REPLACE TEMP MACRO mm_ts(x) AS (
    CASE
        WHEN x IS NULL OR trim(x) = '' THEN NULL
        WHEN regexp_full_match(trim(x), '-?[0-9]+(\.[0-9]+)?') THEN
            CASE WHEN abs(TRY_CAST(trim(x) AS DOUBLE)) >= 1e11
                 THEN to_timestamp(TRY_CAST(trim(x) AS DOUBLE) / 1000)
                 ELSE to_timestamp(TRY_CAST(trim(x) AS DOUBLE)) END
        ELSE TRY_CAST(regexp_replace(trim(x), '(\.[0-9]{6})[0-9]+', '\1') AS TIMESTAMPTZ)
    END
)

-- name: provider_malformed_docs
-- Documents that are not JSON at all: reported with file:line, never fatal for JSON Lines.
SELECT source_file, source_line, 'not valid JSON' AS reason
FROM provider_docs
WHERE provider <> 'postfix' AND trim(text) <> '' AND NOT json_valid(text)
ORDER BY source_file, source_line

-- name: provider_events_unwrap
-- Valid documents → one JSON event each: batches, paging containers and envelopes unwrapped.
CREATE OR REPLACE TEMP TABLE provider_events AS
WITH valid AS (
    SELECT provider, source_file, source_line, text::JSON AS j
    FROM provider_docs WHERE provider <> 'postfix' AND json_valid(text)
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
         ELSE e END AS e
FROM inner_arrays

-- name: provider_rows_sendgrid
-- SendGrid Event Webhook: processed = sent; delivered/bounce/deferred prove it; dropped = not sent.
SELECT 'sendgrid' AS provider, source_file, source_line,
    e ->> 'event' AS event_type,
    CASE WHEN e ->> 'event' IN ('processed', 'delivered', 'bounce', 'blocked', 'deferred') THEN 'sent'
         WHEN e ->> 'event' IN ('dropped') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    -- the join key is the part of sg_message_id before the first '.', unless it has no prefix
    CASE WHEN sg IS NULL OR regexp_matches(sg, '^(filter|recvd-)') THEN NULL
         ELSE split_part(sg, '.', 1) END AS msg_id,
    mm_msgid(e ->> 'smtp-id') AS alt_id,
    coalesce(sg, e ->> 'smtp-id') AS provider_msg_id,
    mm_addr(e ->> 'email') AS recipient,
    mm_ts(e ->> 'timestamp') AS sent_at,
    mm_meta([e, e -> 'unique_args', e -> 'custom_args'], $campaign_keys, '') AS campaign,
    mm_meta([e, e -> 'unique_args', e -> 'custom_args'], $step_keys, '') AS step,
    mm_meta([e, e -> 'unique_args', e -> 'custom_args'], $candidate_keys, '') AS candidate
FROM (SELECT *, nullif(trim(e ->> 'sg_message_id'), '') AS sg FROM provider_events WHERE provider = 'sendgrid')

-- name: provider_rows_mailgun
-- Mailgun events (webhook event-data, Events API items, legacy form posts): accepted = sent.
SELECT 'mailgun' AS provider, source_file, source_line,
    e ->> 'event' AS event_type,
    CASE WHEN e ->> 'event' IN ('accepted', 'delivered', 'bounced') THEN 'sent'
         WHEN e ->> 'event' IN ('rejected', 'failed', 'dropped') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(coalesce(e -> 'message' -> 'headers' ->> 'message-id', e ->> 'Message-Id')) AS msg_id,
    NULL AS alt_id,
    coalesce(e -> 'message' -> 'headers' ->> 'message-id', e ->> 'Message-Id') AS provider_msg_id,
    mm_addr(coalesce(e ->> 'recipient',
        CASE WHEN (e -> 'message' -> 'headers' ->> 'to') NOT LIKE '%,%'
             THEN e -> 'message' -> 'headers' ->> 'to' END)) AS recipient,
    mm_ts(e ->> 'timestamp') AS sent_at,
    mm_meta([e -> 'user-variables', e], $campaign_keys, '') AS campaign,
    mm_meta([e -> 'user-variables', e], $step_keys, '') AS step,
    mm_meta([e -> 'user-variables', e], $candidate_keys, '') AS candidate
FROM provider_events WHERE provider = 'mailgun'

-- name: provider_rows_ses
-- Amazon SES events and notifications: Send = sent; Delivery/Bounce/DeliveryDelay prove it; Reject and Rendering Failure = not sent.
WITH typed AS (
    SELECT *, coalesce(e ->> 'eventType', e ->> 'notificationType', e ->> 'Type') AS kind
    FROM provider_events WHERE provider = 'ses'
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
    CASE WHEN kind IN ('Send', 'Delivery', 'Bounce', 'DeliveryDelay') AND json_type(e, '$.mail') = 'OBJECT' THEN 'sent'
         WHEN kind IN ('Reject', 'Rendering Failure', 'RenderingFailure') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(e -> 'mail' ->> 'messageId') AS msg_id,
    NULL AS alt_id,
    e -> 'mail' ->> 'messageId' AS provider_msg_id,
    mm_addr(raw_recipient) AS recipient,
    mm_ts(e -> 'mail' ->> 'timestamp') AS sent_at,
    mm_meta([e -> 'mail' -> 'tags'], $campaign_keys, '[0]') AS campaign,
    mm_meta([e -> 'mail' -> 'tags'], $step_keys, '[0]') AS step,
    mm_meta([e -> 'mail' -> 'tags'], $candidate_keys, '[0]') AS candidate
FROM exploded

-- name: provider_rows_postmark
-- Postmark webhooks (Delivery/Bounce prove a send) and outbound search results (Status Sent/Queued/Processed).
WITH typed AS (
    SELECT *, coalesce(e ->> 'RecordType', e ->> 'Status') AS kind,
        (e ->> 'RecordType') IS NULL AS is_outbound
    FROM provider_events WHERE provider = 'postmark'
), exploded AS (
    SELECT *, unnest(CASE
        WHEN is_outbound THEN coalesce(mm_some(json_extract_string(e, '$.Recipients[*]')),
                                       mm_some(json_extract_string(e, '$.To[*].Email')), [NULL::VARCHAR])
        ELSE [coalesce(e ->> 'Recipient', e ->> 'Email')] END) AS raw_recipient
    FROM typed
)
SELECT 'postmark' AS provider, source_file, source_line,
    kind AS event_type,
    CASE WHEN is_outbound AND lower(kind) IN ('sent', 'queued', 'processed') THEN 'sent'
         WHEN is_outbound THEN 'not_sent'
         WHEN kind IN ('Delivery', 'Bounce') THEN 'sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(coalesce(e ->> 'MessageID', e ->> 'MessageId', e ->> 'messageid')) AS msg_id,
    NULL AS alt_id,
    coalesce(e ->> 'MessageID', e ->> 'MessageId', e ->> 'messageid') AS provider_msg_id,
    mm_addr(raw_recipient) AS recipient,
    mm_ts(coalesce(e ->> 'ReceivedAt', e ->> 'DeliveredAt', e ->> 'BouncedAt', e ->> 'ChangedAt')) AS sent_at,
    mm_meta([e -> 'Metadata'], $campaign_keys, '') AS campaign,
    mm_meta([e -> 'Metadata'], $step_keys, '') AS step,
    mm_meta([e -> 'Metadata'], $candidate_keys, '') AS candidate
FROM exploded

-- name: provider_rows_resend
-- Resend webhooks: email.sent = sent; delivered/delayed/bounced prove it, except a suppressed bounce.
WITH exploded AS (
    SELECT *, e ->> 'type' AS kind,
        unnest(coalesce(mm_some(json_extract_string(e, '$.data.to[*]')), [e -> 'data' ->> 'to'])) AS raw_recipient
    FROM provider_events WHERE provider = 'resend'
)
SELECT 'resend' AS provider, source_file, source_line,
    kind AS event_type,
    CASE WHEN kind = 'email.bounced' AND (e -> 'data' -> 'bounce' ->> 'message') ILIKE '%suppressed%' THEN 'not_sent'
         WHEN kind IN ('email.sent', 'email.delivered', 'email.delivery_delayed', 'email.bounced') THEN 'sent'
         WHEN kind IN ('email.failed', 'email.suppressed') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(e -> 'data' ->> 'email_id') AS msg_id,
    NULL AS alt_id,
    e -> 'data' ->> 'email_id' AS provider_msg_id,
    mm_addr(raw_recipient) AS recipient,
    mm_ts(coalesce(e -> 'data' ->> 'created_at', e ->> 'created_at')) AS sent_at,
    mm_meta([e -> 'data' -> 'tags'], $campaign_keys, '') AS campaign,
    mm_meta([e -> 'data' -> 'tags'], $step_keys, '') AS step,
    mm_meta([e -> 'data' -> 'tags'], $candidate_keys, '') AS candidate
FROM exploded

-- name: provider_rows_brevo
-- Brevo transactional webhooks: request = sent; delivered/bounces/deferred prove it; blocked/invalid/error = not sent.
WITH custom AS (
    SELECT *, CASE WHEN json_valid(e ->> 'X-Mailin-custom') THEN (e ->> 'X-Mailin-custom')::JSON END AS xc
    FROM provider_events WHERE provider = 'brevo'
)
SELECT 'brevo' AS provider, source_file, source_line,
    e ->> 'event' AS event_type,
    CASE WHEN e ->> 'event' IN ('request', 'delivered', 'hard_bounce', 'soft_bounce', 'deferred') THEN 'sent'
         WHEN e ->> 'event' IN ('blocked', 'invalid_email', 'error') THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(e ->> 'message-id') AS msg_id,
    NULL AS alt_id,
    e ->> 'message-id' AS provider_msg_id,
    mm_addr(e ->> 'email') AS recipient,
    coalesce(mm_ts(e ->> 'ts_epoch'), mm_ts(e ->> 'ts_event')) AS sent_at,
    mm_meta([xc, e], $campaign_keys, '') AS campaign,
    mm_meta([xc, e], $step_keys, '') AS step,
    mm_meta([xc, e], $candidate_keys, '') AS candidate
FROM custom

-- name: provider_rows_generic
-- Generic JSON Lines with a --map: every event is a send unless a mapped event field says otherwise.
SELECT 'generic' AS provider, source_file, source_line,
    coalesce(mm_meta([e], [$event_key], ''), 'send') AS event_type,
    CASE WHEN $event_key = '' THEN 'sent'
         WHEN list_contains($sent_words, lower(mm_meta([e], [$event_key], ''))) THEN 'sent'
         WHEN list_contains($not_sent_words, lower(mm_meta([e], [$event_key], ''))) THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    mm_msgid(mm_meta([e], [$msg_id_key], '')) AS msg_id,
    NULL AS alt_id,
    mm_meta([e], [$msg_id_key], '') AS provider_msg_id,
    mm_addr(mm_meta([e], [$recipient_key], '')) AS recipient,
    mm_ts(mm_meta([e], [$sent_at_key], '')) AS sent_at,
    mm_meta([e], $campaign_keys, '') AS campaign,
    mm_meta([e], $step_keys, '') AS step,
    mm_meta([e], $candidate_keys, '') AS candidate
FROM provider_events WHERE provider = 'generic'

-- name: provider_rows_postfix
-- Postfix maillog lines (provider_docs rows of provider 'postfix'): status=sent to a non-local relay = sent;
-- hand-offs to a local content filter and "forwarded as" are not sends; bounced/deferred = not sent.
-- queue id → message-id comes from the nearest earlier cleanup line of the same file (queue ids are reused).
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
    SELECT *, coalesce(rfc_ts, timezone($tz, try(make_timestamp(
            CAST($year AS BIGINT) + year_offset,
            month, TRY_CAST(c.day AS BIGINT), TRY_CAST(c.h AS BIGINT), TRY_CAST(c.m AS BIGINT),
            TRY_CAST(c.s AS DOUBLE))))) AS ts
    FROM years
), cleanups AS (
    SELECT source_file, source_line, p.qid AS qid, mm_msgid(regexp_extract(p.rest, '^message-id=(\S*)', 1)) AS msgid
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
    mm_addr(d.d.rcpt) AS recipient,
    d.ts AS sent_at,
    NULL::VARCHAR AS campaign, NULL::VARCHAR AS step, NULL::VARCHAR AS candidate
FROM deliveries AS d
ASOF LEFT JOIN cleanups AS c
    ON d.source_file = c.source_file AND d.qid = c.qid AND d.source_line >= c.source_line
WHERE d.d.rcpt <> ''

-- name: provider_rows_csv
-- A CSV export already renamed to canonical columns (recipient, msg_id, sent_at, event, campaign, step,
-- candidate) and registered as provider_csv; SendGrid's activity export keeps only the sg_message_id prefix.
SELECT $provider AS provider, source_file, source_line,
    coalesce(event, 'send') AS event_type,
    CASE WHEN event IS NULL THEN 'sent'
         WHEN list_contains($sent_words, lower(trim(event))) THEN 'sent'
         WHEN list_contains($not_sent_words, lower(trim(event))) THEN 'not_sent'
         ELSE 'not_a_send_event' END AS verdict,
    CASE WHEN $provider = 'sendgrid' AND NOT regexp_matches(trim(msg_id), '^(filter|recvd-)')
         THEN split_part(trim(msg_id), '.', 1) ELSE mm_msgid(msg_id) END AS msg_id,
    NULL AS alt_id,
    msg_id AS provider_msg_id,
    mm_addr(recipient) AS recipient,
    mm_ts(sent_at) AS sent_at,
    nullif(trim(campaign), '') AS campaign, nullif(trim(step), '') AS step, nullif(trim(candidate), '') AS candidate
FROM provider_csv

-- name: provider_collapse
-- One row per (provider, message, recipient): any send wins over not-sent over other events;
-- rows without a message id borrow one from a row with the same alternate id (smtp-id, queue id).
WITH numbered AS (
    SELECT *, row_number() OVER () AS rid FROM provider_event_rows
), alternates AS (
    SELECT provider, alt_id, recipient, min(msg_id) AS alt_msg_id
    FROM numbered WHERE msg_id IS NOT NULL AND alt_id IS NOT NULL
    GROUP BY provider, alt_id, recipient
), keyed AS (
    SELECT r.*, coalesce(r.msg_id, a.alt_msg_id, r.alt_id) AS key_id,
        CASE r.verdict WHEN 'sent' THEN 0 WHEN 'not_sent' THEN 1 ELSE 2 END AS vrank
    FROM numbered AS r
    LEFT JOIN alternates AS a ON a.provider = r.provider AND a.alt_id = r.alt_id AND a.recipient = r.recipient
), grouped AS (
    SELECT *, CASE WHEN key_id IS NULL OR recipient IS NULL THEN 'row:' || rid ELSE key_id END AS gkey FROM keyed
), chosen AS (
    SELECT provider, source_file, source_line, event_type,
        CASE min(vrank) OVER g WHEN 0 THEN 'sent' WHEN 1 THEN 'not_sent' ELSE 'not_a_send_event' END AS verdict,
        key_id AS msg_id, provider_msg_id, recipient, sent_at,
        coalesce(campaign, max(campaign) OVER g) AS campaign,
        coalesce(step, max(step) OVER g) AS step,
        coalesce(candidate, max(candidate) OVER g) AS candidate,
        row_number() OVER (PARTITION BY provider, gkey, recipient
                           ORDER BY vrank, sent_at NULLS LAST, source_file, source_line) AS rn
    FROM grouped
    WINDOW g AS (PARTITION BY provider, gkey, recipient)
)
SELECT provider, source_file, source_line, event_type, verdict, msg_id, provider_msg_id, recipient,
       sent_at, campaign, step, candidate
FROM chosen WHERE rn = 1
ORDER BY sent_at NULLS LAST, provider, msg_id, recipient

-- name: provider_session_utc
-- Reader sessions compute and print times in UTC.
SET TimeZone = 'UTC'
