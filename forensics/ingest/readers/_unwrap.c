/* forensics.ingest.readers._unwrap: the common line envelopes taken off in C (optional; queries/envelopes.sql's blocks are the
 * fallback and the reference): Docker json-file, CRI, `docker logs --timestamps` and CloudWatch's S3 export,
 * syslog (RFC 3164, rsyslog's file format, RFC 5424), journald JSON, the application prefixes (Python logging,
 * structlog, zap, slog, logrus), and the JSON platforms' files of one entry per line (Loki, Cloud Logging,
 * CloudWatch events, Datadog, Elasticsearch; their JSON documents are DuckDB's).
 *
 * configure(names) takes the readers' kind numbers from forensics.ingest.envelope_table (its C_KINDS, names in
 * kind order) at import, and refuses names other than this module's readers.
 *
 * unwrap(buffer, start, end, kind, year, last_month) reads the physical lines of buffer[start:end) (which starts
 * at a line and ends after one) and gives, per line, the text inside its envelope (the line itself where it is
 * not an entry of the envelope, as the SQL passes it on whole), the host, unit, container and pid the line names,
 * the entry's time (timestamp[us, UTC], NULL for a JSON platform's entry without one) and what it was: not an
 * entry, or an entry of stdout, of stderr, or of no named stream. The logfmt tokenizer or, for JSON records, the
 * JSON Lines reader then reads the texts (forensics/ingest/unwrapper.py). After an application's prefix the text
 * is the SQL's (mm_json_object, else mm_pairs): the trailing JSON object (from the first '{', when it ends with
 * '}', perhaps before spaces, and is valid JSON), else the key=value pairs.
 *
 * It takes the common case only, and says DEFER for the whole file at the first line where it cannot be sure to
 * read it exactly as DuckDB does: a piece of a longer line (Docker's 16 KiB split, CRI's P, journald's line-max) or
 * an unfinished one, an entry holding more than one line, a CR in a physical line, invalid UTF-8, a JSON entry of
 * another shape than this module reads (Docker's own compact {"log", "stream", "time"} and no other key; journald's
 * flat object of strings), an escaped or repeated key (or one holding a control character), a time iso_utc_us does not read or a
 * syslog date that is none, a stream other than stdout or stderr, a journald message of bytes (or one starting with
 * '[') or without a time, a prefix's JSON tail that is no strict JSON (DuckDB's json_valid is laxer: trailing
 * commas, NaN, ...) or holds a lone surrogate escape, or one ending in a multi-byte character (rtrim takes Unicode
 * spaces). Of a JSON platform's line starting with '{': JSON that is not strict or nests deeper than 64, an escaped
 * key on the way to a wanted value or a wanted key twice, a time that is neither RFC 3339 with a zone nor 9 to 14
 * digits of epoch, an entry without a text (Cloud Logging's protoPayload), a _source not an object, and a value to
 * render (json_extract_string of a non-string: a jsonPayload, attributes, the document) holding a number DuckDB
 * writes its own way (a fraction, an exponent, -0). The caller then takes the envelope off in DuckDB, which reads
 * every case.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wunused-function" /* the typing this reader does not need */
#include "_typing.h"
#include "_grammar.h"
#define MM_BLOCK_NAME "forensics.ingest.readers._unwrap.Block"
#include "_buffers.h"

enum { E_NONE = 0, E_STDOUT = 1, E_STDERR = 2, E_NO_STREAM = 3 }; /* what a line was */
enum { U_DEFER = 1, U_NOMEM = 2 };
enum { C_TEXT, C_HOST, C_UNIT, C_CONTAINER, C_PID, NCOLS }; /* the columns: the text, then its provenance */
#define NO_TIME INT64_MIN /* an entry without a time: the SQL's mm_ts(NULL) */

/* The numbers the Python side reads of this module. */
static const IntConstant CONSTANTS[] = {
    {"DEFER", U_DEFER}, {"STDOUT", E_STDOUT}, {"STDERR", E_STDERR}, {"NO_STREAM", E_NO_STREAM}, {NULL, 0},
};

typedef struct {
    Column cols[NCOLS]; /* the text inside each line's envelope (valid everywhere: a blank line is ''), then what
                         * the line names of its host, unit, container and pid (the path's names are Python's) */
    int8_t *what;
    int64_t *ts;
    uint8_t *ts_valid;
    size_t rows, cap, ts_nulls;
} Out;

typedef struct {
    const unsigned char *s[NCOLS]; /* each column's value for one line (NULL: none), */
    size_t n[NCOLS];               /* and its length */
} Line;

typedef struct {
    int kind, year, last_month; /* a year-less syslog stamp's year, or the year before past last_month */
    unsigned char *scratch;     /* room for one line's decoded JSON strings */
} Reading;

static int reserve(Out *o) {
    if (o->rows < o->cap) return 0;
    size_t cap = o->cap ? o->cap * 2 : 65536;
    if (grow_rows(o->cols, NCOLS, &o->what, &o->ts, &o->ts_valid, o->cap, cap)) return -1;
    o->cap = cap;
    return 0;
}

/* A line read: its columns put, in row order. */
static int put_line(Out *o, const Line *line) {
    for (int c = 0; c < NCOLS; c++) {
        if (line->s[c] == NULL && c != C_TEXT) put_null(&o->cols[c], o->rows);
        else if (put(&o->cols[c], o->rows, line->s[c] ? (const char *)line->s[c] : "", line->n[c])) return -1;
    }
    return 0;
}

static void set(Line *line, int col, const unsigned char *s, size_t n) { line->s[col] = s, line->n[col] = n; }

/* mm_ts of an RFC 3339 time with a zone: iso_utc_us, with DuckDB's truncation of 7 to 9 fractional digits. */
static int time_us(const unsigned char *s, size_t n, int64_t *us) {
    if (n > 20 && s[19] == '.') {
        size_t k = 20;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        size_t digits = k - 20;
        if (digits > 6 && digits <= 9) {
            unsigned char cut[40];
            size_t rest = n - k;
            if (26 + rest > sizeof cut) return 0;
            memcpy(cut, s, 26);
            memcpy(cut + 26, s + k, rest);
            return iso_utc_us(cut, 26 + rest, us);
        }
    }
    return iso_utc_us(s, n, us);
}

/* ---- Docker json-file ---- */

/* JSON's tokens (plain_run, json_string, json_escape, ...) are forensics/ingest/readers/_grammar.h's. */

#define JSON_FAIL ((size_t)-1)

/* A string at s[i] (its quote): its text in *v, *len (the line's own bytes when it holds no escape, else decoded
 * into `into`), and where it ends; JSON_FAIL for what json_string does not take. */
static size_t string_at(const unsigned char *s, size_t n, size_t i, unsigned char *into, const unsigned char **v,
                        size_t *len) {
    size_t j = plain_run(s, n, i + 1);
    if (j < n && s[j] == '"') {
        *v = s + i + 1, *len = j - i - 1;
        return j + 1;
    }
    size_t from = i; /* an escape: decoded from the start (the plain run copied again, sixteen bytes at a time) */
    long decoded = json_string(s, n, &from, into, JSON_PAIRS);
    if (decoded < 0) return JSON_FAIL;
    *v = into, *len = (size_t)decoded;
    return from;
}

/* ---- JSON entries (Docker json-file, journald) ---- */

/* Where the next token starts after i: past spaces and tabs, or at i in a compact object (a space is then no token). */
static size_t between(const unsigned char *s, size_t n, int compact, size_t i) {
    return compact ? i : json_ws(s, n, i);
}

typedef struct {
    const char *name;
    size_t len;
} Key; /* a wanted key, its length known at compile time */
#define KEY(k) {k, sizeof k - 1}

/* A flat JSON object of string values, s[0] being its '{': each of the `nwanted` keys' decoded value into
 * value[k] (NULL when absent); spaces or tabs between tokens unless `compact`, other keys read and left unless
 * `closed`. 0, or 1 to defer (any other value than a string, a wanted key twice, a key escaped or holding a control
 * character, another key in a `closed` object, anything after the object, a space between tokens of a compact one).
 * A value without escapes is left in the line (value[k] points into s); a decoded one is in the scratch. */
