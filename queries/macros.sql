-- Every DuckDB macro of mailmortem. queries.macros makes, once per reading connection, those it keeps for its
-- whole life (queries.MACROS: these and envelope_macros); named_events_macro is made by a load for its
-- vocabulary, send_ids by build_sends' callers (DuckDB binds a macro's tables when it is made).
-- A macro is expanded where it is used, so a time it reads is read in the session's zone at that moment.
-- The PostgreSQL twins of mm_address and mm_label are session functions (address_pg_function in addresses.sql,
-- label_pg_function in labels.sql), made by forensics.addresses.install_sql with these two DuckDB ones.

-- name: ingest_macros
-- Reading a line: timestamps, durations, event names, statuses, message ids, logfmt values, a file's lines and a
-- line's envelope; the session shows times in UTC. A time without a zone is read in the session's zone (UTC, or
-- --tz while files are read: set_time_zone). mm_ts casts an ISO text (it holds '-') at once and trims only a
-- text that does not cast (trim() decodes every character); epoch seconds and milliseconds are told apart by
-- their number of digits. A text ending in ':' is no time: DuckDB's cast of one ending in an offset and ':'
-- (`2026-11-28T10:40:47+01:00:`) reads past its end, and gives a time without the offset or NULL by what follows the
-- text in memory (a value cut from a longer line, or the next value of a column).
-- dialect: duckdb
SET TimeZone = 'UTC';
CREATE OR REPLACE TEMP MACRO mm_ts(t) AS CASE
    WHEN t IS NULL THEN NULL
    WHEN contains(t, '-') THEN CASE WHEN NOT ends_with(t, ':') THEN coalesce(TRY_CAST(t AS TIMESTAMPTZ),
                                    CASE WHEN NOT ends_with(trim(t), ':') THEN TRY_CAST(trim(t) AS TIMESTAMPTZ) END) END
    WHEN regexp_full_match(trim(t), '[0-9]{9,11}(\.[0-9]+)?') THEN to_timestamp(TRY_CAST(trim(t) AS DOUBLE))
    WHEN regexp_full_match(trim(t), '[0-9]{12,14}(\.[0-9]+)?') THEN to_timestamp(TRY_CAST(trim(t) AS DOUBLE) / 1000)
    WHEN NOT ends_with(trim(t), ':') THEN TRY_CAST(trim(t) AS TIMESTAMPTZ) END;
-- `1.5s`, `250ms`, `5m`, `2h`, or bare seconds, as seconds
CREATE OR REPLACE TEMP MACRO mm_seconds(v) AS
    TRY_CAST(regexp_extract(trim(v), '^([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?$', 1) AS DOUBLE)
    * CASE regexp_extract(lower(trim(v)), '^[0-9.]+\s*(ms|s|m|h)?$', 1)
        WHEN 'ms' THEN 0.001 WHEN 'm' THEN 60 WHEN 'h' THEN 3600 ELSE 1 END;
-- the canonical event of the common spellings; any other value lower-cased
CREATE OR REPLACE TEMP MACRO mm_known_event(e) AS CASE
    WHEN lower(trim(e)) IN ('send', 'sent', 'email_sent', 'send_ok', 'delivered_to_provider') THEN 'send'
    WHEN lower(trim(e)) IN ('claim', 'claimed', 'lease_acquired', 'acquire') THEN 'claim'
    WHEN lower(trim(e)) IN ('renew', 'lease_renew', 'heartbeat', 'extend') THEN 'renew'
    WHEN lower(trim(e)) IN ('release', 'released', 'batch_done', 'complete', 'ack') THEN 'release'
    WHEN lower(trim(e)) IN ('expire', 'lease_expired', 'expired') THEN 'expire'
    WHEN lower(trim(e)) IN ('start', 'worker_start', 'startup', 'boot', 'started') THEN 'start'
    WHEN lower(trim(e)) IN ('error', 'send_error', 'send_failed', 'exception') THEN 'error'
    ELSE lower(trim(e)) END;
-- the event a record's value is read as: the table above, until --event, [events] or inference name more
-- (named_events_macro replaces it for a load)
CREATE OR REPLACE TEMP MACRO mm_event(e) AS mm_known_event(e);
-- a blank line: empty or only Unicode space separators (what trim() takes off); a regex stops at the first other
-- character, where trim(line) = '' copies the whole line
CREATE OR REPLACE TEMP MACRO mm_blank(s) AS regexp_full_match(s, '\p{Zs}*');
CREATE OR REPLACE TEMP MACRO mm_ok_status(s) AS
    s IS NULL OR lower(trim(s)) IN ('sent', 'ok', 'success', 'accepted', 'queued', 'delivered');
-- a message id without its angle brackets; empty is NULL
CREATE OR REPLACE TEMP MACRO mm_msg_id(m) AS
    nullif(trim(CASE WHEN starts_with(trim(m), '<') AND ends_with(trim(m), '>') THEN trim(m)[2:-2] ELSE trim(m) END), '');
