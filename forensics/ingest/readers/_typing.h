/* forensics/ingest/readers/_typing.h: what both compiled readers (forensics/ingest/readers/_logfmt.c, forensics/ingest/readers/_jsonl.c) share: Arrow string
 * columns grown row by row, strict UTF-8 and DuckDB's blank, and the typing they do rather than SQL (the
 * recipient's normal form, the msg_id, ISO timestamps with a zone), byte for byte as the SQL does (tests hold
 * them equal). Static functions: each extension compiles its own copy.
 */
#ifndef MAILMORTEM_TYPING_H
#define MAILMORTEM_TYPING_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable column buffers ---- */

typedef struct {
    char *data;
    size_t len, cap;
    int32_t *offsets; /* rows + 1 */
    uint8_t *valid;   /* Arrow validity bitmap */
    size_t nulls;
} Column;

static int grow(void **p, size_t *cap, size_t need, size_t unit) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *q = realloc(*p, cap2 * unit);
    if (q == NULL) return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

/* An Arrow validity bitmap grown from `had` rows to `cap` rows, the new bits cleared (null until set). */
static int grow_bitmap(uint8_t **bits, size_t had, size_t cap) {
    uint8_t *grown = realloc(*bits, cap / 8 + 1);
    if (grown == NULL) return -1;
    memset(grown + had / 8, 0, cap / 8 + 1 - had / 8);
    *bits = grown;
    return 0;
}

static int is_set(const uint8_t *valid, size_t row) { return valid[row / 8] >> (row % 8) & 1; }

/* Room for `cap` rows in a batch being built, where there was room for `had` (0: the first call, which starts
 * each column's offsets at 0): each text column's offsets and validity, the per-row code (a logfmt line's
 * problem, a JSON line's settled/blank/deferred), the timestamps and their validity. */
static int grow_rows(Column *cols, int ncols, int8_t **code, int64_t **ts, uint8_t **ts_valid, size_t had,
                     size_t cap) {
    for (int c = 0; c < ncols; c++) {
        int32_t *o = realloc(cols[c].offsets, (cap + 1) * sizeof(int32_t));
        if (o == NULL) return -1;
        cols[c].offsets = o;
        if (had == 0) o[0] = 0;
        if (grow_bitmap(&cols[c].valid, had, cap)) return -1;
    }
    int8_t *k = realloc(*code, cap);
    if (k == NULL) return -1;
    *code = k;
    int64_t *t = realloc(*ts, cap * sizeof(int64_t));
    if (t == NULL) return -1;
    *ts = t;
    return grow_bitmap(ts_valid, had, cap);
}

/* An empty value copies nothing: a column holding only empty values has no data yet (NULL), and memcpy to NULL is
 * undefined even for no bytes. */
static int put(Column *col, size_t row, const char *s, size_t n) {
    if (grow((void **)&col->data, &col->cap, col->len + n, 1)) return -1;
    if (n) memcpy(col->data + col->len, s, n);
    col->len += n;
    col->offsets[row + 1] = (int32_t)col->len;
    col->valid[row / 8] |= (uint8_t)(1u << (row % 8));
    return 0;
}

static void put_null(Column *col, size_t row) {
    col->offsets[row + 1] = (int32_t)col->len;
    col->nulls++;
}

/* Strict UTF-8 (what DuckDB's reader accepts): no overlongs, surrogates or code points above U+10FFFF. */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        while (i + 32 <= n) { /* ASCII, 32 bytes at a time: most of a log line */
            uint64_t w[4];
            memcpy(w, s + i, 32);
            if ((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ull) break;
            i += 32;
        }
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return 0;
        if (i + len > n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += len;
    }
    return 1;
}

/* The byte length of the Unicode space separator (Zs: what DuckDB's trim() takes) starting at s[0] (0: none). */
static size_t zs_at_start(const unsigned char *s, size_t n) {
    if (s[0] == ' ') return 1;
    if (n >= 2 && s[0] == 0xC2 && s[1] == 0xA0) return 2; /* U+00A0 */
    if (n < 3) return 0;
    if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3; /* U+1680 */
    if (s[0] == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xAF)) return 3; /* U+2000–U+200A, U+202F */
    if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3; /* U+205F */
    if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* trim(line) = '': DuckDB's trim() takes the Unicode space separators (Zs), not tabs or other controls. */
static int is_blank(const unsigned char *s, size_t n) {
    size_t k;
    for (size_t i = 0; i < n; i += k)
        if (!(k = zs_at_start(s + i, n - i))) return 0;
    return 1;
}

/* ---- typing done here rather than in SQL (queries/ingest.sql's typed_columns takes these when given) ---- */