static int json_entry(const unsigned char *s, size_t n, unsigned char *scratch, const Key *wanted, int nwanted,
                      const unsigned char **value, size_t *len, int compact, int closed) {
    size_t i = between(s, n, compact, 1), used = 0;
    for (int k = 0; k < nwanted; k++) value[k] = NULL;
    if (i < n && s[i] == '}') return between(s, n, compact, i + 1) == n ? 0 : 1;
    for (;;) {
        if (i >= n || s[i] != '"') return 1;
        size_t key = i + 1, key_end = plain_run(s, n, key), klen = key_end - key;
        if (key_end >= n || s[key_end] != '"') return 1; /* escaped (or a raw control character): DuckDB's */
        i = between(s, n, compact, key_end + 1);
        if (i >= n || s[i] != ':') return 1;
        i = between(s, n, compact, i + 1);
        if (i >= n || s[i] != '"') return 1;
        const unsigned char *v;
        size_t vlen;
        if ((i = string_at(s, n, i, scratch + used, &v, &vlen)) == JSON_FAIL) return 1;
        int k = 0;
        while (k < nwanted && !(wanted[k].len == klen && wanted[k].name[0] == s[key]
                                && memcmp(wanted[k].name, s + key, klen) == 0))
            k++; /* the wanted keys differ: at most one is this one */
        if (k == nwanted) {
            if (closed) return 1;
        } else {
            if (value[k]) return 1;
            value[k] = v, len[k] = vlen;
            if (v == scratch + used) used += vlen; /* decoded: kept; a value without escapes is the line's */
        }
        i = between(s, n, compact, i);
        if (i < n && s[i] == '}') return between(s, n, compact, i + 1) == n ? 0 : 1;
        if (i >= n || s[i] != ',') return 1;
        i = between(s, n, compact, i + 1);
    }
}

static int equals(const unsigned char *s, size_t n, const char *word) {
    return s && n == strlen(word) && memcmp(s, word, n) == 0;
}

/* Docker json-file: {"log": "...\n", "stream": "stdout", "time": RFC 3339}, compact, no other key: a line with another
 * (a send key of its own beside Docker's, as Fluent Bit's Merge_Log writes, is no entry: mm_carries_send) defers. */
static int docker_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const Key keys[3] = {KEY("log"), KEY("stream"), KEY("time")};
    const unsigned char *v[3];
    size_t len[3];
    if (n == 0 || s[0] != '{') return 0;
    if (json_entry(s, n, r->scratch, keys, 3, v, len, 1, 1)) return 1; /* Docker's own JSON is compact */
    if (v[2] == NULL) return 0; /* no time: no entry (the SQL's v) */
    if (v[0] && (len[0] == 0 || v[0][len[0] - 1] != '\n')) return 1; /* a piece, or unfinished */
    size_t text = v[0] ? len[0] - 1 : 0;
    if (text && v[0][text - 1] == '\r') text--; /* a \r\n ends it too; a \r inside stays, as in the SQL */
    if (text && memchr(v[0], '\n', text)) return 1; /* lines: envelope_lines splits them */
    if (!time_us(v[2], len[2], us)) return 1;
    if (v[1] == NULL) *what = E_NO_STREAM;
    else if (equals(v[1], len[1], "stdout")) *what = E_STDOUT;
    else if (equals(v[1], len[1], "stderr")) *what = E_STDERR;
    else return 1;
    set(line, C_TEXT, v[0] ? v[0] : (const unsigned char *)"", text);
    return 0;
}

/* journald (`journalctl -o json`): MESSAGE, __REALTIME_TIMESTAMP (microseconds), _HOSTNAME, _SYSTEMD_UNIT or
 * SYSLOG_IDENTIFIER, _PID, CONTAINER_NAME; a cut or partial message, one of bytes or lines, or an entry without
 * __REALTIME_TIMESTAMP (whose time is _SOURCE_REALTIME_TIMESTAMP's, or which is no entry) is DuckDB's. */
static int journald_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const Key keys[9] = {KEY("MESSAGE"), KEY("__REALTIME_TIMESTAMP"), KEY("_HOSTNAME"), KEY("_SYSTEMD_UNIT"),
                                KEY("SYSLOG_IDENTIFIER"), KEY("_PID"), KEY("CONTAINER_NAME"), KEY("_LINE_BREAK"),
                                KEY("CONTAINER_PARTIAL_MESSAGE")};
    const unsigned char *v[9];
    size_t len[9];
    if (n == 0 || s[0] != '{') return n && s[0] == 0x1E; /* json-seq's RS: DuckDB's */
    if (json_entry(s, n, r->scratch, keys, 9, v, len, 0, 0) || v[0] == NULL || v[1] == NULL) return 1;
    if (equals(v[7], len[7], "line-max") || equals(v[7], len[7], "eof") || equals(v[8], len[8], "true")) return 1;
    if ((len[0] && v[0][0] == '[') || memchr(v[0], '\n', len[0]) || len[1] == 0 || len[1] > 18) return 1;
    int64_t t = 0;
    for (size_t i = 0; i < len[1]; i++) {
        if (v[1][i] < '0' || v[1][i] > '9') return 1;
        t = t * 10 + (v[1][i] - '0');
    }
    *us = t, *what = E_NO_STREAM;
    set(line, C_TEXT, v[0], len[0]);
    set(line, C_HOST, v[2], len[2]);
    if (v[3]) set(line, C_UNIT, v[3], len[3]);
    else set(line, C_UNIT, v[4], len[4]);
    set(line, C_CONTAINER, v[6], len[6]);
    set(line, C_PID, v[5], len[5]);
    return 0;
}

/* ---- text headers ---- */


/* CRI: `<RFC 3339> <stdout|stderr> <F|P>[:tags] <line>` (a header run into the text is no entry). A line without
 * the tag (`<RFC 3339> <stdout|stderr> <line>`, as older runtimes write) is an entry of its own: DuckDB's. */
static int cri_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    size_t t = 0;
    while (t < n && !is_space(s[t])) t++;
    if (t == 0 || t + 7 > n || s[t] != ' ') return 0;
    int out = memcmp(s + t + 1, "stdout", 6) == 0, err = memcmp(s + t + 1, "stderr", 6) == 0;
    if (!out && !err) return 0;
    if (t + 7 < n && s[t + 7] != ' ') return 0; /* `stdoutX`: no stream word */
    if (t + 9 > n || (s[t + 8] != 'F' && s[t + 8] != 'P') || (t + 9 < n && s[t + 9] != ' ' && s[t + 9] != ':'))
        return 1; /* no tag */
    size_t h = t + 9; /* the head's end: after [FP], and after :tags */
    if (h < n && s[h] == ':')
        while (h < n && !is_space(s[h])) h++;
    if (h < n && s[h] != ' ') return 1; /* tags run into the text: a tagless entry */
    if (s[t + 8] == 'P' || !time_us(s, t, us)) return 1;
    *what = out ? E_STDOUT : E_STDERR;
    set(line, C_TEXT, h < n ? s + h + 1 : s, h < n ? n - h - 1 : 0);
    return 0;
}

/* `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})`: its end, or 0 */
static size_t rfc3339_end(const unsigned char *s, size_t n) {
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    if (n < 20) return 0;
    for (int k = 0; k < 19; k++)
        if (shape[k] == 'd' ? !is_digit(s[k]) : s[k] != shape[k]) return 0;
    size_t i = 19;
    if (s[i] == '.') {
        size_t f = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == f) return 0;
    }
    if (i < n && s[i] == 'Z') return i + 1;
    if (i + 3 > n || (s[i] != '+' && s[i] != '-') || !is_digit(s[i + 1]) || !is_digit(s[i + 2])) return 0;
    i += 3;
    if (i < n && s[i] == ':') i++;
    return i + 2 <= n && is_digit(s[i]) && is_digit(s[i + 1]) ? i + 2 : 0;
}

/* `docker logs --timestamps` and CloudWatch's S3 export: `<RFC 3339> <line>`. */
static int timestamped_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    size_t stamp = rfc3339_end(s, n);
    if (stamp == 0 || stamp >= n || s[stamp] != ' ') return 0;
    if (!time_us(s, stamp, us)) return 1;
    *what = E_NO_STREAM;
    set(line, C_TEXT, s + stamp + 1, n - stamp - 1);
    return 0;
}

