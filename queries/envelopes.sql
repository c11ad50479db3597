-- Envelopes: the wrappers a platform puts around an application's log line (Docker, CRI, journald, syslog,
-- Loki, Cloud Logging, CloudWatch, Datadog, Elastic, application prefixes), taken off inside DuckDB.
-- A file's entries are `pieces` (one per physical line, or per entry of a JSON document): the inner text, the
-- envelope's time and provenance, and whether the entry completes a line (Docker, CRI and journald split long
-- lines). Each envelope's block is a VIEW of them (its values literals: a view takes no parameters), which the
-- logfmt or JSON Lines parser of ingest.sql reads like a file's lines (`envelope_flat_lines`), each with its
-- envelope in `env` (see ingest_macros' mm_lines): the file is read once and nothing is written before the staged
-- table. Where an entry is not one whole line (a piece of a longer one, a multi-line message), the pieces are
-- written down and joined or split (`envelope_lines`, `envelope_joined_lines`) and the lines parsed again.
-- Every block reads its lines through {frag:lines}: a file (mm_lines) or the entries of a JSON document
-- (mm_entries). A line that is not an entry of its envelope is passed on whole, without envelope: nothing is
-- lost to a format the detection did not expect.
-- The entries, the written pieces and the joined lines are TEMP tables: they live for one file's read, and writing
-- them into a large case's database file (compressed, on disk) cost more than taking the envelope off.

-- name: envelope_macros
-- Helper macros: read the unwrapped lines or a document's entries as lines; times from epoch microseconds and
-- from syslog stamps without a year; journald's byte-array messages; the record inside an application's prefix.
-- dialect: duckdb
CREATE OR REPLACE TEMP MACRO mm_unwrapped(tbl, sep) AS TABLE SELECT line, env FROM query_table(tbl);
CREATE OR REPLACE TEMP MACRO mm_entries(tbl, sep) AS TABLE SELECT line FROM query_table(tbl);
CREATE OR REPLACE TEMP MACRO mm_epoch_us(us) AS
    TIMESTAMPTZ '1970-01-01 00:00:00+00' + to_microseconds(TRY_CAST(us AS BIGINT));
-- `Nov 28 09:21:26` in year y, or y - 1 when its month comes after month `last` (a log that crossed New Year),
-- read in the session's time zone (--tz). The month is looked up from the stamp's first three letters (strptime's
-- %d takes the padding of `Nov  3` itself), cheaper than collapsing the spaces and parsing the stamp twice, once for
-- its month. Where `last` is 12 no month comes after it and the lookup is not made.
CREATE OR REPLACE TEMP MACRO mm_syslog_ts(s, y, last) AS try_strptime(
    CAST(CASE WHEN last < 12 AND list_position(['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct',
                                                'Nov', 'Dec'], s[1:3]) > last
              THEN y - 1 ELSE y END AS VARCHAR) || ' ' || s, '%Y %b %d %H:%M:%S')::TIMESTAMPTZ;
CREATE OR REPLACE TEMP MACRO mm_bytes_text(b) AS coalesce(
    try(decode(from_hex(array_to_string(list_transform(b, lambda x: lpad(to_hex(x), 2, '0')), '')))),
    array_to_string(list_transform(b, lambda x: chr(x)), ''));
-- journald's MESSAGE: a string, an array of byte values (non-UTF-8 or control characters), or several values
CREATE OR REPLACE TEMP MACRO mm_journal_text(j) AS CASE
    WHEN json_type(j) <> 'ARRAY' THEN json_extract_string(j, '$')
    WHEN json_type(j, '$[0]') IN ('UBIGINT', 'BIGINT') THEN mm_bytes_text(TRY_CAST(j AS INTEGER[]))
    ELSE json_extract_string(j, '$[0]') END;
-- a text that starts a JSON object after any spaces ltrim() would take off (Unicode's space separators); a regex,
-- not starts_with(ltrim(s), '{'), which copied every text
CREATE OR REPLACE TEMP MACRO mm_starts_object(s) AS regexp_matches(s, '^\p{Zs}*\{');
-- whether the keys of a JSON object (json_keys) hold one among `send` (comma-separated, lower case:
-- envelopes.SEND_KEYS), in any case: then it is a send record itself, not an envelope's entry (Fluent Bit's Merge_Log
-- keeps Docker's log, stream and time beside the fields it parsed out of log). Keys that are all among `own` (the
-- envelope's) hold none: only other keys are lower-cased, a list lambda on every line costing more than its parse.
CREATE OR REPLACE TEMP MACRO mm_carries_send(keys, own, send) AS CASE
    WHEN list_has_all(own, keys) THEN false
    ELSE list_has_any(list_transform(keys, lambda k: lower(k)), string_split(send, ',')) END;
-- a text holding a key=value pair with a value
CREATE OR REPLACE TEMP MACRO mm_holds_pair(s) AS regexp_matches(s, '(?:^|\s)[^\s="]+=[^\s]');
-- a message that is itself a record (a JSON object or key=value pairs) rather than prose. A CASE, not an OR: where the
-- test is a value (an argument, a column) rather than a CASE's condition, DuckDB evaluates both sides of an OR on
-- every row, and the pairs' regex over a JSON object's text costs far more than the test for its brace.
CREATE OR REPLACE TEMP MACRO mm_record_like(m) AS CASE WHEN mm_starts_object(m) THEN true ELSE mm_holds_pair(m) END;
-- `head` (a prefix of `line`) when it is the whole header of `line`: followed by a space or by the line's end ('' otherwise,
-- a header run into the text: no entry of the envelope). Compared as bytes: length() and substring() count characters,
-- decoding every code point of the line.
CREATE OR REPLACE TEMP MACRO mm_spaced_head(line, head) AS
    CASE WHEN line = head OR starts_with(line, head || ' ') THEN head ELSE '' END;
-- The text of `s` after its first `bytes` bytes (a header found by a regex, whose length strlen() gives in bytes): cut
-- as a BLOB, as mm_json_tail cuts. substring() counts characters, decoding every code point of the line. The cut falls between characters: the header is a regex's match, a space after it ASCII.
CREATE OR REPLACE TEMP MACRO mm_after(s, bytes) AS decode(encode(s)[bytes + 1:]);
-- The text of `s` without its last `bytes` bytes (a line's ending), cut as mm_after cuts.
CREATE OR REPLACE TEMP MACRO mm_before(s, bytes) AS decode(encode(s)[1 : strlen(s) - bytes]);
-- The text from the first '{' of `s` on ('' when it holds none): the JSON object an application's prefix may end
-- with (mm_json_object tells). A block computes it once, in a column of its own, from a column: a macro's argument
-- is copied wherever the macro uses it. The text is cut by bytes, at the length of what precedes the brace
-- (split_part finds it by a byte search): substring() counts characters, decoding every code point of the line. A brace
-- right after '=', behind other key=value pairs, opens a pair's value (`event=send … meta={"k":1}`), not a record:
-- the tail is then '' (mm_value_brace, asked only of a line holding '={'), and the pairs are the record.
CREATE OR REPLACE TEMP MACRO mm_value_brace(head) AS ends_with(head, '=') AND mm_holds_pair(head);
CREATE OR REPLACE TEMP MACRO mm_json_tail(s) AS CASE
    WHEN contains(s, '={') AND mm_value_brace(split_part(s, '{', 1)) THEN ''
    ELSE decode(encode(s)[strlen(split_part(s, '{', 1)) + 1:]) END;
-- Whether `tail` (mm_json_tail) is the JSON object an application's prefix ends with: it ends with '}' (perhaps
-- before spaces) and parses. (ends_with before rtrim: trimming every line cost as much as the parse.) A block
-- computes it once, in a column `object` of its own, before the key=value reading, which then runs only on the
-- lines whose tail is no object. Where every record inside is JSON (`json_only` 1: envelopes.stage knows it from
-- the inner lines' sample), a tail shaped like an object is taken without json_valid: the JSON parser after the
-- envelope parses it anyway and calls it invalid JSON if it is (json_valid here was a second parse of each
-- record); the key=value reading of that line would have been invalid JSON too.
CREATE OR REPLACE TEMP MACRO mm_json_object(tail, json_only) AS CASE
    WHEN starts_with(tail, '{') AND (ends_with(tail, '}') OR ends_with(rtrim(tail), '}'))
        THEN CASE WHEN json_only = 1 THEN true ELSE json_valid(tail) END
    ELSE false END;
-- The key (`name=`) that ends at the first '=' of `rest`, when one does: the text from the last whitespace
-- before that '=' (or from the start) holds no quote and is not empty; '' otherwise. A block computes it once, in a
-- column `key` of its own, for mm_pairs.
CREATE OR REPLACE TEMP MACRO mm_first_key(rest) AS
    ltrim(regexp_extract(substring(rest, 1, strpos(rest, '=')), '(?:^|\s)[^\s="]+=$'), ' ' || chr(9) || chr(10) || chr(12) || chr(13));
-- `rest` from the bare ISO time that `head` (the text before the key) ends with, when it does (the time, then
-- whitespace), else from the key on: cut by bytes (mm_after), `head` being the start of `rest`.
CREATE OR REPLACE TEMP MACRO mm_from_key(rest, head) AS mm_after(rest, strlen(head) - strlen(ltrim(
    regexp_extract(head, '(?:^|\s)[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?\s+$'),
    ' ' || chr(9) || chr(10) || chr(12) || chr(13))));
-- The record in what follows an application's prefix (time, level, logger, free text: `rest`) when that ends with no
-- JSON object (mm_json_object): its key=value pairs from the first one on (with a bare ISO time just before them),
-- else all of it: the prefix up to them is dropped. That is the regexp_replace below; it costs more than
-- finding the first key (`key`, mm_first_key of `rest`) and the time before it does, so it runs only where no key
-- ends at the first '=' (a key can only start before the first '=' or after it, so where one ends there it is the
-- first). `rest` is the rest of one line, which never holds a newline.
CREATE OR REPLACE TEMP MACRO mm_pairs(rest, key) AS CASE
    WHEN key <> '' THEN mm_from_key(rest, substring(rest, 1, strpos(rest, '=') - length(key)))
    ELSE regexp_replace(
        rest, '^(?:.*?\s)??((?:[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?\s+)?[^\s="]+=)', '\1') END

-- name: envelope_document_entries
-- The entries of JSON documents (`gcloud logging read --format=json`'s array, `aws logs` pages, an
-- Elasticsearch response, or one entry per line), one per row in order: an array's elements, else the list at
-- :items (e.g. $.events), else the document itself. Each is one line of compact JSON. A top-level array is
-- read element by element; one document (a page of events, say) may be up to 128 MiB.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE {ident:entries} AS
SELECT json(unnest(CASE WHEN json_type(json) = 'ARRAY' THEN json_extract(json, '$[*]')
                        WHEN :items <> '$' AND json_exists(json, :items) THEN json_extract(json, :items || '[*]')
                        ELSE [json] END))::VARCHAR AS line
FROM read_json_objects(:path, format := 'auto', maximum_object_size := 134217728)

-- name: envelope_value_entries
-- The entries of JSON documents DuckDB found malformed JSON in, from their values read one by one
-- (forensics.ingest.documents.values_of: {ident:values}, a `value` per row in order, each a JSON value that parsed
-- or a line of what did not): a value's entries are taken as envelope_document_entries takes them, and a row that is
-- no JSON is an entry of its own (the envelope's block passes it on whole).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE {ident:entries} AS
SELECT unnest(CASE WHEN NOT json_valid(value) THEN [value]
                   WHEN json_type(value) = 'ARRAY' THEN list_transform(json_extract(value, '$[*]'), lambda e: json(e)::VARCHAR)
                   WHEN :items <> '$' AND json_exists(value, :items)
                       THEN list_transform(json_extract(value, :items || '[*]'), lambda e: json(e)::VARCHAR)
                   ELSE [json(value)::VARCHAR] END) AS line
FROM {ident:values}

-- name: envelope_headers
-- Template: each line (or document entry) of an envelope whose entries open with a header, and that header, `head`:
-- the match of {lit:head} (its envelope's row in forensics/ingest/envelope_table.py), '' on a line that is no entry.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
entries AS (
    SELECT line, regexp_extract(line, {lit:head}) AS head
    FROM {frag:lines}({lit:path}, {lit:delim})
)

-- name: envelope_header_fields
-- Template: envelope_headers, and the header's fields in `m`, read from the short header alone: the groups of
-- {lit:fields}, named by {lit:names} (comma-separated). The line is the rest after the header.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
{block:envelope_headers}, parts AS (
    SELECT line, head, regexp_extract(head, {lit:fields}, string_split({lit:names}, ',')) AS m FROM entries
)

-- name: envelope_docker_json
-- Docker's json-file driver: {"log": "...\n", "stream": "stdout", "time": RFC 3339, "attrs": {"tag": ...}}.
-- A `log` without its newline is a piece of a line longer than 16 KiB (or the end of an unfinished one); the
-- container is attrs.tag, else {lit:container} (from the file's path). A line that also holds a send key of its own
-- ({lit:send_keys}, mm_carries_send: Fluent Bit's Merge_Log) is no entry: it is the record, passed on whole. Its keys
-- are looked at only where the line is otherwise an entry (json_keys parses the line again), once, in a column; a
-- line with as many keys as the Docker keys found in it (log, stream and time, and attrs where its tag is) holds
-- those alone, and its keys are not searched (list_has_all on every line cost two thirds of what json_keys did).
-- The line ending of a log holding one newline, at its end, is cut by split_part (a byte search for the newline,
-- and the bytes before it); any other by characters (substring, length: counting the characters of every log cost
-- as much as json_keys). log is a decoded JSON string, and mm_before's round trip through a BLOB validated every
-- log's UTF-8 again.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    SELECT line,
           CASE WHEN starts_with(line, '{')
                THEN try(json_extract_string(line, ['$.log', '$.stream', '$.time', '$.attrs.tag'])) END AS v
    FROM {frag:lines}({lit:path}, {lit:delim})
), keyed AS (
    SELECT line, v, CASE WHEN v[3] IS NOT NULL THEN json_keys(line) END AS keys FROM entries
), read AS (
    SELECT line, CASE WHEN v[3] IS NULL THEN NULL
                      WHEN v[1] IS NOT NULL AND v[2] IS NOT NULL AND len(keys) = CASE WHEN v[4] IS NULL THEN 3 ELSE 4 END
                          THEN v
                      WHEN mm_carries_send(keys, ['log', 'stream', 'time', 'attrs'], {lit:send_keys}) THEN NULL
                      ELSE v END AS v
    FROM keyed
), cut AS (
    -- log up to its first newline: all of log but its last byte where that newline is the only one and ends it
    SELECT line, v, split_part(v[1], chr(10), 1) AS head FROM read
)
SELECT unnest(mm_piece(
    CASE WHEN v IS NULL THEN line
         WHEN strlen(head) = strlen(v[1]) - 1 AND NOT ends_with(head, chr(13)) THEN head
         WHEN ends_with(v[1], chr(13) || chr(10)) THEN substring(v[1], 1, length(v[1]) - 2)
         WHEN ends_with(v[1], chr(10)) THEN substring(v[1], 1, length(v[1]) - 1) ELSE coalesce(v[1], '') END,
    mm_ts(v[3]), chain := coalesce(v[2], ''), complete := v IS NULL OR v[1] IS NULL OR ends_with(v[1], chr(10)),
    stream := v[2], container := CASE WHEN v IS NOT NULL THEN coalesce(v[4], {lit:container}::VARCHAR) END))
FROM cut

-- name: envelope_cri
-- Kubernetes / containerd / CRI-O log files: `<RFC 3339> <stdout|stderr> <F|P>[:tags] <line>`; P is a piece of a
-- longer line, joined up to the next F of the same stream; a line without the tag (older runtimes) is a whole one.
-- Pod ({lit:container}) and container ({lit:unit}) come from the file's path.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_header_fields}
SELECT unnest(mm_piece(CASE WHEN m.stream = '' THEN line ELSE mm_after(line, strlen(head)) END, mm_ts(nullif(m.ts, '')),
    chain := coalesce(m.stream, ''), complete := coalesce(m.tag, '') <> 'P', stream := nullif(m.stream, ''),
    unit := CASE WHEN m.stream <> '' THEN {lit:unit}::VARCHAR END,
    container := CASE WHEN m.stream <> '' THEN {lit:container}::VARCHAR END))
FROM parts

-- name: envelope_journald
-- `journalctl -o json` (or json-seq, each entry after an RS byte): MESSAGE (a string or an array of bytes),
-- __REALTIME_TIMESTAMP in microseconds (else _SOURCE_REALTIME_TIMESTAMP, an entry whose shipper kept only the
-- source's time), _HOSTNAME, _SYSTEMD_UNIT or SYSLOG_IDENTIFIER, _PID, CONTAINER_NAME.
-- An entry cut at journald's LineMax (_LINE_BREAK=line-max) or a partial container line is joined with the
-- next of its stream (_STREAM_ID); one the stream ended before its newline (_LINE_BREAK=eof) is unfinished.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    -- only json-seq entries start with RS: trimming every line would copy each one
    SELECT CASE WHEN starts_with(line, chr(30)) THEN ltrim(line, chr(30)) ELSE line END AS line
    FROM {frag:lines}({lit:path}, {lit:delim})
), read AS (
    -- one parse per entry: a line that is not JSON fails the extraction (NULL), as json_valid would have said
    SELECT line, CASE WHEN starts_with(line, '{') THEN try(json_extract_string(line, [
               '$.MESSAGE', '$.__REALTIME_TIMESTAMP', '$._HOSTNAME', '$._SYSTEMD_UNIT', '$.SYSLOG_IDENTIFIER',
               '$._PID', '$.CONTAINER_NAME', '$._STREAM_ID', '$._LINE_BREAK', '$.CONTAINER_PARTIAL_MESSAGE'])) END AS v
    FROM entries
), stamped AS (
    -- the source's time by a second parse, only of an entry without __REALTIME_TIMESTAMP (a path costs every line)
    SELECT line, v, CASE WHEN v[2] IS NOT NULL THEN v[2]
                         WHEN v IS NOT NULL THEN json_extract_string(line, '$._SOURCE_REALTIME_TIMESTAMP') END AS us
    FROM read
)
SELECT unnest(mm_piece(
    CASE WHEN us IS NULL THEN line
         WHEN starts_with(v[1], '[') THEN mm_journal_text(json_extract(line, '$.MESSAGE')) ELSE v[1] END,
    mm_epoch_us(us), chain := coalesce(v[8], ''),
    complete := NOT coalesce(v[9] IN ('line-max', 'eof') OR v[10] = 'true', false),
    host := v[3], unit := coalesce(v[4], v[5]), container := v[7], pid := v[6]))
FROM stamped

-- name: envelope_syslog
-- Syslog files, `[<PRI>]STAMP host tag[pid]: message`: traditional syslog and RFC 3164 ({lit:pri} the optional
-- `<PRI>`, a stamp `Mmm dd hh:mm:ss` without a year or zone: {lit:year_less} = 1, its year {lit:year} or {lit:year} - 1 for
-- a month after {lit:last_month}, read in the session's zone, --tz) and rsyslog's high-precision file format
-- (RSYSLOG_FileFormat: an RFC 3339 stamp; with the `<PRI>` before it, RSYSLOG_ForwardFormat: RFC 3164 with an ISO time). {lit:stamp} is the stamp's regex. The header is matched
-- alone and the message taken as the rest of the line (capturing the long tail cost more than the unwrapping should).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_header_fields}
SELECT unnest(mm_piece(CASE WHEN m.stamp = '' THEN line ELSE mm_after(line, strlen(head)) END,
    CASE WHEN m.stamp = '' THEN NULL WHEN {lit:year_less} = 1 THEN mm_syslog_ts(m.stamp, {lit:year}, {lit:last_month})
         ELSE mm_ts(m.stamp) END,
    host := nullif(m.host, ''), unit := nullif(m.tag, ''), pid := nullif(m.pid, '')))
FROM parts

-- name: envelope_rfc5424
-- RFC 5424: `<PRI>1 TIMESTAMP HOST APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]`, `-` for a nil value; a UTF-8
-- byte-order mark before MSG is dropped.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_headers}, parts AS (
    -- the fields from the header alone (one followed by neither a space nor the end is no entry: f is NULL), the
    -- message as the rest after that space. The header's first six fields are single-space separated and hold no
    -- whitespace: split at its spaces, f is [<PRI>1, TIMESTAMP, HOST, APP-NAME, PROCID, …] (capturing them with
    -- a regex cost as much as the rest of the block)
    SELECT line, head, CASE WHEN mm_spaced_head(line, head) <> '' THEN string_split(head, ' ') END AS f
    FROM entries
), texts AS (
    -- cut only after a whole header (f): elsewhere the byte after an empty head may be inside a character
    SELECT *, CASE WHEN f IS NOT NULL THEN mm_after(line, strlen(head) + 1) END AS rest FROM parts
)
SELECT unnest(mm_piece(
    CASE WHEN f IS NULL THEN line WHEN starts_with(rest, chr(65279)) THEN ltrim(rest, chr(65279)) ELSE rest END,
    CASE WHEN f[2] <> '-' THEN mm_ts(f[2]) END,
    host := nullif(f[3], '-'), unit := nullif(f[4], '-'), pid := nullif(f[5], '-')))
FROM texts

-- name: envelope_timestamped
-- A time, a space, the line: `docker logs --timestamps` / `kubectl logs --timestamps` (RFC 3339, 9 digits) and
-- CloudWatch's export to S3 (milliseconds). A line without the time continues a multi-line message.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    -- only the stamp is captured: the line is the rest after its space
    SELECT line,
           regexp_extract(line, '^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})) ', 1) AS stamp
    FROM {frag:lines}({lit:path}, {lit:delim})
)
SELECT unnest(mm_piece(CASE WHEN stamp = '' THEN line ELSE mm_after(line, strlen(stamp) + 1) END, mm_ts(nullif(stamp, '')),
    container := CASE WHEN stamp <> '' THEN {lit:container}::VARCHAR END))
FROM entries

-- name: envelope_compose
-- `docker compose logs` (and docker-compose's): `<service-n> <padding>| <line>`, with `-t` `<service-n> <padding>|
-- <RFC 3339> <line>`. The prefix's name is the container that sent the line. Only the header is matched; the line is
-- the rest after it (a time run into the text is text). forensics/_unwrap.c's compose_line reads the same.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_header_fields}
SELECT unnest(mm_piece(CASE WHEN head = '' THEN line ELSE mm_after(line, strlen(head)) END, mm_ts(nullif(m.stamp, '')),
    container := nullif(m.service, '')))
FROM parts

-- name: envelope_python_logging
-- Python logging with %(asctime)s first: `2026-11-28 09:21:26,123 LEVEL name: message`, local time without a
-- zone (the session's, --tz); the record is the message's JSON object or key=value pairs. Only the stamp is
-- matched; the rest is the line after it (a line holds no newline: extracting the tail as a group cost more
-- than the whole unwrapping should). The stamp is cast directly: it is an ISO time, never an epoch (mm_ts).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    SELECT line,
           regexp_extract(line, '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}') AS stamp
    FROM {frag:lines}({lit:path}, {lit:delim})
), tails AS (
    -- the stamp holds no brace and the prefix trim takes none: the line's JSON tail is its rest's
    SELECT *, mm_json_tail(line) AS tail FROM entries
), objects AS (
    SELECT *, CASE WHEN stamp = '' THEN false ELSE mm_json_object(tail, {lit:json_only}) END AS object FROM tails
), rests AS (
    -- the key=value reading's text, only where the line ends with no JSON object
    SELECT *, CASE WHEN stamp <> '' AND NOT object THEN ltrim(mm_after(line, strlen(stamp)), ' :-') END AS rest
    FROM objects
), keys AS (
    SELECT *, mm_first_key(rest) AS key FROM rests
)
SELECT unnest(mm_piece(CASE WHEN stamp = '' THEN line WHEN object THEN tail ELSE mm_pairs(rest, key) END,
                      TRY_CAST(replace(nullif(stamp, ''), ',', '.') AS TIMESTAMPTZ)))
FROM keys

-- name: envelope_console
-- Console formats whose header is a time and a level, the record after it: structlog's ConsoleRenderer
-- (`2026-11-28 09:21:26 [info     ] event   key=value …`, local time unless the stamp has a zone) and zap's console
-- encoder (tab-separated time, level, [logger, caller,] message, then the context as one JSON object). {lit:head}
-- matches the header alone and {lit:stamp} takes its time from it (group 1): the rest is the line after it, and the
-- record the rest's trailing JSON object (mm_json_object), else its key=value pairs (mm_pairs).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_headers}, parts AS (
    SELECT line, head, regexp_extract(head, {lit:stamp}, 1) AS stamp FROM entries
), tails AS (
    -- the rest's JSON tail is the line's where the header holds no brace (it never does but for a zap time that is
    -- none): the rest itself is cut from the line only where the key=value reading needs it (see mm_json_tail)
    SELECT *, CASE WHEN contains(head, '{') THEN mm_json_tail(mm_after(line, strlen(head)))
                   ELSE mm_json_tail(line) END AS tail
    FROM parts
), objects AS (
    SELECT *, CASE WHEN stamp = '' THEN false ELSE mm_json_object(tail, {lit:json_only}) END AS object FROM tails
), rests AS (
    SELECT *, CASE WHEN stamp <> '' AND NOT object THEN mm_after(line, strlen(head)) END AS rest FROM objects
), keys AS (
    -- the first key, only where the rest ends with no JSON object
    SELECT *, mm_first_key(rest) AS key FROM rests
)
SELECT unnest(mm_piece(CASE WHEN stamp = '' THEN line WHEN object THEN tail ELSE mm_pairs(rest, key) END,
                      mm_ts(nullif(stamp, ''))))
FROM keys

-- name: envelope_slog
-- Go log/slog's TextHandler (`time=… level=… [source=…] msg=… key=value …`) and logrus's TextFormatter
-- (`time="…" level=… msg="…" key=value …`): the record is the pairs after msg.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH {block:envelope_headers}, parts AS (
    -- the header is matched alone and its time taken from it: the record is the line after it
    SELECT line, regexp_extract(head, {lit:stamp}, 1) AS stamp, mm_after(line, strlen(head)) AS rest FROM entries
)
SELECT unnest(mm_piece(CASE WHEN stamp = '' THEN line ELSE rest END, mm_ts(mm_unquote(nullif(stamp, '')))))
FROM parts

-- name: envelope_loki
-- Grafana Loki's `logcli query --output=jsonl`: {"labels": {...}, "line": "...", "timestamp": RFC 3339}; the
-- labels give the stream, host, pod or container, and app, service or job.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    SELECT line,
           CASE WHEN starts_with(line, '{') THEN try(json_extract_string(line, [
               '$.line', '$.timestamp', '$.labels.stream', '$.labels.host', '$.labels.hostname', '$.labels.instance',
               '$.labels.node_name', '$.labels.pod', '$.labels.container', '$.labels.container_name', '$.labels.unit',
               '$.labels.service_name', '$.labels.app', '$.labels.job'])) END AS v
    FROM {frag:lines}({lit:path}, {lit:delim})
), read AS (
    SELECT line, CASE WHEN v[1] IS NOT NULL AND v[2] IS NOT NULL THEN v END AS v FROM entries
)
SELECT unnest(mm_piece(CASE WHEN v IS NULL THEN line ELSE v[1] END, mm_ts(v[2]), stream := v[3],
    host := coalesce(v[4], v[5], v[6], v[7]), unit := coalesce(v[11], v[12], v[13], v[14]),
    container := coalesce(v[8], v[9], v[10])))
FROM read

-- name: envelope_cloud_logging
-- Google Cloud Logging LogEntries (a sink's file, one per line, or gcloud's JSON array through
-- envelope_document_entries): textPayload, or jsonPayload as a JSON record; timestamp (else receiveTimestamp); the
-- stream from the log name (…/logs/stdout); host and service from the resource's labels; as container the most
-- specific sender named: the pod (resource.labels.pod_name), a Cloud Run instance (labels.instanceId), a legacy GKE
-- entry's pod (its label, or pod_id), else the container name. A line is an entry when it names a log (logName)
-- or has an insertId.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    -- jsonPayload, an object, is rendered as text (v[12]); a textPayload entry has none, and its lookup finds none
    -- (looking for its key in the line first cost more than the lookup). receiveTimestamp (the time where an entry
    -- has no timestamp) and insertId (an entry without a log name) are read by a second parse of the lines that need
    -- them: a JSONPath costs every line its lookup.
    SELECT line,
           CASE WHEN starts_with(line, '{') THEN try(json_extract_string(line, [
               '$.textPayload', '$.timestamp', '$.logName', '$.labels."compute.googleapis.com/resource_name"',
               '$.resource.labels.node_name', '$.resource.labels.instance_id', '$.resource.labels.pod_name',
               '$.resource.labels.container_name', '$.resource.labels.service_name', '$.resource.labels.job_name',
               '$.resource.labels.function_name', '$.jsonPayload'])) END AS v
    FROM {frag:lines}({lit:path}, {lit:delim})
), read AS (
    -- an entry has a log name or an insert id (v is NULL where the line is no JSON)
    SELECT line, CASE WHEN v[3] IS NOT NULL THEN v
                      WHEN v IS NOT NULL AND json_extract_string(line, '$.insertId') IS NOT NULL THEN v END AS v
    FROM entries
), stamped AS (
    -- a sender more specific than the container name, read again only where the entry names no pod (pod_name): a
    -- Cloud Run instance, a legacy GKE entry's pod label or pod_id
    SELECT *, CASE WHEN v[2] IS NOT NULL THEN v[2]
                   WHEN v IS NOT NULL THEN json_extract_string(line, '$.receiveTimestamp') END AS stamp,
           CASE WHEN v IS NOT NULL AND v[7] IS NULL THEN json_extract_string(line, [
               '$.labels.instanceId', '$.labels."container.googleapis.com/pod_name"', '$.resource.labels.pod_id']) END
               AS sender
    FROM read
)
SELECT unnest(mm_piece(CASE WHEN v IS NULL THEN line ELSE coalesce(v[1], v[12]) END, mm_ts(stamp),
    stream := CASE WHEN ends_with(v[3], '/logs/stdout') THEN 'stdout' WHEN ends_with(v[3], '/logs/stderr') THEN 'stderr' END,
    host := coalesce(v[4], v[5], v[6]), unit := coalesce(v[9], v[10], v[11]),
    container := coalesce(v[7], sender[1], sender[2], sender[3], v[8])))
FROM stamped

-- name: envelope_cloudwatch
-- AWS CloudWatch Logs events (`aws logs filter-log-events` / `get-log-events` pages through
-- envelope_document_entries, or one event per line): message, timestamp in milliseconds, logStreamName (else
-- {lit:container}, from the file's path).
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    SELECT line,
           CASE WHEN starts_with(line, '{') THEN try(json_extract_string(line, [
               '$.message', '$.timestamp', '$.logStreamName', '$.logGroupName'])) END AS v
    FROM {frag:lines}({lit:path}, {lit:delim})
), read AS (
    SELECT line, CASE WHEN v[1] IS NOT NULL AND v[2] IS NOT NULL THEN v END AS v FROM entries
)
SELECT unnest(mm_piece(CASE WHEN v IS NULL THEN line ELSE v[1] END, mm_ts(v[2]), unit := v[4],
    container := CASE WHEN v IS NOT NULL THEN coalesce(v[3], {lit:container}::VARCHAR) END))
FROM read

-- name: envelope_datadog
-- Datadog log archives (one event per line): the record is `message` when it is one (a JSON object or
-- key=value pairs), else the parsed `attributes`; `date` (or `timestamp`), `host`, `service`.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    -- `attributes`, an object, is rendered as text (another parse of the line) only where it is needed: where
    -- the message is missing or is no record; rendering it on every line cost more than the rest of the block
    SELECT line,
           CASE WHEN starts_with(line, '{') THEN try(json_extract_string(line, [
               '$.message', '$.date', '$.timestamp', '$.host', '$.service'])) END AS v
    FROM {frag:lines}({lit:path}, {lit:delim})
), kept AS (
    SELECT line, v, CASE WHEN v IS NOT NULL AND NOT coalesce(mm_record_like(v[1]), false)
                         THEN json_extract_string(line, '$.attributes') END AS attributes
    FROM entries
), read AS (
    SELECT line, attributes, CASE WHEN v[1] IS NOT NULL OR attributes IS NOT NULL THEN v END AS v FROM kept
)
SELECT unnest(mm_piece(
    CASE WHEN v IS NULL THEN line WHEN mm_record_like(v[1]) THEN v[1] ELSE coalesce(attributes, v[1]) END,
    mm_ts(coalesce(v[2], v[3])), host := v[4], unit := v[5]))
FROM read

-- name: envelope_elastic
-- Elasticsearch / OpenSearch documents (one per line, bare or as a hit with `_source`, or a search response
-- through envelope_document_entries): the record is `message` (or log.original, event.original) when it is
-- one, else the document itself; @timestamp, host.name, container or pod, service.name.
-- dialect: duckdb
-- fragments: lines=mm_lines|mm_entries
CREATE OR REPLACE TEMP VIEW {ident:pieces} AS
WITH entries AS (
    -- a hit (`_source` present) is read through its _source, a bare document as it is. Only a line that names
    -- `_source` (or escapes a key) may be a hit, so a bare document that does not is parsed once, for its own
    -- fields, and a hit once, for its _source's; json_exists is asked only of a line naming _source where none of
    -- those fields is there. The document is rendered as text (the record when no message is one) only where it is
    -- needed: extracting _source and rendering it on every line cost more than the rest of the block
    SELECT line, starts_with(line, '{') AS object,
           CASE WHEN NOT object THEN false WHEN contains(line, '"_source"') THEN true ELSE contains(line, '\u') END AS named
    FROM {frag:lines}({lit:path}, {lit:delim})
), sources AS (
    SELECT line, object, named, CASE WHEN named THEN try(json_extract_string(line, [
               '$._source.message', '$._source.log.original', '$._source.event.original', '$._source."@timestamp"',
               '$._source.host.name', '$._source.host.hostname', '$._source.container.name',
               '$._source.kubernetes.pod.name', '$._source.service.name'])) END AS source
    FROM entries
), hits AS (
    -- a hit when any field of _source is there, else when the line says _source is
    SELECT line, source, CASE WHEN NOT object THEN NULL WHEN NOT named THEN false
                              WHEN coalesce(source[1], source[2], source[3], source[4], source[5], source[6], source[7],
                                            source[8], source[9]) IS NOT NULL THEN true
                              ELSE try(json_exists(line, '$._source')) END AS hit
    FROM sources
), read AS (
    SELECT line, hit,
           CASE WHEN hit THEN source
                WHEN NOT hit THEN try(json_extract_string(line, [
               '$.message', '$.log.original', '$.event.original', '$."@timestamp"', '$.host.name', '$.host.hostname',
               '$.container.name', '$.kubernetes.pod.name', '$.service.name'])) END AS v
    FROM hits
)
SELECT unnest(mm_piece(
    CASE WHEN v IS NULL THEN line WHEN mm_record_like(v[1]) THEN v[1] WHEN mm_record_like(v[2]) THEN v[2]
         WHEN mm_record_like(v[3]) THEN v[3]
         ELSE json_extract_string(CASE WHEN hit THEN json_extract(line, '$._source') ELSE line END, '$') END,
    mm_ts(v[4]), host := coalesce(v[5], v[6]), unit := v[9], container := coalesce(v[8], v[7])))
FROM read

-- name: envelope_flat_lines
-- The inner lines when every piece is one whole line, straight from the envelope's view {ident:pieces}: the
-- parser reads the file through it once, and a line's number is its staged row's (env.line_no NULL: see
-- events_part_enveloped). A piece that holds a newline (a multi-line message) or leaves its line unfinished ends
-- the read there with the error {lit:again}, and envelopes.stage reads the file again from its pieces written down
-- (envelope_kept_pieces). The staged table keeps every line's env, so no row escapes the check.
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW {ident:unwrapped} AS
SELECT text AS line,
       struct_pack(line_no := CASE WHEN NOT complete OR contains(text, chr(10)) THEN error({lit:again}) END::BIGINT,
                   ts := ts, stream := stream, host := host, unit := unit, container := container, pid := pid,
                   cut := false) AS env
FROM {ident:pieces}

-- name: envelope_flat_entries
-- How many entries a file staged through envelope_flat_lines has: a staged row each.
-- dialect: duckdb
SELECT count(*) AS entries FROM {ident:staged}

-- name: envelope_kept_pieces
-- The envelope's pieces written down ({ident:kept}), in the file's order, to be joined or split (a piece's place is
-- its rowid).
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE {ident:kept} AS SELECT * FROM {ident:pieces}

-- name: envelope_partial_pieces
-- How many pieces leave their line unfinished before the file's last entry (then pieces must be joined), how
-- many leave it unfinished at all, and how many entries there are. A piece's place is its rowid (see
-- envelope_lines).
-- dialect: duckdb
SELECT count(*) FILTER (WHERE NOT complete AND rowid < (SELECT max(rowid) FROM {ident:kept})) AS partial,
       count(*) FILTER (WHERE NOT complete) AS incomplete, count(*) AS entries
FROM {ident:kept}

-- name: envelope_lines
-- The inner lines of pieces that need no joining, in order: a piece holding newlines (a multi-line journald
-- MESSAGE, say) gives one line each, all with the piece's envelope (`env`). A VIEW: the parser reads it once.
-- A last piece that never finished its line (`cut`) is treated like a last line without a newline.
-- The pieces are one row per entry in the file's order (the connection preserves insertion order), so an
-- entry's number is its rowid + 1: numbering them with a window in each envelope's block made the unwrapping
-- run on one thread.
-- dialect: duckdb
CREATE OR REPLACE VIEW {ident:unwrapped} AS
SELECT unnest(CASE WHEN contains(text, chr(10)) THEN string_split(rtrim(text, chr(10)), chr(10)) ELSE [text] END) AS line,
       struct_pack(line_no := rowid + 1, ts := ts, stream := stream, host := host, unit := unit, container := container,
                   pid := pid, cut := NOT complete) AS env
FROM {ident:kept}

-- name: envelope_joined_lines
-- The inner lines when pieces must be joined: consecutive pieces of one chain (stream) make one line, up to and
-- including the piece that completes it; the line keeps the first piece's number and envelope. Then split at
-- newlines like envelope_lines, in the file's order.
-- dialect: duckdb
CREATE OR REPLACE TEMP TABLE {ident:unwrapped} AS
WITH pieces AS (
    SELECT rowid + 1 AS line_no, * FROM {ident:kept}
), marked AS (
    SELECT *, coalesce(lag(NOT complete) OVER (PARTITION BY chain ORDER BY line_no), false) AS continues
    FROM pieces
), numbered AS (
    SELECT *, sum(CASE WHEN continues THEN 0 ELSE 1 END) OVER (PARTITION BY chain ORDER BY line_no
                                                               ROWS UNBOUNDED PRECEDING) AS record
    FROM marked
), joined AS (
    SELECT min(line_no) AS line_no, string_agg(text, '' ORDER BY line_no) AS text,
           arg_max(complete, line_no) AS complete, arg_min(ts, line_no) AS ts, arg_min(stream, line_no) AS stream,
           arg_min(host, line_no) AS host, arg_min(unit, line_no) AS unit, arg_min(container, line_no) AS container,
           arg_min(pid, line_no) AS pid
    FROM numbered GROUP BY chain, record
), split AS (
    SELECT *, CASE WHEN contains(text, chr(10)) THEN string_split(rtrim(text, chr(10)), chr(10)) ELSE [text] END AS parts
    FROM joined
), lines AS (
    SELECT *, unnest(parts) AS line, generate_subscripts(parts, 1) AS part FROM split
)
SELECT line, struct_pack(line_no := line_no, ts := ts, stream := stream, host := host, unit := unit,
                         container := container, pid := pid, cut := NOT complete) AS env
FROM lines ORDER BY line_no, part

-- name: envelope_mixed_staged
-- A file whose envelope holds both JSON and logfmt records (a journal of several programs, say), parsed both ways
-- ({ident:as_json}, {ident:as_logfmt}, in the order of {ident:unwrapped}): each line takes the reading of its
-- own syntax.
-- dialect: duckdb
CREATE OR REPLACE TABLE {ident:staged} AS
SELECT unnest(CASE WHEN mm_starts_object(u.line) THEN j ELSE l END)
FROM (SELECT line FROM {ident:unwrapped}) u POSITIONAL JOIN {ident:as_json} j POSITIONAL JOIN {ident:as_logfmt} l

-- name: envelope_tokens
-- The inner lines of a file read through an envelope ({ident:unwrapped}) as a compiled reader reads them, for
-- stage_logfmt_tokens or stage_jsonl_tokens: {ident:tokenize} is the function that hands the logfmt tokenizer or
-- the JSON Lines reader DuckDB's vectors of lines (forensics.ingest.tokenizer.stage_lines,
-- forensics.ingest.jsontokenizer.stage_lines), its columns beside each line and its envelope. A VIEW: read once.
-- dialect: duckdb
CREATE OR REPLACE TEMP VIEW {ident:tokens} AS
SELECT line, env, unnest({ident:tokenize}(line)) FROM {ident:unwrapped}

-- name: envelope_tokens_drop
-- Forget the view of envelope_tokens.
-- dialect: duckdb
DROP VIEW IF EXISTS {ident:tokens}

-- name: envelope_inner_sample
-- The first non-blank inner lines (to tell the inner syntax, and to say what a file without records holds).
-- dialect: duckdb
SELECT line FROM {ident:unwrapped} WHERE NOT mm_blank(line) LIMIT :most

-- name: envelope_cut_rows
-- The inner lines a platform never finished (see envelope_lines): their row (the staged table's rowid, which
-- follows the same order) and text.
-- dialect: duckdb
SELECT row, line FROM (SELECT row_number() OVER () - 1 AS row, line, env.cut AS cut FROM {ident:unwrapped})
WHERE cut

-- name: envelope_counts
-- Records, skipped lines and the first skipped entries of a staged file read through an envelope.
-- dialect: duckdb
SELECT count(*) FILTER (WHERE problem IS NULL) AS records, count(*) FILTER (WHERE problem IS NOT NULL) AS skipped,
       -- the lines of the skipped rows only: numbering every row (a struct field of each) cost more than the counts
       (SELECT list(line_no ORDER BY line_no)
        FROM (SELECT DISTINCT coalesce(env.line_no, rowid + 1) AS line_no FROM {ident:staged}
              WHERE problem IS NOT NULL ORDER BY line_no LIMIT 10)) AS first
FROM {ident:staged}

-- name: envelope_sender
-- Where the workers of a staged file read through an envelope came from, among its first :most records: the part of
-- the envelope that named most of them (mm_env_worker's choice: container, host/unit, host or unit) and how many
-- records took the envelope's worker, how many name another of their own (a record's key wins), and how many took its
-- pid as incarnation. A sample: reading a struct's fields on every row of a large file cost more than its counts.
-- dialect: duckdb
WITH records AS (
    SELECT env, worker, incarnation, worker = mm_env_worker(env) AS taken
    FROM (SELECT env, worker, incarnation FROM {ident:staged} WHERE problem IS NULL LIMIT :most)
)
SELECT mode(CASE WHEN env.container IS NOT NULL THEN 'container' WHEN env.host IS NOT NULL AND env.unit IS NOT NULL
                 THEN 'host/unit' WHEN env.host IS NOT NULL THEN 'host' ELSE 'unit' END) FILTER (WHERE taken) AS source,
       count(*) FILTER (WHERE taken) AS taken,
       count(*) FILTER (WHERE worker IS NOT NULL AND NOT coalesce(taken, false)) AS own,
       count(*) FILTER (WHERE incarnation = env.pid) AS by_pid
FROM records

-- name: envelope_drop
-- Forget the intermediate view and tables of a file read through an envelope.
-- dialect: duckdb
DROP VIEW IF EXISTS {ident:pieces};
DROP TABLE IF EXISTS {ident:kept};
DROP TABLE IF EXISTS {ident:entries}

-- name: envelope_drop_lines
-- Forget the inner lines of a file read through an envelope ({frag:relation}: how they were kept).
-- dialect: duckdb
-- fragments: relation=VIEW|TABLE
DROP {frag:relation} IF EXISTS {ident:unwrapped}
