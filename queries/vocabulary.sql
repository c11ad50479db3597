-- The vocabulary of a case: the keys and values of a sample of each file's first records, from which the keys
-- the alias table does not know are read (forensics/ingest/vocabulary.py; docs/log-vocabulary.md#inference).

-- name: vocabulary_pairs
-- The sampled key/value pairs (one row per record and key; `rec` numbers a file's sampled lines), filled by the
-- vocabulary_sample_* blocks below.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE vocab_pairs (file_id INTEGER, rec BIGINT, key VARCHAR, value VARCHAR)

-- name: vocabulary_sample_logfmt
-- The key=value pairs of a logfmt sample (:text, a file's first lines): a quoted value is one value, unquoted.
-- dialect: duckdb
INSERT INTO vocab_pairs
WITH lines AS (
    SELECT :file_id AS file_id, row_number() OVER () AS rec, ' ' || rtrim(line, chr(13)) AS l
    FROM (SELECT unnest(string_split(:text, chr(10))) AS line)
), pairs AS (
    SELECT file_id, rec, unnest(regexp_extract_all(l, '\s([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)', 1)) AS key,
           unnest(regexp_extract_all(l, '\s([^\s="]+)=("(?:[^"\\]|\\.)*"|[^\s"]*)', 2)) AS value
    FROM lines WHERE contains(l, '=')
)
SELECT file_id, rec, key, nullif(mm_unquote(value), '') FROM pairs

-- name: vocabulary_sample_jsonl
-- The leaves of a JSON Lines sample (:text), as the dotted paths the JSON Lines reader reads (a key holding a
-- `.` or `"`, and what arrays hold, are left out, as there).
-- dialect: duckdb
INSERT INTO vocab_pairs
WITH lines AS (
    SELECT :file_id AS file_id, row_number() OVER () AS rec, rtrim(line, chr(13)) AS line
    FROM (SELECT unnest(string_split(:text, chr(10))) AS line)
), objects AS (
    SELECT * FROM lines WHERE starts_with(ltrim(line), '{') AND json_valid(line)
)
SELECT file_id, rec, replace(substr(t.fullkey, 3), '"', '') AS key,
       nullif(CASE WHEN t.type = 'VARCHAR' THEN t.value ->> '$' ELSE t.value::VARCHAR END, '') AS value
FROM objects, json_tree(objects.line) t
WHERE t.type NOT IN ('OBJECT', 'ARRAY', 'NULL') AND NOT contains(t.fullkey, '[')
  AND NOT regexp_matches(t.fullkey, '"[^"]*[."\\][^"]*"')

-- name: vocabulary_sample_csv
-- The cells of a CSV sample (:text) under the header's names (:keys; the header is line :header_line).
-- dialect: duckdb
INSERT INTO vocab_pairs
WITH lines AS (
    SELECT :file_id AS file_id, row_number() OVER () AS rec, rtrim(line, chr(13)) AS line
    FROM (SELECT unnest(string_split(:text, chr(10))) AS line)
), cells AS (
    SELECT file_id, rec,
           list_transform(regexp_extract_all(',' || line, ',("(?:[^"]|"")*"|[^,]*)', 1),
                          lambda c: nullif(CASE WHEN c LIKE '"%"' AND length(c) >= 2
                                                THEN replace(c[2:-2], '""', '"') ELSE c END, '')) AS vals
    FROM lines WHERE rec > :header_line
)
SELECT file_id, rec, unnest(:keys::VARCHAR[]) AS key, unnest(vals) AS value
FROM cells WHERE len(vals) = len(:keys::VARCHAR[])

-- name: vocabulary_key_stats
-- Per sampled key: the records carrying it, its distinct values, the share of its values that are addresses
-- (:address, a bare address or `Name <address>`), RFC 5322 message ids (`<…@…>`), times, small integers, and
-- its first three distinct values (in the sample's order).
-- dialect: duckdb
WITH valued AS (
    SELECT * FROM vocab_pairs WHERE value IS NOT NULL
), firsts AS (
    SELECT key, value, min(file_id::BIGINT * 1000000000 + rec) AS first FROM valued GROUP BY key, value
), examples AS (
    SELECT key, list(value ORDER BY first)[1:3] AS examples FROM firsts GROUP BY key
)
SELECT v.key, count(*) AS records, count(DISTINCT v.value) AS distinct_values,
       avg((regexp_full_match(trim(v.value), :address)
            OR regexp_full_match(trim(v.value), '.*[^\s<].*<' || :address || '>'))::INTEGER) AS address_share,
       avg(regexp_full_match(trim(v.value), '<[^<>\s@]+@[^<>\s@]+>')::INTEGER) AS message_id_share,
       avg((mm_ts(v.value) IS NOT NULL AND NOT regexp_full_match(trim(v.value), '[0-9]{1,8}'))::INTEGER) AS time_share,
       avg(regexp_full_match(trim(v.value), '[0-9]{1,3}')::INTEGER) AS small_int_share,
       any_value(e.examples) AS examples
FROM valued v JOIN examples e USING (key)
GROUP BY v.key
ORDER BY records DESC, v.key

-- name: vocabulary_sampled_records
-- How many records were sampled (lines that gave at least one key).
-- dialect: duckdb
SELECT count(*) AS records FROM (SELECT DISTINCT file_id, rec FROM vocab_pairs)

-- name: vocabulary_event_values
-- Per value of the event keys (:event_keys, case-folded as mm_event reads it, shown in its commonest spelling): the
-- sampled records holding it, and how many also carry a recipient address and a message id. What a send event is
-- inferred from.
-- dialect: duckdb
WITH carrying AS (
    SELECT file_id, rec,
           bool_or(list_contains(:recipient_keys::VARCHAR[], key) AND contains(value, '@')) AS has_recipient,
           bool_or(list_contains(:msg_id_keys::VARCHAR[], key)) AS has_msg_id
    FROM vocab_pairs WHERE value IS NOT NULL GROUP BY file_id, rec
)
SELECT p.key, mode(trim(p.value)) AS value, count(*) AS records,
       count(*) FILTER (WHERE c.has_recipient AND c.has_msg_id) AS with_both
FROM vocab_pairs p JOIN carrying c USING (file_id, rec)
WHERE list_contains(:event_keys::VARCHAR[], p.key) AND p.value IS NOT NULL
GROUP BY p.key, lower(trim(p.value))
ORDER BY with_both DESC, records DESC, value

-- name: vocabulary_keys_on_sends
-- The keys of the sampled records that carry a recipient (:recipient_keys) and a message id (:msg_id_keys): how
-- many such records hold each, its distinct values, its share of small integers, and how many people's sends
-- hold two values of it (where a step or campaign the vocabulary does not name may hide).
-- dialect: duckdb
WITH sends AS (
    SELECT file_id, rec, min(lower(trim(value))) FILTER (WHERE list_contains(:recipient_keys::VARCHAR[], key)
                                                          AND contains(value, '@')) AS person
    FROM vocab_pairs WHERE value IS NOT NULL GROUP BY file_id, rec
    HAVING bool_or(list_contains(:recipient_keys::VARCHAR[], key) AND contains(value, '@'))
       AND bool_or(list_contains(:msg_id_keys::VARCHAR[], key))
), varying AS (
    SELECT key, count(*) FILTER (WHERE n > 1) AS people
    FROM (SELECT p.key, s.person, count(DISTINCT p.value) AS n
          FROM vocab_pairs p JOIN sends s USING (file_id, rec) WHERE p.value IS NOT NULL GROUP BY p.key, s.person)
    GROUP BY key
)
SELECT p.key, count(*) AS records, count(DISTINCT p.value) AS distinct_values,
       avg(regexp_full_match(trim(p.value), '[0-9]{1,3}')::INTEGER) AS small_int_share,
       any_value(v.people) AS varies_per_person
FROM vocab_pairs p JOIN sends USING (file_id, rec) JOIN varying v USING (key)
WHERE p.value IS NOT NULL
GROUP BY p.key
ORDER BY p.key

-- name: unread_send_records
-- Records that look like a send but were not read as one (lost evidence): a successful send event without recipient
-- or message id, or a record with a recipient and a message id or sending word (:send_words) under an event that is
-- neither known nor a failure (:not_send), unless that send was read (logged before and after the call). Per file:
-- how many, and the first.
-- dialect: duckdb
WITH unread AS (  -- few rows: the check against the sends is made on them only
    SELECT source, line_no, msg_id, recipient, event = 'send' AS lacking
    FROM events
    WHERE (event = 'send' AND mm_ok_status(status) AND (msg_id IS NULL OR recipient IS NULL OR recipient = ''))
       OR (event NOT IN ('send', 'claim', 'renew', 'release', 'expire', 'start', 'error')
           AND NOT regexp_matches(event, :not_send) AND recipient IS NOT NULL AND recipient <> ''
           AND (msg_id IS NOT NULL OR regexp_matches(event, :send_words)))
)
SELECT source, count(*) AS lines, list(line_no ORDER BY line_no)[1:5] AS first_lines
FROM unread u
WHERE lacking OR NOT EXISTS (SELECT 1 FROM sends s WHERE s.msg_id = u.msg_id AND s.recipient = u.recipient)
GROUP BY source
ORDER BY source

-- name: any_send
-- Whether the case holds at least one real send (a run that read records and recognised none is refused).
-- dialect: duckdb
SELECT count(*) > 0 AS found FROM (SELECT 1 FROM sends LIMIT 1)

-- name: step_spellings
-- One step number written two ways among a campaign's sends (`1` by one worker, `step-1` or `Step 01` by another):
-- each spelling is a step of its own, so a person both sent is not seen as duplicated. Per campaign and number, the
-- spellings (at most 5 such steps).
-- dialect: duckdb
SELECT campaign, list(DISTINCT step ORDER BY step) AS steps
FROM (SELECT campaign, step,
             regexp_extract(lower(trim(step)), '^(?:step|touch|stage|s|#)?[\s_#:.-]*0*([0-9]+)$', 1) AS number
      FROM (SELECT DISTINCT campaign, step FROM sends WHERE step <> ''))  -- a few steps, however many sends
WHERE number <> ''
GROUP BY campaign, number
HAVING count(DISTINCT step) > 1
ORDER BY campaign, number
LIMIT 5