static inline int alnum_ascii(unsigned char c) {
    return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* `docker compose logs [-t]`: `<name> +|[ <RFC 3339>( |$)| |$]<line>`, the name `[A-Za-z0-9][A-Za-z0-9_.-]*` (the
 * container); a time run into the text is text. */
static int compose_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    size_t i = 0, j;
    if (n == 0 || !alnum_ascii(s[0])) return 0;
    while (i < n && (alnum_ascii(s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-')) i++;
    for (j = i; j < n && s[j] == ' '; j++) {}
    if (j == i || j >= n || s[j] != '|') return 0;
    size_t head = ++j; /* after the bar, at the line's end */
    if (j < n && s[j] != ' ') return 0;
    *what = E_NO_STREAM, *us = NO_TIME;
    if (j < n) {
        size_t stamp = rfc3339_end(s + j + 1, n - j - 1), end = j + 1 + stamp;
        head = j + 1;
        if (stamp && (end == n || s[end] == ' ')) {
            if (!time_us(s + j + 1, stamp, us)) return 1;
            head = end == n ? n : end + 1;
        }
    }
    set(line, C_CONTAINER, s, i);
    set(line, C_TEXT, s + head, n - head);
    return 0;
}

static const char MONTHS[] = "JanFebMarAprMayJunJulAugSepOctNovDec";

/* A year-less `Mmm dd hh:mm:ss` at s (its length in *end), in UTC: the year r->year, or the one before for a
 * month past r->last_month; 0 when it is no valid date (DuckDB's strptime gives NULL: left to it). */
static int syslog_stamp(const Reading *r, const unsigned char *s, size_t n, size_t *end, int64_t *us, int *matched) {
    size_t i = 3;
    *matched = 0;
    if (n < 15 || !(s[0] >= 'A' && s[0] <= 'Z') || !(s[1] >= 'a' && s[1] <= 'z') || !(s[2] >= 'a' && s[2] <= 'z')
        || s[3] != ' ')
        return 0;
    while (i < n && s[i] == ' ') i++;
    size_t d = i;
    while (i < n && i - d < 2 && is_digit(s[i])) i++;
    if (i == d || i + 9 > n || s[i] != ' ' || !is_digit(s[i + 1]) || !is_digit(s[i + 2]) || s[i + 3] != ':'
        || !is_digit(s[i + 4]) || !is_digit(s[i + 5]) || s[i + 6] != ':' || !is_digit(s[i + 7]) || !is_digit(s[i + 8]))
        return 0;
    *matched = 1, *end = i + 9;
    const char *m = strstr(MONTHS, (char[4]){(char)s[0], (char)s[1], (char)s[2], 0});
    if (m == NULL || (m - MONTHS) % 3) return 0;
    int month = (int)(m - MONTHS) / 3 + 1, day = 0, h = (s[i + 1] - '0') * 10 + s[i + 2] - '0';
    for (size_t k = d; k < i; k++) day = day * 10 + s[k] - '0';
    int mi = (s[i + 4] - '0') * 10 + s[i + 5] - '0', se = (s[i + 7] - '0') * 10 + s[i + 8] - '0';
    int year = month > r->last_month ? r->year - 1 : r->year;
    if (day < 1 || day > days_in_month(year, month) || h > 23 || mi > 59 || se > 59) return 0;
    *us = (days_from_civil(year, month, day) * 86400 + h * 3600 + mi * 60 + se) * 1000000;
    return 1;
}

/* `[^\s\[:]+(?:\[[0-9]+\])?: ?` at s[i] (after the host's space): the head's end, or 0; the tag and pid. */
static size_t syslog_tag(const unsigned char *s, size_t n, size_t i, Line *line) {
    size_t t = i;
    while (i < n && !is_space(s[i]) && s[i] != '[' && s[i] != ':') i++;
    if (i == t) return 0;
    set(line, C_UNIT, s + t, i - t);
    if (i < n && s[i] == '[') {
        size_t p = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == p || i >= n || s[i] != ']') return 0;
        set(line, C_PID, s + p, i - p);
        i++;
    }
    if (i >= n || s[i] != ':') return 0;
    return i + 1 < n && s[i + 1] == ' ' ? i + 2 : i + 1;
}

/* Syslog files: `[<PRI>]Mmm dd hh:mm:ss host tag[pid]: message` (RFC 3164, read in UTC: the caller takes no
 * other zone) and rsyslog's `[<PRI>]<RFC 3339> host tag[pid]: message` (its file format, and its ForwardFormat,
 * RFC 3164 with an ISO time after the PRI). */
static inline int syslog_entry(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what,
                               int year_less) {
    size_t i = 0, stamp_end = 0;
    int valid = 0, matched = 0;
    if (n && s[0] == '<') {
        size_t k = 1;
        while (k < n && k < 4 && is_digit(s[k])) k++;
        if (k > 1 && k < n && s[k] == '>') i = k + 1;
    }
    if (year_less) {
        valid = syslog_stamp(r, s + i, n - i, &stamp_end, us, &matched);
        stamp_end += i;
    } else {
        /* [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ and a zone: only the times time_us reads (others are DuckDB's) */
        static const char shape[] = "dddd-dd-ddT";
        const unsigned char *p = s + i;
        size_t m = n - i;
        matched = m > 11;
        for (int k = 0; k < 11 && matched; k++) matched = shape[k] == 'd' ? is_digit(p[k]) : p[k] == shape[k];
        size_t e = 11;
        while (matched && e < m && (is_digit(p[e]) || p[e] == ':' || p[e] == '.')) e++;
        if (matched && e < m && p[e] == 'Z') e++;
        else if (matched && e + 3 <= m && (p[e] == '+' || p[e] == '-') && is_digit(p[e + 1]) && is_digit(p[e + 2])) {
            size_t z = e + 3 + (e + 3 < m && p[e + 3] == ':');
            if (z + 2 <= m && is_digit(p[z]) && is_digit(p[z + 1])) e = z + 2;
        }
        matched = matched && e > 11;
        stamp_end = i + e;
        valid = matched && time_us(p, e, us);
    }
    if (!matched || stamp_end >= n || s[stamp_end] != ' ') return 0;
    size_t host = stamp_end + 1, h = host;
    while (h < n && !is_space(s[h])) h++;
    if (h == host || h >= n || s[h] != ' ') return 0;
    Line head = *line;
    size_t end = syslog_tag(s, n, h + 1, &head);
    if (end == 0) return 0;
    if (!valid) return 1; /* an entry whose stamp DuckDB reads its own way (or not at all) */
    *line = head, *what = E_NO_STREAM;
    set(line, C_HOST, s + host, h - host);
    set(line, C_TEXT, s + end, n - end);
    return 0;
}

static int syslog_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    return syslog_entry(r, s, n, line, us, what, 1);
}

static int rsyslog_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    return syslog_entry(r, s, n, line, us, what, 0);
}

/* RFC 5424: `<PRI>1 TIMESTAMP HOST APP-NAME PROCID MSGID STRUCTURED-DATA [MSG]`, `-` a nil value, a BOM before
 * MSG dropped. Structured data holding a quote or a backslash, and a nil time, are DuckDB's. */
static size_t field_end(const unsigned char *s, size_t n, size_t i) { /* \S+ then a space: the space, or 0 */
    size_t j = i;
    while (j < n && !is_space(s[j])) j++;
    return j > i && j < n && s[j] == ' ' ? j : 0;
}

static int rfc5424_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    size_t i = 1;
    if (n < 4 || s[0] != '<') return 0;
    while (i < n && i < 4 && is_digit(s[i])) i++;
    if (i == 1 || i + 2 > n || s[i] != '>' || s[i + 1] != '1' || i + 2 >= n || s[i + 2] != ' ') return 0;
    size_t at[6], start = i + 3; /* where TIMESTAMP, HOST, APP-NAME, PROCID, MSGID and the structured data start */
    for (int f = 0; f < 5; f++) {
        size_t end = field_end(s, n, start);
        if (end == 0) return 0;
        at[f] = start, start = end + 1;
    }
    at[5] = start;
    size_t h = start;
    if (h < n && s[h] == '-') h++;
    else if (h < n && s[h] == '[') {
        while (h < n && s[h] == '[') {
            const unsigned char *close = memchr(s + h + 1, ']', n - h - 1);
            const unsigned char *quote = memchr(s + h + 1, '"', n - h - 1), *escape = memchr(s + h + 1, '\\', n - h - 1);
            if ((quote && (!close || quote < close)) || (escape && (!close || escape < close))) return 1;
            if (close == NULL) break;
            h = (size_t)(close - s) + 1;
        }
        if (h == start) return 0;
    } else return 0;
    if (h < n && s[h] != ' ') return 0; /* mm_spaced_head: run into the text, no entry */
    size_t stamp_n = at[1] - 1 - at[0];
    if (stamp_n == 1 && s[at[0]] == '-') return 1;
    if (!time_us(s + at[0], stamp_n, us)) return 1;
    static const int cols[3] = {C_HOST, C_UNIT, C_PID}; /* HOST, APP-NAME, PROCID ('-': none) */
    for (int f = 1; f < 4; f++) {
        size_t len = at[f + 1] - 1 - at[f];
        if (!(len == 1 && s[at[f]] == '-')) set(line, cols[f - 1], s + at[f], len);
    }
    size_t text = h < n ? h + 1 : n;
    while (text + 3 <= n && s[text] == 0xEF && s[text + 1] == 0xBB && s[text + 2] == 0xBF) text += 3;
    *what = E_NO_STREAM;
    set(line, C_TEXT, s + text, n - text);
    return 0;
}

/* ---- application prefixes ---- */

/* mm_pairs' key=value reading of what follows an application's prefix: `rest` from the first place (its
 * start, or after a space) where key=value pairs begin, perhaps after a bare ISO time; all of it where none
 * does. */
/* [0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?\s+ then a key, at s[i] */
static int iso_key_at(const unsigned char *s, size_t n, size_t i) {
    static const char shape[] = "dddd-dd-dd";
    if (i + 11 > n) return 0;
    for (int k = 0; k < 10; k++)
        if (shape[k] == 'd' ? !is_digit(s[i + k]) : s[i + k] != '-') return 0;
    size_t j = i + 10;
    if (s[j] != 'T' && s[j] != ' ') return 0;
    size_t run = ++j;
    while (j < n && (is_digit(s[j]) || s[j] == ':' || s[j] == '.')) j++;
    if (j == run) return 0;
    if (j < n && s[j] == 'Z') j++;
    else if (j < n && (s[j] == '+' || s[j] == '-')) {
        size_t z = ++j;
        while (j < n && (is_digit(s[j]) || s[j] == ':')) j++;
        if (j == z) return 0;
    }
    size_t spaces = j;
    while (j < n && is_space(s[j])) j++;
    return j > spaces && key_end(s, n, j);
}