CREATE OR REPLACE TEMP MACRO mm_unquote(v) AS CASE
    WHEN v LIKE '"%"' AND length(v) >= 2 THEN replace(replace(v[2:-2], '\"', '"'), '\\', '\')
    ELSE v END;
-- Every physical line of a file (or of a list of files, in list order), with the file's name: DuckDB's parallel
-- CSV reader with a delimiter no log contains; blank lines come as NULL, and a table built from it keeps the
-- order (preserve_insertion_order). A longer line than forensics.ingest.repair.MAX_LINE_BYTES is never read
-- here (repair reads such a file from a copy): DuckDB refuses one, or may lose a line ending at a buffer's edge.
-- The buffer stays under the size up to which glibc's malloc reuses freed memory (larger ones are mapped and
-- faulted in afresh for every buffer), and the longest line at a quarter of it (the parallel reader refuses
-- buffers nearer the longest line).
CREATE OR REPLACE TEMP MACRO mm_named_lines(path, sep) AS TABLE
    SELECT filename, line
    FROM read_csv(path, delim = sep, quote = '', escape = '', header = false,
                  columns = {'line': 'VARCHAR'}, auto_detect = false, strict_mode = false,
                  null_padding = true, max_line_size = 8000000, buffer_size = 32000000, filename = true);
-- a line's envelope (`env`, see queries/envelopes.sql), as a type: a staged table created before it is filled
-- names it
CREATE OR REPLACE TEMP TYPE mm_envelope AS
    STRUCT(line_no BIGINT, ts TIMESTAMPTZ, stream VARCHAR, host VARCHAR, unit VARCHAR, container VARCHAR,
           pid VARCHAR, cut BOOLEAN);
-- the `env` of a line read from a file: none, typed
CREATE OR REPLACE TEMP MACRO mm_no_envelope() AS NULL::mm_envelope;
-- One piece of an envelope's view (queries/envelopes.sql), its columns in order, typed: a block names only what its
-- envelope gives (its text and time; a chain and whether it completes a line where the envelope splits lines; the
-- provenance it carries), the rest is a whole line's or NULL. Unpacked with unnest() in the block's SELECT list,
-- which DuckDB binds to the fields' own expressions: no struct is built per row.
CREATE OR REPLACE TEMP MACRO mm_piece(text, ts, chain := '', complete := true, stream := NULL, host := NULL,
                                      unit := NULL, container := NULL, pid := NULL) AS
    struct_pack(chain := chain::VARCHAR, text := text::VARCHAR, complete := complete::BOOLEAN,
                ts := ts::TIMESTAMPTZ, stream := stream::VARCHAR, host := host::VARCHAR, unit := unit::VARCHAR,
                container := container::VARCHAR, pid := pid::VARCHAR);
-- The worker an envelope names (docs/log-vocabulary.md, Worker and incarnation): its container (a container,
-- pod, Cloud Run instance or ECS task), else its unit on its host (`host/unit`: two units of one host are two
-- workers, one unit on two hosts two more), else whichever it names. A record's own worker key wins
-- (typed_columns).
CREATE OR REPLACE TEMP MACRO mm_env_worker(env) AS CASE
    WHEN env.container IS NOT NULL THEN env.container
    WHEN env.host IS NOT NULL AND env.unit IS NOT NULL THEN env.host || '/' || env.unit
    ELSE coalesce(env.host, env.unit) END;
-- a file's lines, without envelope (mm_unwrapped gives the lines inside one, with the same columns)
CREATE OR REPLACE TEMP MACRO mm_lines(path, sep) AS TABLE
    SELECT line, mm_no_envelope() AS env
    FROM mm_named_lines(path, sep)

-- name: named_events_macro
-- mm_event with the event values mapped by --event, [events] or inference: {lit:values} (a JSON list of
-- lower-case values) and {lit:canonicals} (the event each is read as) are literals, as a macro's body takes no
-- parameter; every other value is read as mm_known_event reads it.
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_event(e) AS coalesce(
    json_transform({lit:canonicals}, '["VARCHAR"]')[list_position(json_transform({lit:values}, '["VARCHAR"]'),
                                                                   lower(trim(e)))],
    mm_known_event(e))

-- name: send_ids
-- mm_send_id(src, line): a send known by its file and line as one integer, the number of its file (`send_files`,
-- numbered by name) above the line's 40 bits. A scalar subquery, which DuckDB turns into one join with send_files
-- and which fails rather than multiplies a row if a name were there twice. Made after build_sends.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE send_files AS
SELECT (row_number() OVER (ORDER BY source))::INTEGER AS file, source FROM (SELECT DISTINCT source FROM files);
CREATE OR REPLACE TEMP MACRO mm_send_id(src, line) AS
    ((SELECT f.file FROM send_files f WHERE f.source = src)::BIGINT << 40) + line

