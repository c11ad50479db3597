-- Send reservations (remediation/reservations.py): one durable row per key of a person about to be emailed a
-- (campaign, step), committed before the provider call. Unconfirmed (no msg_id, no matching sent_log row) counts as
-- sent: a send may have gone out. Blocks run on PostgreSQL and DuckDB alike but for the existence checks and the
-- key lock; names are compared in normal form ({twin:mm_label}).

-- name: reservation_create_table
-- The reservations: the primary key is what makes a second send for the same person impossible.
-- dialect: duckdb postgres
CREATE TABLE IF NOT EXISTS send_reservation (
    campaign     TEXT NOT NULL,
    step         TEXT NOT NULL,
    key_kind     TEXT NOT NULL,
    key_value    TEXT NOT NULL,
    reservation  TEXT NOT NULL,
    recipient    TEXT NOT NULL,
    candidate    TEXT,
    worker       TEXT,
    token        BIGINT,
    reserved_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    msg_id       TEXT,
    confirmed_at TIMESTAMPTZ,
    confirmed_by TEXT,
    PRIMARY KEY (campaign, step, key_kind, key_value)
)

-- name: reservation_create_index
-- Lookups by a person's key whatever the campaign (sentlog check without --step, requeue-stale).
-- dialect: duckdb postgres
CREATE INDEX IF NOT EXISTS send_reservation_key ON send_reservation (key_kind, key_value)

-- name: reservation_create_released
-- Every released reservation, kept: its rows as they were (send_reservation's columns), then when, by whom
-- and why it was released.
-- dialect: duckdb postgres
CREATE TABLE IF NOT EXISTS send_reservation_released AS
SELECT *, now() AS released_at, CAST(NULL AS TEXT) AS released_by, CAST(NULL AS TEXT) AS reason
FROM send_reservation
WHERE false

-- name: reservation_table_exists_pg
-- PostgreSQL: does send_reservation exist (on the search path)?
-- dialect: postgres
SELECT to_regclass('send_reservation') IS NOT NULL AS present

-- name: reservation_table_exists_duckdb
-- DuckDB: does send_reservation exist in the current schema?
-- dialect: duckdb
SELECT count(*) > 0 AS present FROM duckdb_tables() WHERE table_name = 'send_reservation' AND schema_name = current_schema()

-- name: reservation_labels
-- Every (campaign, step) that holds a reservation, confirmed or not: what a filter could have named.
-- dialect: duckdb postgres
SELECT DISTINCT campaign, step FROM send_reservation ORDER BY campaign, step

-- name: reservation_insert_key
-- Reserve one key of a send; returns a row only when the key was free (a taken key returns nothing, waits for nobody's commit but the holder's).
-- dialect: duckdb postgres
INSERT INTO send_reservation (campaign, step, key_kind, key_value, reservation, recipient, candidate, worker, token)
VALUES (:campaign, :step, :key_kind, :key_value, :reservation, :recipient, :candidate, :worker, :token)
ON CONFLICT DO NOTHING
RETURNING key_kind

-- name: reservation_withdraw_key
-- Give back one key this very reservation took a moment ago (another key of the person was taken).
-- dialect: duckdb postgres
DELETE FROM send_reservation
WHERE campaign = :campaign AND step = :step AND key_kind = :key_kind AND key_value = :key_value
  AND reservation = :reservation AND token = :token AND msg_id IS NULL

-- name: reservation_in_sent_log
-- Template: whether the sent-log holds reservation r's send (its campaign, its step or none, its address), spelled
-- as the reservation spells them for an index probe. A send recorded in another spelling leaves it unconfirmed,
-- which counts as sent, so releasing it stays safe.
-- dialect: duckdb postgres
EXISTS (SELECT 1 FROM sent_log AS s
        WHERE s.campaign = r.campaign AND (s.step = r.step OR s.step = '') AND s.recipient = r.recipient)

-- name: reservation_lock_key
-- PostgreSQL: wait for any other transaction reserving this key under a spelling of this campaign and step
-- (:lock_key, their normal forms), until it ends: the table's key compares spellings exactly.
-- dialect: postgres
SELECT pg_advisory_xact_lock(hashtextextended(:lock_key, 0))

-- name: reservation_holder
-- The oldest reservation that holds one key in any spelling of the campaign and step, and whether its send is
-- recorded (msg_id, or a matching sent_log row).
-- dialect: duckdb postgres
SELECT r.reservation, r.worker, r.reserved_at, r.msg_id,
       r.msg_id IS NOT NULL OR {block:reservation_in_sent_log} AS recorded
FROM send_reservation AS r
WHERE r.key_kind = :key_kind AND r.key_value = :key_value
  AND {twin:mm_label}(r.campaign) = :campaign_key AND {twin:mm_label}(r.step) = :step_key
ORDER BY r.reserved_at, r.reservation
LIMIT 1

-- name: reservation_confirm
-- After the send: stamp the provider's message id on our reservation's keys (ours = same reservation and token).
-- dialect: duckdb postgres
UPDATE send_reservation
SET msg_id = :msg_id, confirmed_at = now(), confirmed_by = 'sender'
WHERE campaign = :campaign AND step = :step AND reservation = :reservation AND token = :token
  AND (msg_id IS NULL OR msg_id = :msg_id)
RETURNING key_kind

-- name: reservation_for_address
-- The newest reservation of an address for a campaign (and step; NULL = any step), recorded or not.
-- dialect: duckdb postgres
SELECT r.campaign, r.step, r.recipient, r.candidate, r.worker, r.reserved_at, r.msg_id,
       r.msg_id IS NOT NULL OR {block:reservation_in_sent_log} AS recorded
FROM send_reservation AS r
WHERE r.key_kind = 'address' AND r.key_value = :recipient AND {twin:mm_label}(r.campaign) = :campaign_key
  AND (CAST(:step_key AS TEXT) IS NULL OR {twin:mm_label}(r.step) = :step_key)
ORDER BY r.reserved_at DESC
LIMIT 1

-- name: reservation_unconfirmed
-- Unconfirmed reservations (no msg_id, no matching sent_log row), one row per reservation, oldest first, of a
-- campaign and step compared in normal form (NULL = any).
-- dialect: duckdb postgres
SELECT r.campaign, r.step, r.recipient, r.candidate, r.reservation, r.worker, r.token, r.reserved_at
FROM send_reservation AS r
WHERE r.key_kind = 'address' AND r.msg_id IS NULL
  AND (CAST(:campaign_key AS TEXT) IS NULL OR {twin:mm_label}(r.campaign) = :campaign_key)
  AND (CAST(:step_key AS TEXT) IS NULL OR {twin:mm_label}(r.step) = :step_key)
  AND NOT {block:reservation_in_sent_log}
ORDER BY r.reserved_at, r.campaign, r.step, r.recipient

-- name: reservation_of_person
-- The reservations a person's release names: by address or candidate, in one campaign and step (compared in
-- normal form), each with its own campaign and step as stored.
-- dialect: duckdb postgres
SELECT DISTINCT r.campaign, r.step, r.reservation, r.recipient, r.candidate, r.worker, r.reserved_at,
       r.msg_id IS NOT NULL OR {block:reservation_in_sent_log} AS recorded