/* Whether s[0..n) holds a key=value pair with a value: (?:^|\s)[^\s="]+=\S, as mm_holds_pair. */
static int holds_pair(const unsigned char *s, size_t n) {
    for (size_t p = 0; p < n; p++)
        if (p == 0 || is_space(s[p - 1])) {
            size_t k = key_end(s, n, p);
            if (k && k + 1 < n && !is_space(s[k + 1])) return 1;
        }
    return 0;
}

/* What follows an application's prefix, as the SQL reads it (mm_json_object, mm_pairs): the JSON object from its
 * first '{' (mm_json_tail) when that tail ends with '}' (perhaps before spaces: rtrim) and is valid JSON, else the
 * key=value reading. A brace right after '=' behind other key=value pairs is a value of the pairs (`meta={...}`),
 * no JSON record.
 * 1, to defer, where this reader cannot tell json_valid's or rtrim's answer: a tail that ends like an object but
 * is no strict JSON, or one ending in a byte of a multi-byte character (rtrim takes Unicode spaces too). */
static int payload(const unsigned char *rest, size_t n, Line *line) {
    const unsigned char *brace = memchr(rest, '{', n);
    if (brace && brace > rest && brace[-1] == '=' && holds_pair(rest, (size_t)(brace - rest)))
        brace = NULL;
    if (brace) {
        size_t tail = (size_t)(brace - rest), last = n;
        while (rest[last - 1] == ' ') last--; /* stops at the '{' */
        if (rest[last - 1] >= 0x80) return 1;
        if (rest[last - 1] == '}') {
            /* json_valid's judgement, where certain: strict JSON (DuckDB's reader is laxer: trailing commas,
             * NaN, ...; it refuses a lone surrogate escape, which RFC 8259 allows) */
            size_t end = json_value_end(rest, n, tail, 0, JSON_PAIRS | JSON_NUL);
            if (end == 0 || json_ws(rest, n, end) != n) return 1;
            set(line, C_TEXT, rest + tail, n - tail);
            return 0;
        }
    }
    for (size_t p = 0; p < n; p++)
        if ((p == 0 || is_space(rest[p - 1])) && (key_end(rest, n, p) || iso_key_at(rest, n, p))) {
            set(line, C_TEXT, rest + p, n - p);
            return 0;
        }
    set(line, C_TEXT, rest, n);
    return 0;
}

/* A zone-less ISO time (the caller reads only UTC: --tz other than UTC is DuckDB's), with `zulu` its zone. */
static int utc_us(const unsigned char *s, size_t n, int64_t *us) {
    unsigned char zoned[40];
    if (n + 1 > sizeof zoned) return 0;
    memcpy(zoned, s, n);
    zoned[n] = 'Z';
    return time_us(zoned, n + 1, us);
}

/* Python logging with %(asctime)s first: `2026-11-28 09:21:26,123 LEVEL name: message` (local time). */
static int python_logging_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us,
                               int *what) {
    static const char shape[] = "dddd-dd-dd dd:dd:dd,ddd";
    if (n < 23) return 0;
    for (int k = 0; k < 23; k++)
        if (shape[k] == 'd' ? !is_digit(s[k]) : s[k] != shape[k]) return 0;
    unsigned char stamp[23];
    memcpy(stamp, s, 23);
    stamp[19] = '.';
    if (!utc_us(stamp, 23, us)) return 1;
    size_t i = 23;
    while (i < n && (s[i] == ' ' || s[i] == ':' || s[i] == '-')) i++;
    *what = E_NO_STREAM;
    return payload(s + i, n - i, line);
}

/* structlog's console renderer: `2026-11-28 09:21:26[.f][zone] [level    ] event   key=value …`. */
static int structlog_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const char shape[] = "dddd-dd-dd?dd:dd:dd";
    if (n < 20) return 0;
    for (int k = 0; k < 19; k++)
        if (shape[k] == 'd' ? !is_digit(s[k]) : shape[k] == '?' ? s[k] != 'T' && s[k] != ' ' : s[k] != shape[k])
            return 0;
    size_t i = 19, zone = 0;
    if (s[i] == '.' && i + 1 < n && is_digit(s[i + 1])) {
        i++;
        while (i < n && is_digit(s[i])) i++;
    }
    size_t plain = i;
    if (i < n && s[i] == 'Z') zone = ++i;
    else if (i + 5 <= n && (s[i] == '+' || s[i] == '-') && is_digit(s[i + 1]) && is_digit(s[i + 2])) {
        size_t z = i + 3 + (s[i + 3] == ':');
        if (z + 2 <= n && is_digit(s[z]) && is_digit(s[z + 1])) zone = i = z + 2;
    }
    size_t spaces = i;
    while (i < n && s[i] == ' ') i++;
    if (i == spaces || i >= n || s[i] != '[') return 0; /* a zone run into the text is no head (no backtrack helps) */
    i++;
    while (i < n && s[i] == ' ') i++;
    size_t level = i;
    while (i < n && ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z')) i++;
    if (i == level) return 0;
    while (i < n && s[i] == ' ') i++;
    if (i >= n || s[i] != ']') return 0;
    i++;
    if (i < n && s[i] == ' ') i++;
    if (!(zone ? time_us(s, zone, us) : utc_us(s, plain, us))) return 1;
    *what = E_NO_STREAM;
    return payload(s + i, n - i, line);
}

/* zap's console encoder: `time\tLEVEL\t…` (the time as ISO with a zone here; epochs are DuckDB's). */
static int zap_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    if (n == 0 || !is_digit(s[0])) return 0;
    const unsigned char *tab = memchr(s, '\t', n);
    if (tab == NULL) return 0;
    size_t stamp = (size_t)(tab - s), i = stamp + 1, level = i;
    while (i < n && ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z')) i++;
    if (i == level || i >= n || s[i] != '\t') return 0;
    if (!time_us(s, stamp, us)) return 1;
    *what = E_NO_STREAM;
    return payload(s + i + 1, n - i - 1, line);
}

/* `"…"` (no escape inside: DuckDB's unquoting is then left to it) or \S+ at s[i], followed by `next`: its end. */
static size_t value_then(const unsigned char *s, size_t n, size_t i, const char *next, int *quoted) {
    size_t len = strlen(next);
    *quoted = 0;
    if (i < n && s[i] == '"') {
        const unsigned char *q = memchr(s + i + 1, '"', n - i - 1);
        if (q && (size_t)(q - s) + 1 + len <= n && memcmp(q + 1, next, len) == 0) {
            *quoted = 1;
            return (size_t)(q - s) + 1;
        }
    }
    size_t j = i;
    while (j < n && !is_space(s[j])) j++;
    return j > i && j + len <= n && memcmp(s + j, next, len) == 0 ? j : 0;
}

/* Go slog's TextHandler and logrus: `time=… level=… [source=… ]msg=… key=value …`, the record the pairs
 * after msg. */
static int slog_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    int quoted;
    if (n < 5 || memcmp(s, "time=", 5) != 0) return 0;
    size_t t = value_then(s, n, 5, " level=", &quoted);
    if (t == 0) return 0;
    size_t i = t + 7;
    while (i < n && !is_space(s[i])) i++;
    if (i == t + 7 || i >= n || s[i] != ' ') return 0;
    i++;
    if (n - i >= 7 && memcmp(s + i, "source=", 7) == 0) {
        size_t j = i + 7;
        while (j < n && !is_space(s[j])) j++;
        if (j > i + 7 && j + 5 <= n && s[j] == ' ' && memcmp(s + j + 1, "msg=", 4) == 0) i = j + 1;
    }
    if (n - i < 4 || memcmp(s + i, "msg=", 4) != 0) return 0;
    i += 4;
    size_t m = i;
    if (i < n && s[i] == '"') { /* "(?:[^"\\]|\\.)*", else \S* */
        size_t j = i + 1;
        while (j < n && s[j] != '"') j += s[j] == '\\' && j + 1 < n ? 2 : 1;
        if (j < n && s[j] == '"') m = j + 1;
    }
    if (m == i)
        while (m < n && !is_space(s[m])) m++;
    if (m < n && s[m] == ' ') m++;
    const unsigned char *stamp = s + 5 + quoted;
    size_t stamp_n = t - 5 - 2 * (size_t)quoted;
    if (quoted && memchr(stamp, '\\', stamp_n)) return 1;
    if (!time_us(stamp, stamp_n, us)) return 1;
    *what = E_NO_STREAM;
    set(line, C_TEXT, s + m, n - m);
    return 0;
}