/* The byte length of the forensics.addresses.WHITESPACE code point starting at s[0] (0: none). */
static size_t ws_at_start(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? 1 : 0;
    if (n >= 2 && c == 0xC2) return (s[1] == 0x85 || s[1] == 0xA0) ? 2 : 0; /* U+0085, U+00A0 */
    if (n < 3) return 0;
    if (c == 0xE1) return s[1] == 0x9A && s[2] == 0x80 ? 3 : 0; /* U+1680 */
    if (c == 0xE2 && s[1] == 0x80) /* U+2000–U+200B, U+2028, U+2029, U+202F */
        return (s[2] <= 0x8B || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF) ? 3 : 0;
    if (c == 0xE2) return s[1] == 0x81 && s[2] == 0x9F ? 3 : 0; /* U+205F */
    if (c == 0xE3) return s[1] == 0x80 && s[2] == 0x80 ? 3 : 0; /* U+3000 */
    if (c == 0xEF) return s[1] == 0xBB && s[2] == 0xBF ? 3 : 0; /* U+FEFF */
    return 0;
}

typedef size_t (*Spaces)(const unsigned char *s, size_t n); /* zs_at_start or ws_at_start */

/* s[*from, *to) with the code points of one of those sets trimmed from both ends; s is valid UTF-8, so a code
 * point of k bytes ends the text when it starts k bytes before the end. Always inlined, so that at_start is
 * inlined too rather than called through its pointer, several times a value. */
static inline __attribute__((always_inline)) void trim_spaces(Spaces at_start, const unsigned char *s,
                                                              size_t *from, size_t *to) {
    size_t k;
    while (*from < *to && (k = at_start(s + *from, *to - *from))) *from += k;
    for (int trimmed = 1; trimmed && *from < *to;) {
        trimmed = 0;
        for (k = 1; k <= 3 && k <= *to - *from && !trimmed; k++)
            if (at_start(s + *to - k, k) == k) *to -= k, trimmed = 1;
    }
}

/* forensics.addresses.normalize_address on UTF-8: trimmed; a value ending in '>' keeps what lies between the
 * last '<' and it, trimmed again; ASCII A-Z lower-cased; empty is NULL. 1 when it differs from the text. */
static int put_address(Column *col, size_t row, const unsigned char *s, size_t n) {
    size_t from = 0, to = n;
    trim_spaces(ws_at_start, s, &from, &to);
    if (to > from && s[to - 1] == '>') {
        size_t lt = to - 1;
        while (lt > from && s[lt - 1] != '<') lt--;
        if (lt > from) { /* s[lt - 1] is the last '<' before the '>' */
            from = lt;
            to--;
            trim_spaces(ws_at_start, s, &from, &to);
        }
    }
    if (from == to) {
        put_null(col, row);
        return 1;
    }
    if (put(col, row, (const char *)s + from, to - from)) return -1;
    int differs = from > 0 || to < n;
    char *d = col->data + col->len - (to - from);
    for (size_t i = 0; i < to - from; i++)
        if (d[i] >= 'A' && d[i] <= 'Z') d[i] = (char)(d[i] + 32), differs = 1;
    return differs;
}

/* mm_msg_id: trimmed (DuckDB's trim()), one pair of surrounding <> dropped, trimmed again; empty is NULL. 1 when
 * it differs from the text. */
static int put_msg_id(Column *col, size_t row, const unsigned char *s, size_t n) {
    size_t from = 0, to = n;
    trim_spaces(zs_at_start, s, &from, &to);
    if (to > from && s[from] == '<' && s[to - 1] == '>') {
        from++, to--;
        trim_spaces(zs_at_start, s, &from, &to);
    }
    if (from == to) {
        put_null(col, row);
        return 1;
    }
    return put(col, row, (const char *)s + from, to - from) ? -1 : from > 0 || to < n;
}

static int digits(const unsigned char *s, int n, int *value) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *value = v;
    return 1;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

static int days_in_month(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) ? 29 : days[m - 1];
}

/* Only the common ISO form with an explicit zone, YYYY-MM-DD[T ]hh:mm:ss[.f{1,6}](Z|±hh:mm), exactly (no
 * space around it): microseconds since the epoch in *us. Any other text (0) is left to the SQL's mm_ts, which
 * reads it in the session's zone; tests/test_tokenizer_properties.py holds the two equal. */
static int iso_utc_us(const unsigned char *s, size_t n, int64_t *us) {
    int y, mo, d, h, mi, se, oh = 0, om = 0, frac = 0;
    if (n < 20 || n > 32 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') || s[13] != ':'
        || s[16] != ':' || !digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d)
        || !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi) || !digits(s + 17, 2, &se))
        return 0;
    size_t i = 19;
    if (s[i] == '.') {
        size_t k = ++i;
        while (i < n && i - k < 7 && s[i] >= '0' && s[i] <= '9') frac = frac * 10 + (s[i++] - '0');
        if (i == k || i - k > 6) return 0;
        for (size_t pad = i - k; pad < 6; pad++) frac *= 10;
    }
    int zulu = i + 1 == n && s[i] == 'Z';
    int offset = i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':' && digits(s + i + 1, 2, &oh)
                 && digits(s + i + 4, 2, &om) && oh <= 15 && om <= 59;
    if (!zulu && !offset) return 0;
    if (offset && s[i] == '-') oh = -oh, om = -om;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59)
        return 0;
    int64_t seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - (oh * 3600 + om * 60);
    *us = seconds * 1000000 + frac;
    return 1;
}

typedef int (*Typer)(Column *col, size_t row, const unsigned char *s, size_t n);

#endif