FROM send_reservation AS r
WHERE {twin:mm_label}(r.campaign) = :campaign_key AND {twin:mm_label}(r.step) = :step_key
  AND ((r.key_kind = 'address' AND r.key_value = :recipient) OR (r.key_kind = 'candidate' AND r.key_value = :candidate))
ORDER BY r.reserved_at

-- name: reservation_archive
-- Copy an unconfirmed reservation's keys to send_reservation_released, with who released it and why.
-- dialect: duckdb postgres
INSERT INTO send_reservation_released (campaign, step, key_kind, key_value, reservation, recipient, candidate, worker,
                                       token, reserved_at, released_at, released_by, reason)
SELECT campaign, step, key_kind, key_value, reservation, recipient, candidate, worker, token, reserved_at,
       now(), :released_by, :reason
FROM send_reservation
WHERE campaign = :campaign AND step = :step AND reservation = :reservation AND msg_id IS NULL

-- name: reservation_delete
-- Release an unconfirmed reservation (after reservation_archive, in the same transaction): its person may be emailed again.
-- dialect: duckdb postgres
DELETE FROM send_reservation
WHERE campaign = :campaign AND step = :step AND reservation = :reservation AND msg_id IS NULL
RETURNING key_kind

-- name: reservation_confirm_from_sent_log
-- After a backfill: an unconfirmed reservation whose send the sent-log now holds takes that send's message id.
-- dialect: duckdb postgres
UPDATE send_reservation AS r
SET msg_id = (
        SELECT min(s.msg_id) FROM sent_log AS s
        WHERE s.campaign = r.campaign AND (s.step = r.step OR s.step = '')
          AND (s.recipient = r.recipient OR (r.candidate IS NOT NULL AND s.candidate = r.candidate))
    ),
    confirmed_at = now(), confirmed_by = 'backfill'
WHERE r.msg_id IS NULL
  AND EXISTS (
      SELECT 1 FROM sent_log AS s
      WHERE s.campaign = r.campaign AND (s.step = r.step OR s.step = '')
        AND (s.recipient = r.recipient OR (r.candidate IS NOT NULL AND s.candidate = r.candidate))
  )
RETURNING r.key_kind

-- name: reservation_unsent_after_backfill
-- Unconfirmed reservations a backfill proves unsent: made before :covered_before (the export reaches past them by
-- the clock margin) and the sent-log holds no send to that person, of any campaign, since :margin before it.
-- dialect: duckdb postgres
SELECT r.campaign, r.step, r.reservation, r.recipient, r.candidate
FROM send_reservation AS r
WHERE r.key_kind = 'address' AND r.msg_id IS NULL AND r.reserved_at <= :covered_before
  AND NOT EXISTS (
      SELECT 1 FROM sent_log AS s
      WHERE (s.recipient = r.recipient OR (r.candidate IS NOT NULL AND s.candidate = r.candidate))
        AND (s.sent_at IS NULL OR s.sent_at >= r.reserved_at - CAST(:margin AS INTERVAL))
  )
ORDER BY r.campaign, r.step, r.recipient

-- name: reservation_candidate_addresses
-- Every address reserved for a candidate (any campaign), from its candidate key or its rows' candidate column.
-- dialect: duckdb postgres
SELECT DISTINCT recipient FROM send_reservation
WHERE (key_kind = 'candidate' AND key_value = :candidate) OR candidate = :candidate
ORDER BY recipient