/* ---- JSON platforms: Loki, Cloud Logging, CloudWatch, Datadog, Elasticsearch (one entry per line) ---- */

/* Their entries nest objects (Loki's labels, Cloud Logging's resource.labels, a hit's _source): read_object
 * finds the wanted paths as json_extract_string(line, [paths]) does, reading every other value strictly and
 * leaving it (JSON DuckDB's reader takes and this one does not, a trailing comma or NaN say, defers). A wanted
 * value is absent, null, a string (decoded) or another value: its raw text, which json_extract_string gives for
 * a plain integer and which the callers otherwise read only as "present" (an empty object aside). */

#define PATH_KEYS 5       /* the most keys of a wanted path, and a NULL after them */

/* J_RENDERED: an object or array of a PathSet.rendered path, kept as its text (text_of's rendering) */
enum { J_ABSENT = 0, J_NULL = 1, J_STRING = 2, J_OTHER = 3, J_RENDERED = 4 };

typedef struct {
    const char *keys[PATH_KEYS]; /* $.a."b.c" as {"a", "b.c"} */
    unsigned char lens[PATH_KEYS];
} JPath;
#define P1(a) {{a}, {sizeof a - 1}}
#define P2(a, b) {{a, b}, {sizeof a - 1, sizeof b - 1}}
#define P3(a, b, c) {{a, b, c}, {sizeof a - 1, sizeof b - 1, sizeof c - 1}}
#define P4(a, b, c, d) {{a, b, c, d}, {sizeof a - 1, sizeof b - 1, sizeof c - 1, sizeof d - 1}}

#define KEY_LENS 64 /* keys this long or longer share matching's last bucket */

/* One key the paths have at a depth, and the paths whose key there it is. */
typedef struct {
    const char *key;
    size_t len;
    uint32_t paths;
} DepthKey;

/* A reader's wanted paths, indexed once (index_paths, at import) for matching and wanted_value. */
typedef struct {
    const JPath *paths;
    int npaths;                          /* at most 32 */
    uint32_t by_len[PATH_KEYS][KEY_LENS]; /* by depth and key length there: the keys (of `keys`) of that length */
    DepthKey keys[PATH_KEYS][32];        /* by depth: its distinct keys (the twelve labels.* of Loki's share one),
                                          * so a key read is compared with each once, not with every path's */
    uint32_t ends[PATH_KEYS];            /* by depth: the paths whose last key is there */
    uint32_t rendered;                   /* paths whose object or array is rendered as it is read (only its text
                                          * is wanted: one pass instead of skip_value's and then render_value's) */
} PathSet;
#define PATH_SET(table) {table, (int)(sizeof table / sizeof table[0]), {{0}}, {{{0}}}, {0}, 0}
#define RENDERED_PATH_SET(table, paths) {table, (int)(sizeof table / sizeof table[0]), {{0}}, {{{0}}}, {0}, paths}

static void index_paths(PathSet *set) {
    int nkeys[PATH_KEYS] = {0};
    for (int p = 0; p < set->npaths; p++)
        for (int d = 0; d < PATH_KEYS && set->paths[p].keys[d]; d++) {
            const char *key = set->paths[p].keys[d];
            size_t len = set->paths[p].lens[d];
            int k = 0;
            while (k < nkeys[d] && !(set->keys[d][k].len == len && memcmp(set->keys[d][k].key, key, len) == 0)) k++;
            if (k == nkeys[d]) set->keys[d][nkeys[d]++] = (DepthKey){key, len, 0};
            set->keys[d][k].paths |= 1u << p;
            set->by_len[d][len < KEY_LENS ? len : KEY_LENS - 1] |= 1u << k;
            if (d + 1 == PATH_KEYS || set->paths[p].keys[d + 1] == NULL) set->ends[d] |= 1u << p;
        }
}

typedef struct {
    const PathSet *set;
    unsigned char *scratch;
    size_t used;
    uint32_t seen[PATH_KEYS]; /* by depth: the paths whose key there was met (a wanted key twice defers) */
    int type[32];
    const unsigned char *v[32];
    size_t len[32];
} JRead;

/* A JRead set to read one entry: no path found yet (a path's v and len are read only once its type says it was). */
static void jread_start(JRead *j, const PathSet *set, unsigned char *scratch) {
    j->set = set, j->scratch = scratch, j->used = 0;
    memset(j->seen, 0, sizeof j->seen);
    memset(j->type, 0, sizeof j->type);
}

static int present(const JRead *j, int p) { return j->type[p] >= J_STRING; } /* not NULL in the SQL */

/* Where the literal (true, false, null) or number at s[i] ends, JSON_FAIL where none starts there. */
static size_t scalar_end(const unsigned char *s, size_t n, size_t i) {
    size_t end = s[i] == 't' || s[i] == 'f' || s[i] == 'n' ? json_literal_end(s, n, i) : json_number_end(s, n, i);
    return end ? end : JSON_FAIL;
}

/* A value read and left (json_value_end: an escape in a string may be a surrogate pair, not \u0000): where it
 * ends. */
static size_t skip_value(const unsigned char *s, size_t n, size_t i) {
    size_t end = json_value_end(s, n, i, 0, JSON_PAIRS);
    return end ? end : JSON_FAIL;
}

/* The paths of `active` whose key `depth` down is s[key:key+klen]. */
static uint32_t matching(const JRead *r, uint32_t active, int depth, const unsigned char *key, size_t klen) {
    const DepthKey *keys = r->set->keys[depth];
    for (uint32_t left = r->set->by_len[depth][klen < KEY_LENS ? klen : KEY_LENS - 1]; left; left &= left - 1) {
        const DepthKey *want = &keys[__builtin_ctz(left)];
        if (want->len == klen && (klen == 0 || want->key[0] == key[0]) && memcmp(want->key, key, klen) == 0)
            return want->paths & active; /* the keys differ: at most one is this one */
    }
    return 0;
}

static void found(JRead *r, uint32_t paths, int type, const unsigned char *v, size_t len) {
    for (; paths; paths &= paths - 1) {
        int p = __builtin_ctz(paths);
        r->type[p] = type, r->v[p] = v, r->len[p] = len;
    }
}

static size_t read_object(JRead *r, const unsigned char *s, size_t n, size_t i, int depth, uint32_t active);
static size_t rendered_value(JRead *r, const unsigned char *s, size_t n, size_t i, uint32_t leaf);

/* The value at s[i] of a key on the way to the paths `wanted`: theirs where they end here, else the object to
 * go into (under a value of another kind they are absent, as in DuckDB). */
static size_t wanted_value(JRead *r, const unsigned char *s, size_t n, size_t i, int depth, uint32_t wanted) {
    uint32_t leaf = wanted & r->set->ends[depth];
    size_t start = i;
    if (i < n && s[i] == '"') {
        const unsigned char *v;
        size_t len;
        if ((i = string_at(s, n, i, r->scratch + r->used, &v, &len)) == JSON_FAIL) return i;
        found(r, leaf, J_STRING, v, len);
        if (leaf && v == r->scratch + r->used) r->used += len;
        return i;
    }
    if (i < n && s[i] == '{' && wanted != leaf) i = read_object(r, s, n, i, depth + 1, wanted & ~leaf);
    else if (leaf && (leaf & r->set->rendered) == leaf && i < n && (s[i] == '{' || s[i] == '['))
        return rendered_value(r, s, n, i, leaf);
    else i = skip_value(s, n, i);
    if (i != JSON_FAIL) found(r, leaf, i - start == 4 && s[start] == 'n' ? J_NULL : J_OTHER, s + start, i - start);
    return i;
}

/* An object at s[i] `depth` keys down the paths `active`: where it ends (JSON_FAIL to defer: a key escaped, a
 * wanted one twice, which DuckDB reads the first of, or JSON this reader does not take). */
static size_t read_object(JRead *r, const unsigned char *s, size_t n, size_t i, int depth, uint32_t active) {
    i = json_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return i + 1;
    for (;;) {
        if (i >= n || s[i] != '"') return JSON_FAIL;
        size_t key = ++i;
        i = plain_run(s, n, i);
        if (i >= n || s[i] != '"') return JSON_FAIL;
        uint32_t wanted = matching(r, active, depth, s + key, i - key);
        if (wanted & r->seen[depth]) return JSON_FAIL;
        r->seen[depth] |= wanted;
        i = json_ws(s, n, i + 1);
        if (i >= n || s[i] != ':') return JSON_FAIL;
        i = json_ws(s, n, i + 1);
        i = wanted ? wanted_value(r, s, n, i, depth, wanted) : skip_value(s, n, i);
        if (i == JSON_FAIL) return i;
        i = json_ws(s, n, i);
        if (i < n && s[i] == '}') return i + 1;
        if (i >= n || s[i] != ',') return JSON_FAIL;
        i = json_ws(s, n, i + 1);
    }
}