-- name: address_duckdb_macro
-- DuckDB: mm_address(x), an address's normal form (whitespace trimmed, display name and <> dropped, A-Z
-- lower-cased), the twin of forensics.addresses.normalize_address and of address_pg_function; the code points
-- trimmed are WHITESPACE_CODE_POINTS, in order (tests/test_addresses.py keeps the three equal).
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_address_ws() AS (
    chr(9) || chr(10) || chr(11) || chr(12) || chr(13) || chr(32) || chr(133) || chr(160) ||
    chr(5760) || chr(8192) || chr(8193) || chr(8194) || chr(8195) || chr(8196) || chr(8197) ||
    chr(8198) || chr(8199) || chr(8200) || chr(8201) || chr(8202) || chr(8203) || chr(8232) ||
    chr(8233) || chr(8239) || chr(8287) || chr(12288) || chr(65279)
);
CREATE OR REPLACE TEMP MACRO mm_address_unwrapped(t) AS (
    CASE WHEN ends_with(t, '>') AND regexp_matches(t, '<[^<]*>$')
         THEN trim(regexp_extract(t, '<([^<]*)>$', 1), mm_address_ws()) ELSE t END
);
CREATE OR REPLACE TEMP MACRO mm_address(x) AS (
    nullif(translate(mm_address_unwrapped(trim(x, mm_address_ws())), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), '')
)

-- name: label_duckdb_macro
-- DuckDB: mm_label(label_text), a label's normal form (NULL stays NULL): label_normal_form (labels.sql), the
-- body it shares with label_pg_function.
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_label(label_text) AS ({block:label_normal_form})

-- name: provider_macros
-- Reading provider exports (providers.sql): metadata paths, tolerant timestamps, subjects and templates as labels.
-- Each event is parsed once per provider: every field comes from one json_extract_string(e, [paths]) call,
-- whose paths are built from constants and bound parameters only, so DuckDB plans it once.
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_meta_paths(prefixes, keys, suffix) AS (
    flatten(list_transform(prefixes, lambda p: list_transform(keys,
        lambda k: p || '."' || replace(k, '"', '\"') || '"' || suffix)))
);
-- campaign, step and candidate paths under each prefix, in that order (see mm_meta_at)
CREATE OR REPLACE TEMP MACRO mm_meta_all(prefixes, suffix, ck, sk, kk) AS (
    mm_meta_paths(prefixes, ck, suffix) || mm_meta_paths(prefixes, sk, suffix) || mm_meta_paths(prefixes, kk, suffix)
);
-- the first non-empty value (NULL <> '' is NULL: dropped too)
CREATE OR REPLACE TEMP MACRO mm_first(l) AS (list_filter(l, lambda x: x <> '')[1]);
-- the first non-empty of n values from index lo; the list is filtered only when the first place is empty
CREATE OR REPLACE TEMP MACRO mm_first_in(v, lo, n) AS (
    CASE WHEN n > 0 THEN coalesce(nullif(v[lo], ''), mm_first(v[lo + 1 : lo + n - 1])) END
);
-- the first non-empty campaign, step and candidate of values extracted at mm_meta_all paths from index `base`
CREATE OR REPLACE TEMP MACRO mm_meta_at(v, base, nobj, ck, sk, kk) AS (
    struct_pack(
        campaign := mm_first_in(v, base, nobj * len(ck)),
        step := mm_first_in(v, base + nobj * len(ck), nobj * len(sk)),
        candidate := mm_first_in(v, base + nobj * (len(ck) + len(sk)), nobj * len(kk)))
);
CREATE OR REPLACE TEMP MACRO mm_some(l) AS (CASE WHEN len(l) > 0 THEN l END);
-- a subject or template as a grouping label: whitespace runs made one space, trimmed; empty is NULL
CREATE OR REPLACE TEMP MACRO mm_provider_label(x) AS (nullif(trim(regexp_replace(x, '\s+', ' ', 'g')), ''));
-- a provider's time: epoch seconds or milliseconds (told apart by size), else an ISO text cut to microseconds
CREATE OR REPLACE TEMP MACRO mm_provider_ts(x) AS (
    CASE
        WHEN x IS NULL OR trim(x) = '' THEN NULL
        WHEN regexp_full_match(trim(x), '-?[0-9]+(\.[0-9]+)?') THEN
            CASE WHEN abs(TRY_CAST(trim(x) AS DOUBLE)) >= 1e11
                 THEN to_timestamp(TRY_CAST(trim(x) AS DOUBLE) / 1000)
                 ELSE to_timestamp(TRY_CAST(trim(x) AS DOUBLE)) END
        ELSE TRY_CAST(regexp_replace(trim(x), '(\.[0-9]{6})[0-9]+', '\1') AS TIMESTAMPTZ)
    END
)

-- name: report_macros
-- The report's (report.sql): mm_lane(w, i), the timeline lane of a worker and incarnation.
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_lane(w, i) AS coalesce(w, '(no worker)') || coalesce(' · ' || i, '')