/* An entry, s[0] being its '{': its wanted values in j (type, v, len by path); 1 to defer. */
static int platform_entry(JRead *j, const unsigned char *s, size_t n) {
    size_t i = read_object(j, s, n, 0, 0, j->set->npaths == 32 ? ~0u : (1u << j->set->npaths) - 1);
    return i == JSON_FAIL || json_ws(s, n, i) != n;
}

/* mm_ts of a present value: an RFC 3339 time with a zone, or epoch seconds (9 to 11 digits) or milliseconds
 * (12 to 14) computed as DuckDB does (a double, rounded to the microsecond); 1 to defer anything else. */
static int platform_time(const JRead *j, int p, int64_t *us) {
    const unsigned char *v = j->v[p];
    size_t n = j->len[p], k = 0;
    if (j->type[p] == J_STRING && memchr(v, '-', n)) return !time_us(v, n, us);
    while (k < n && is_digit(v[k])) k++;
    if (k != n || n < 9 || n > 14) return 1;
    double t = 0;
    for (k = 0; k < n; k++) t = t * 10 + (v[k] - '0');
    *us = (int64_t)nearbyint((n >= 12 ? t / 1000 : t) * 1e6);
    return 0;
}

/* The time of the first present of paths `from` (-1 ends them): NO_TIME where none is. */
static int first_time(const JRead *j, const int *from, int64_t *us) {
    for (; *from >= 0; from++)
        if (present(j, *from)) return platform_time(j, *from, us);
    *us = NO_TIME;
    return 0;
}

/* One JSON string's character as yyjson writes it (DuckDB's rendering): '"' and '\\' escaped, the control
 * characters as \b \t \n \f \r or \u00XX in capitals, everything else as UTF-8. */
static size_t rendered_char(unsigned char *t, unsigned cp) {
    static const char hex[] = "0123456789ABCDEF", *const short_escape = "btn?fr";
    if (cp == '"' || cp == '\\') { t[0] = '\\', t[1] = (unsigned char)cp; return 2; }
    if (cp >= 0x20) return put_utf8(t, cp);
    if (cp >= 8 && cp <= 13 && short_escape[cp - 8] != '?') { t[0] = '\\', t[1] = short_escape[cp - 8]; return 2; }
    memcpy(t, "\\u00", 4);
    t[4] = hex[cp >> 4], t[5] = hex[cp & 15];
    return 6;
}

/* A JSON string at s[i] (its quote) read as json_string reads it and written as yyjson writes it (DuckDB's
 * rendering: rendered_char), at t + *m (COPY_SLACK bytes of room past it): where it ends, or JSON_FAIL where
 * json_string fails. */
static size_t render_string_at(const unsigned char *s, size_t n, size_t i, unsigned char *t, size_t *m) {
    size_t j = i + 1, k = *m;
    t[k++] = '"';
    for (;;) {
        copy_run(s, n, &j, t, &k);
        if (j >= n || s[j] < 0x20) return JSON_FAIL;
        if (s[j] == '"') break;
        long cp = json_escape(s, n, &j, JSON_PAIRS);
        if (cp < 0) return JSON_FAIL;
        k += rendered_char(t + k, (unsigned)cp);
    }
    t[k++] = '"';
    *m = k;
    return j + 1;
}

typedef struct {
    const unsigned char *s; /* a value json_string and skip_value have read (so valid: nothing here fails) */
    size_t n, i;
    unsigned char *out;     /* its rendering, never longer than the value (copy_run's COPY_SLACK past it) */
    size_t m;
} Render;

static void render_string(Render *w) { w->i = render_string_at(w->s, w->n, w->i, w->out, &w->m); }

/* A number DuckDB writes its own way: a fraction or an exponent (as a double), or -0 (as 0); a two-character
 * negative one is taken for it too. */
static int own_number(const unsigned char *s, size_t n) {
    if (n == 2 && s[0] == '-') return 1;
    for (size_t k = 0; k < n; k++)
        if (s[k] == '.' || s[k] == 'e' || s[k] == 'E') return 1;
    return 0;
}

/* A value minified as DuckDB renders it (json_extract_string of an object, array, number or literal): one pass
 * over the value skip_value read (so valid JSON, spaces and tabs its only whitespace), strings rendered, spaces
 * dropped, the rest copied; 1 to defer a number it writes its own way (own_number; an integer stays). */
static int render_value(Render *w) {
    while (w->i < w->n) {
        unsigned char c = w->s[w->i];
        if (c == '"') render_string(w);
        else if (json_space(c)) w->i++;
        else if (c == '-' || is_digit(c)) {
            size_t start = w->i, end = json_number_end(w->s, w->n, start);
            if (own_number(w->s + start, end - start)) return 1;
            memcpy(w->out + w->m, w->s + start, end - start);
            w->m += end - start, w->i = end;
        } else w->out[w->m++] = c, w->i++; /* a bracket, ',' or ':', or a literal's letter */
    }
    return 0;
}

/* skip_value's reading of the value at s[i] (the same JSON taken, the same depth, the same end), writing
 * render_value's rendering of it at t + *m as it goes; *own set where render_value would defer (a number DuckDB
 * writes its own way). */
static size_t render_read(const unsigned char *s, size_t n, size_t i, int depth, unsigned char *t, size_t *m,
                          int *own) {
    if (i >= n) return JSON_FAIL;
    unsigned char c = s[i], close = c == '{' ? '}' : ']';
    if (c == '"') return render_string_at(s, n, i, t, m);
    if (c != '{' && c != '[') {
        size_t end = scalar_end(s, n, i);
        if (end == JSON_FAIL) return end;
        if ((c == '-' || is_digit(c)) && own_number(s + i, end - i)) *own = 1;
        memcpy(t + *m, s + i, end - i);
        *m += end - i;
        return end;
    }
    if (depth >= JSON_DEPTH) return JSON_FAIL;
    t[(*m)++] = c;
    i = json_ws(s, n, i + 1);
    if (i < n && s[i] == close) { t[(*m)++] = close; return i + 1; }
    for (;;) {
        if (close == '}') {
            if (i >= n || s[i] != '"' || (i = render_string_at(s, n, i, t, m)) == JSON_FAIL) return JSON_FAIL;
            i = json_ws(s, n, i);
            if (i >= n || s[i] != ':') return JSON_FAIL;
            t[(*m)++] = ':';
            i = json_ws(s, n, i + 1);
        }
        if ((i = render_read(s, n, i, depth + 1, t, m, own)) == JSON_FAIL) return i;
        i = json_ws(s, n, i);
        if (i < n && s[i] == close) { t[(*m)++] = close; return i + 1; }
        if (i >= n || s[i] != ',') return JSON_FAIL;
        t[(*m)++] = ',';
        i = json_ws(s, n, i + 1);
    }
}

/* The object or array at s[i] of the paths `leaf` (PathSet.rendered): read and rendered in one pass, kept in the
 * scratch as J_RENDERED; one holding a number DuckDB writes its own way stays J_OTHER (text_of defers it). */
static size_t rendered_value(JRead *r, const unsigned char *s, size_t n, size_t i, uint32_t leaf) {
    unsigned char *out = r->scratch + r->used;
    size_t m = 0;
    int own = 0;
    size_t end = render_read(s, n, i, 0, out, &m, &own);
    if (end == JSON_FAIL) return end;
    if (own) found(r, leaf, J_OTHER, s + i, end - i);
    else found(r, leaf, J_RENDERED, out, m), r->used += m;
    return end;
}

/* The text json_extract_string gives of a present value: the string, or the rendering (into the scratch). */
static int text_of(JRead *j, int p, const unsigned char **t, size_t *tn) {
    if (j->type[p] == J_STRING || j->type[p] == J_RENDERED) { *t = j->v[p], *tn = j->len[p]; return 0; }
    Render w = {j->v[p], j->len[p], 0, j->scratch + j->used, 0};
    if (render_value(&w)) return 1;
    *t = w.out, *tn = w.m, j->used += w.m;
    return 0;
}

/* An entry's text from a present value, holding no newline (envelope_lines would split it); 1 to defer. Only a
 * decoded string can hold one: a string left in the line is the line's own bytes, and a rendering writes \n. */
static int platform_text(JRead *j, int p, Line *line) {
    const unsigned char *t;
    size_t tn;
    if (!present(j, p) || text_of(j, p, &t, &tn)) return 1;
    int decoded = j->type[p] == J_STRING && t >= j->scratch && t < j->scratch + j->used;
    if (decoded && memchr(t, '\n', tn)) return 1;
    set(line, C_TEXT, t, tn);
    return 0;
}

/* coalesce of the paths `from` (-1 ends them) into a provenance column; 1 to defer. */
static int first_string(JRead *j, const int *from, Line *line, int col) {
    for (; *from >= 0; from++) {
        if (!present(j, *from)) continue;
        const unsigned char *t;
        size_t tn;
        if (text_of(j, *from, &t, &tn)) return 1;
        set(line, col, t, tn);
        return 0;
    }
    return 0;
}

/* A stream named stdout or stderr, or none; 1 to defer another. */
static int named_stream(const JRead *j, int p, int *what) {
    if (!present(j, p)) *what = E_NO_STREAM;
    else if (j->type[p] == J_STRING && equals(j->v[p], j->len[p], "stdout")) *what = E_STDOUT;
    else if (j->type[p] == J_STRING && equals(j->v[p], j->len[p], "stderr")) *what = E_STDERR;
    else return 1;
    return 0;
}

/* mm_record_like: 1 when the text is a record (starts with '{' past ltrim's spaces, or holds a key=value pair),
 * 0 when not, -1 to defer (ltrim takes Unicode spaces too: a text starting with another character holding a '{'). */
static int record_like(const unsigned char *m, size_t n) {
    size_t i = 0;
    while (i < n && m[i] == ' ') i++;
    if (i < n && m[i] == '{') return 1;
    if (i < n && m[i] >= 0x80 && memchr(m + i, '{', n - i)) return -1;
    return holds_pair(m, n);
}

static int platform_provenance(JRead *j, const int *host, const int *unit, const int *container, Line *line) {
    return first_string(j, host, line, C_HOST) || first_string(j, unit, line, C_UNIT)
           || first_string(j, container, line, C_CONTAINER);
}

#define LABEL(k) P2("labels", k)
static const JPath LOKI[] = {P1("line"), P1("timestamp"), LABEL("stream"), LABEL("host"), LABEL("hostname"),
                             LABEL("instance"), LABEL("node_name"), LABEL("pod"), LABEL("container"),
                             LABEL("container_name"), LABEL("unit"), LABEL("service_name"), LABEL("app"),
                             LABEL("job")};
static PathSet LOKI_SET = PATH_SET(LOKI);

/* Loki (logcli --output=jsonl): an entry has its line and timestamp; the labels name the rest. */
static int loki_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const int stamp[] = {1, -1}, host[] = {3, 4, 5, 6, -1}, unit[] = {10, 11, 12, 13, -1},
                     container[] = {7, 8, 9, -1};
    JRead j;
    jread_start(&j, &LOKI_SET, r->scratch);
    if (n == 0 || s[0] != '{') return 0;
    if (platform_entry(&j, s, n)) return 1;
    if (!present(&j, 0) || !present(&j, 1)) return 0; /* no entry: the line passed on */
    if (platform_text(&j, 0, line) || first_time(&j, stamp, us) || named_stream(&j, 2, what)) return 1;
    return platform_provenance(&j, host, unit, container, line);
}

#define RESOURCE(k) P3("resource", "labels", k)
static const JPath CLOUD_LOGGING[] = {P1("textPayload"), P1("jsonPayload"), P1("timestamp"), P1("receiveTimestamp"),
                                      P1("logName"), LABEL("compute.googleapis.com/resource_name"),
                                      RESOURCE("node_name"), RESOURCE("instance_id"), RESOURCE("pod_name"),
                                      RESOURCE("container_name"), RESOURCE("service_name"), RESOURCE("job_name"),
                                      RESOURCE("function_name"), P1("insertId"), LABEL("instanceId"),
                                      LABEL("container.googleapis.com/pod_name"), RESOURCE("pod_id")};
static PathSet CLOUD_LOGGING_SET = RENDERED_PATH_SET(CLOUD_LOGGING, 1u << 1); /* jsonPayload: its text */

static int ends_with(const unsigned char *s, size_t n, const char *tail) {
    size_t k = strlen(tail);
    return n >= k && memcmp(s + n - k, tail, k) == 0;
}

/* Google Cloud Logging: an entry has a logName or an insertId; its text the textPayload, else the jsonPayload
 * rendered (a JSON record); an entry with neither has no text (NULL): DuckDB's. */
static int cloud_logging_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us,
                              int *what) {
    /* the container: the most specific sender named, the pod, a Cloud Run instance, a legacy GKE entry's pod (in
     * its labels or as pod_id), else the container */
    static const int stamp[] = {2, 3, -1}, host[] = {5, 6, 7, -1}, unit[] = {10, 11, 12, -1},
                     container[] = {8, 14, 15, 16, 9, -1};
    JRead j;
    jread_start(&j, &CLOUD_LOGGING_SET, r->scratch);
    if (n == 0 || s[0] != '{') return 0;
    if (platform_entry(&j, s, n)) return 1;
    if (!present(&j, 4) && !present(&j, 13)) return 0;
    if (platform_text(&j, present(&j, 0) ? 0 : 1, line) || first_time(&j, stamp, us)) return 1;
    const unsigned char *name;
    size_t len;
    *what = E_NO_STREAM; /* regexp_extract(logName, '/logs/(stdout|stderr)$', 1) */
    if (present(&j, 4) && text_of(&j, 4, &name, &len)) return 1;
    if (present(&j, 4) && ends_with(name, len, "/logs/stdout")) *what = E_STDOUT;
    if (present(&j, 4) && ends_with(name, len, "/logs/stderr")) *what = E_STDERR;
    return platform_provenance(&j, host, unit, container, line);
}

static const JPath CLOUDWATCH[] = {P1("message"), P1("timestamp"), P1("logStreamName"), P1("logGroupName")};
static PathSet CLOUDWATCH_SET = PATH_SET(CLOUDWATCH);

/* CloudWatch Logs events, one per line: message and timestamp (epoch milliseconds); the stream the container
 * (else the file's path names it: unwrapper.FROM_PATH), the group the unit. */
static int cloudwatch_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const int stamp[] = {1, -1}, unit[] = {3, -1}, container[] = {2, -1}, none[] = {-1};
    JRead j;
    jread_start(&j, &CLOUDWATCH_SET, r->scratch);
    if (n == 0 || s[0] != '{') return 0;
    if (platform_entry(&j, s, n)) return 1;
    if (!present(&j, 0) || !present(&j, 1)) return 0;
    if (platform_text(&j, 0, line) || first_time(&j, stamp, us)) return 1;
    *what = E_NO_STREAM;
    return platform_provenance(&j, none, unit, container, line);
}

static const JPath DATADOG[] = {P1("message"), P1("attributes"), P1("date"), P1("timestamp"), P1("host"),
                                P1("service")};
static PathSet DATADOG_SET = PATH_SET(DATADOG);

/* Datadog's record: the message when it is one, else the attributes (rendered where not a string), else the
 * message. */
static int datadog_text(JRead *j, Line *line) {
    const unsigned char *m;
    size_t mn;
    if (!present(j, 0)) return platform_text(j, 1, line);
    if (text_of(j, 0, &m, &mn)) return 1;
    int like = record_like(m, mn);
    if (like < 0) return 1;
    if (!like && present(j, 1)) return platform_text(j, 1, line);
    if (memchr(m, '\n', mn)) return 1;
    set(line, C_TEXT, m, mn);
    return 0;
}

/* Datadog log archives: an entry has a message or attributes; date (or timestamp), host, service. */
static int datadog_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    static const int stamp[] = {2, 3, -1}, host[] = {4, -1}, unit[] = {5, -1}, none[] = {-1};
    JRead j;
    jread_start(&j, &DATADOG_SET, r->scratch);
    if (n == 0 || s[0] != '{') return 0;
    if (platform_entry(&j, s, n)) return 1;
    if (!present(&j, 0) && !present(&j, 1)) return 0;
    if (datadog_text(&j, line) || first_time(&j, stamp, us)) return 1;
    *what = E_NO_STREAM;
    return platform_provenance(&j, host, unit, none, line);
}

/* An Elasticsearch document's paths, bare (0-8) and under a hit's _source (9-17), then _source itself (18). */
static const JPath ELASTIC[] = {
    P1("message"), P2("log", "original"), P2("event", "original"), P1("@timestamp"), P2("host", "name"),
    P2("host", "hostname"), P2("container", "name"), P3("kubernetes", "pod", "name"), P2("service", "name"),
    P2("_source", "message"), P3("_source", "log", "original"), P3("_source", "event", "original"),
    P2("_source", "@timestamp"), P3("_source", "host", "name"), P3("_source", "host", "hostname"),
    P3("_source", "container", "name"), P4("_source", "kubernetes", "pod", "name"), P3("_source", "service", "name"),
    P1("_source")};
static PathSet ELASTIC_SET = PATH_SET(ELASTIC);

/* Elasticsearch / OpenSearch documents, bare or as hits: the record is the first of message, log.original and
 * event.original that is one, else the document (its _source) rendered; every such line is an entry. */
static int elastic_line(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what) {
    JRead j;
    jread_start(&j, &ELASTIC_SET, r->scratch);
    if (n == 0 || s[0] != '{') return 0;
    if (platform_entry(&j, s, n)) return 1;
    if (j.type[18] != J_ABSENT && !(j.type[18] == J_OTHER && j.v[18][0] == '{')) return 1; /* a _source of another kind */
    int b = j.type[18] == J_OTHER ? 9 : 0, like = 0;
    const unsigned char *t = NULL;
    size_t tn = 0;
    for (int k = b; k < b + 3 && !like; k++)
        if (present(&j, k) && (text_of(&j, k, &t, &tn) || (like = record_like(t, tn)) < 0)) return 1;
    if (!like) { /* the document itself: the hit's _source, or the line's object */
        if (b == 0) j.type[18] = J_OTHER, j.v[18] = s, j.len[18] = n;
        if (text_of(&j, 18, &t, &tn)) return 1;
    }
    const int stamp[] = {b + 3, -1}, host[] = {b + 4, b + 5, -1}, unit[] = {b + 8, -1}, container[] = {b + 7, b + 6, -1};
    if (memchr(t, '\n', tn) || first_time(&j, stamp, us)) return 1;
    set(line, C_TEXT, t, tn);
    *what = E_NO_STREAM;
    return platform_provenance(&j, host, unit, container, line);
}

/* ---- the range ---- */

typedef int (*LineReader)(const Reading *r, const unsigned char *s, size_t n, Line *line, int64_t *us, int *what);

/* The readers by the names forensics.ingest.envelope_table gives them (its Envelope.c_reader). Their kind numbers
 * are the table's: configure() is handed the names in kind order (C_KINDS, 1 first) and refuses (ImportError) a
 * name of no reader here, or a reader left unnamed. */
static const struct {
    const char *name;
    LineReader read;
} READERS[] = {
    {"DOCKER", docker_line}, {"CRI", cri_line}, {"TIMESTAMPED", timestamped_line}, {"COMPOSE", compose_line},
    {"SYSLOG", syslog_line}, {"RSYSLOG", rsyslog_line}, {"JOURNALD", journald_line},
    {"PYTHON_LOGGING", python_logging_line}, {"STRUCTLOG", structlog_line}, {"ZAP", zap_line}, {"SLOG", slog_line},
    {"RFC5424", rfc5424_line}, {"LOKI", loki_line}, {"CLOUD_LOGGING", cloud_logging_line},
    {"CLOUDWATCH", cloudwatch_line}, {"DATADOG", datadog_line}, {"ELASTIC", elastic_line},
};
#define NREADERS ((int)(sizeof READERS / sizeof READERS[0]))
static LineReader by_kind[NREADERS + 1]; /* by kind number, as configure() was told (NULL: none yet) */

static LineReader reader_of(int kind) { return kind >= 1 && kind <= NREADERS ? by_kind[kind] : NULL; }

/* Each physical line of b[i:end): a line that is no entry is its own text, without provenance. */
static int unwrap_range(Out *o, const unsigned char *b, size_t i, size_t end, Reading *r) {
    LineReader read = reader_of(r->kind);
    /* a line's strings and a rendering, and what copy_run writes past them */
    if ((r->scratch = malloc(2 * (end - i) + 1 + COPY_SLACK)) == NULL) return U_NOMEM;
    int result = 0;
    while (i < end && result == 0) {
        int clean;
        size_t stop = clean_line_stop(b, i, end, &clean), n = stop - i;
        if (reserve(o)) { result = U_NOMEM; break; }
        if (!clean && (memchr(b + i, '\r', n) || !valid_utf8(b + i, n))) { result = U_DEFER; break; }
        Line line = {{0}, {0}};
        int64_t us = 0;
        int what = E_NONE;
        if (read(r, b + i, n, &line, &us, &what)) { result = U_DEFER; break; }
        if (what == E_NONE) line = (Line){{b + i}, {n}};
        if (put_line(o, &line)) { result = U_NOMEM; break; }
        o->what[o->rows] = (int8_t)what;
        o->ts[o->rows] = us;
        if (what != E_NONE && us != NO_TIME) o->ts_valid[o->rows / 8] |= (uint8_t)(1u << (o->rows % 8));
        else o->ts_nulls++;
        o->rows++;
        i = stop + 1;
    }
    free(r->scratch);
    return result;
}

/* ---- Python ---- */


static void free_out(Out *o) {
    for (int c = 0; c < NCOLS; c++) free(o->cols[c].valid), free(o->cols[c].offsets), free(o->cols[c].data);
    free(o->what), free(o->ts), free(o->ts_valid);
}

/* A column's buffers (validity, offsets, data, nulls), the blocks owning them. */
static PyObject *column_of(Column *col, size_t rows) {
    return Py_BuildValue("(NNNn)", block_of(col->valid, (Py_ssize_t)((rows + 7) / 8)),
                         block_of(col->offsets, (Py_ssize_t)((rows + 1) * sizeof(int32_t))),
                         block_of(col->data, (Py_ssize_t)col->len), (Py_ssize_t)col->nulls);
}

/* unwrap(buffer, start, end, kind, year, last_month) -> (rows, flags, columns, what, ts (valid, data, nulls)): columns
 * are the text, host, unit, container and pid, each (valid, offsets, data, nulls), a row per physical line (its
 * number is its row's). rows is 0 and flags DEFER when the file is for DuckDB to unwrap. */
static PyObject *unwrap(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    Reading r = {0};
    if (!PyArg_ParseTuple(args, "y*nniii", &view, &start, &end, &r.kind, &r.year, &r.last_month)) return NULL;
    if (start < 0 || end > view.len || start > end || reader_of(r.kind) == NULL) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, by_kind[1] ? "unwrap: a range inside the buffer, and a kind of this module"
                                                     : "unwrap: the readers' kinds were not configured (configure(C_KINDS))");
        return NULL;
    }
    Out o = {0};
    int result;
    Py_BEGIN_ALLOW_THREADS
    result = unwrap_range(&o, view.buf, (size_t)start, (size_t)end, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (result == U_NOMEM || (result == 0 && reserve(&o))) {
        free_out(&o);
        return PyErr_NoMemory();
    }
    if (result == U_DEFER) {
        free_out(&o);
        return Py_BuildValue("(ni)", (Py_ssize_t)0, U_DEFER);
    }
    size_t rows = o.rows;
    PyObject *cols = PyTuple_New(NCOLS);
    if (cols == NULL) {
        free_out(&o);
        return NULL;
    }
    for (int c = 0; c < NCOLS; c++) PyTuple_SET_ITEM(cols, c, column_of(&o.cols[c], rows));
    return Py_BuildValue("(niNN(NNn))", (Py_ssize_t)rows, 0, cols, block_of(o.what, (Py_ssize_t)rows),
                         block_of(o.ts_valid, (Py_ssize_t)((rows + 7) / 8)),
                         block_of(o.ts, (Py_ssize_t)(rows * sizeof(int64_t))), (Py_ssize_t)o.ts_nulls);
}

/* configure(names): kind k is the reader names[k - 1]; every reader of READERS named once, or ImportError. */
static PyObject *configure(PyObject *self, PyObject *names) {
    PyObject *seq = PySequence_Fast(names, "configure: a sequence of the C readers' names, in kind order");
    if (seq == NULL) return NULL;
    LineReader kinds[NREADERS + 1] = {NULL};
    int agree = PySequence_Fast_GET_SIZE(seq) == NREADERS;
    for (int k = 1; agree && k <= NREADERS; k++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, k - 1);
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (text == NULL && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        agree = 0;
        for (int r = 0; text && r < NREADERS; r++)
            if (strcmp(text, READERS[r].name) == 0) {
                for (int j = 1; j < k; j++)
                    if (kinds[j] == READERS[r].read) text = NULL; /* named twice */
                if (text) kinds[k] = READERS[r].read, agree = 1;
                break;
            }
    }
    Py_DECREF(seq);
    if (!agree) {
        memset(by_kind, 0, sizeof by_kind);
        PyObject *built = PyTuple_New(NREADERS);
        for (int r = 0; built && r < NREADERS; r++) {
            PyObject *name = PyUnicode_FromString(READERS[r].name);
            if (name == NULL) Py_CLEAR(built);
            else PyTuple_SET_ITEM(built, r, name);
        }
        if (built == NULL) return NULL;
        PyErr_Format(PyExc_ImportError,
                     "forensics.ingest.readers._unwrap was built with the readers %R, but forensics.ingest.envelope_table names %R: "
                     "rebuild it (python setup.py build_ext --inplace, or reinstall mailmortem)", built, names);
        Py_DECREF(built);
        return NULL;
    }
    memcpy(by_kind, kinds, sizeof by_kind);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_O,
     "configure(names) -> None: the C readers' names in kind order (forensics.ingest.envelope_table.C_KINDS), "
     "each of this module's readers once (ImportError otherwise); unwrap() takes those numbers after it"},
    {"unwrap", unwrap, METH_VARARGS,
     "unwrap(buffer, start, end, kind, year, last_month) -> (rows, flags, columns, what, ts) of a range"},
    {NULL, NULL, 0, NULL},
};

PyMODINIT_FUNC PyInit__unwrap(void) {
    PathSet *sets[] = {&LOKI_SET, &CLOUD_LOGGING_SET, &CLOUDWATCH_SET, &DATADOG_SET, &ELASTIC_SET};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) index_paths(sets[k]);
    return module_with("forensics.ingest.readers._unwrap", methods, CONSTANTS);
}
