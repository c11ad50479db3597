/* forensics/ingest/readers/_grammar.h: the grammars the compiled readers (forensics/ingest/readers/_logfmt.c, _jsonl.c, _unwrap.c) share, each
 * written once: a range's lines and its cut between two threads, the logfmt key rule, and strict JSON (RFC 8259)
 * token by token, with one validating scanner. Each reader walks the objects it reads itself (it looks keys up as
 * it goes) but takes every token from here. Static inline functions: each extension compiles its own copy, and a
 * caller's constant arguments (the escapes it takes) fold away. Include after _typing.h.
 */
#ifndef MAILMORTEM_GRAMMAR_H
#define MAILMORTEM_GRAMMAR_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- eight bytes at a time ---- */

static inline uint64_t load8(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint32_t load4(const unsigned char *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

#define EVERY_BYTE(c) (0x0101010101010101ull * (c))

/* 0x80 in the bytes of w below c (c <= 0x80). Every such byte is flagged, and a byte more significant than one may
 * be flagged too (a borrow), so the first flag is checked before it is believed. */
static inline uint64_t bytes_below(uint64_t w, unsigned char c) {
    return (w - EVERY_BYTE(c)) & ~w & EVERY_BYTE(0x80);
}
static inline uint64_t zero_bytes(uint64_t w) { return bytes_below(w, 1); }

/* The index, in memory order, of the first byte flagged in m (m != 0). */
static inline size_t first_flagged(uint64_t m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (size_t)__builtin_clzll(m) >> 3;
#else
    return (size_t)__builtin_ctzll(m) >> 3;
#endif
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline size_t digits_end(const unsigned char *s, size_t n, size_t i) {
    while (i < n && is_digit(s[i])) i++;
    return i;
}

/* ---- lines: what reading a range found, and where its lines end (as DuckDB's reader splits them) ---- */

enum { F_DIRTY = 1, F_CRLF = 2, F_LONE = 4, F_NOMEM = 8 }; /* invalid UTF-8 or too long; \r\n; a lone \n or \r */

/* Where the physical line from b[i] stops: its '\n', or end. */
static inline size_t line_stop(const unsigned char *b, size_t i, size_t end) {
    const unsigned char *nl = memchr(b + i, '\n', end - i);
    return nl ? (size_t)(nl - b) : end;
}

/* Where the physical line at b[i] ends (its '\n', or end), and in *clean whether it is ASCII without a CR: one pass
 * (32 bytes at a time with SSE2, stopping at a control character or a byte past ASCII: one signed comparison finds
 * both) over what were three, memchr's for the newline, then for a CR, and the UTF-8 check. Where a CR or a byte past
 * ASCII comes first, *clean is 0 and the newline is memchr's. */
static inline size_t clean_line_stop(const unsigned char *b, size_t i, size_t end, int *clean) {
    size_t k = i;
    for (;;) {
#if defined(__SSE2__)
        const __m128i space = _mm_set1_epi8(0x20);
        for (; k + 32 <= end; k += 32) {
            __m128i lo = _mm_loadu_si128((const __m128i *)(b + k)), hi = _mm_loadu_si128((const __m128i *)(b + k + 16));
            unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(lo, space))
                            | (unsigned)_mm_movemask_epi8(_mm_cmplt_epi8(hi, space)) << 16;
            if (mask) {
                k += (size_t)__builtin_ctz(mask);
                break;
            }
        }
#endif
        while (k < end && b[k] >= 0x20 && b[k] < 0x80) k++;
        if (k == end || b[k] == '\n') {
            *clean = 1;
            return k;
        }
        if (b[k] == '\r' || b[k] >= 0x80) break;
        k++; /* another control character (a tab, say): the line goes on */
    }
    *clean = 0;
    const unsigned char *nl_at = memchr(b + k, '\n', end - k);
    return nl_at ? (size_t)(nl_at - b) : end;
}

/* The end of the line from b[i] (i < end): lines end at \n, \r\n or a lone \r, and the last may have no ending.
 * *next is where the line after it starts; the ending seen is added to *flags (F_CRLF, F_LONE). */
static inline size_t line_end(const unsigned char *b, size_t i, size_t end, size_t *next, int *flags) {
    size_t stop = line_stop(b, i, end);
    const unsigned char *cr = memchr(b + i, '\r', stop - i);
    if (cr && (size_t)(cr - b) + 1 == stop && stop < end) {
        *next = stop + 1, *flags |= F_CRLF;
        return stop - 1;
    }
    if (cr) {
        *next = (size_t)(cr - b) + 1, *flags |= F_LONE;
        return (size_t)(cr - b);
    }
    if (stop < end) *flags |= F_LONE;
    *next = stop + 1;
    return stop;
}

/* Where to cut [start, end) for the second thread: just after a \n near its middle (end when none). */
static inline size_t split_point(const unsigned char *b, size_t start, size_t end) {
    size_t mid = start + (end - start) / 2;
    const unsigned char *nl = memchr(b + mid, '\n', end - mid);
    return nl ? (size_t)(nl - b) + 1 : end;
}

/* ---- logfmt: a key is [^\s="]+ followed by '=' (\s is RE2's: space, \t, \n, \f, \r) ---- */

/* The bytes the logfmt regexes tell apart, by table: one load per byte where the scans test each byte. */
enum { C_SPACE = 1, C_EQUALS = 2, C_QUOTE = 4, C_BACKSLASH = 8 };
static const uint8_t byte_class[256] __attribute__((unused)) = {
    ['\t'] = C_SPACE, ['\n'] = C_SPACE, ['\f'] = C_SPACE, ['\r'] = C_SPACE, [' '] = C_SPACE, /* RE2's \s */
    ['='] = C_EQUALS, ['"'] = C_QUOTE, ['\\'] = C_BACKSLASH,
};
#define KEY_STOPS (C_SPACE | C_EQUALS | C_QUOTE) /* the bytes a key holds none of */

static inline int is_space(unsigned char c) { return byte_class[c] & C_SPACE; }

/* 0x80 in the bytes of w that may be of the classes given (every byte of them is flagged). Each \s is below 0x21
 * and '"' is 0x22, so one test finds both when both are looked for. */
static inline uint64_t may_be_of(uint64_t w, uint8_t classes) {
    uint64_t m = 0;
    if ((classes & C_SPACE) && (classes & C_QUOTE)) m |= bytes_below(w, '"' + 1);
    else if (classes & C_SPACE) m |= bytes_below(w, ' ' + 1);
    else if (classes & C_QUOTE) m |= zero_bytes(w ^ EVERY_BYTE('"'));
    if (classes & C_EQUALS) m |= zero_bytes(w ^ EVERY_BYTE('='));
    if (classes & C_BACKSLASH) m |= zero_bytes(w ^ EVERY_BYTE('\\'));
    return m;
}

/* The first index in [i, limit) of a byte of the classes given, or limit: a word of eight bytes at a time while
 * eight are left (no byte at or past limit is read), where most of the scans' bytes are of none of them. */
static inline size_t scan_to(const unsigned char *s, size_t i, size_t limit, uint8_t classes) {
    while (limit - i >= 8) {
        uint64_t m = may_be_of(load8(s + i), classes);
        if (m == 0) {
            i += 8;
            continue;
        }
        i += first_flagged(m);
        if (byte_class[s[i]] & classes) return i;
        i++; /* a control byte that is no \s, a '!' (or a borrow's flag): go on after it */
    }
    while (i < limit && !(byte_class[s[i]] & classes)) i++;
    return i;
}

/* The key rule: the end of the key run [^\s="]+ from i when '=' follows it (the '='), else 0. */
static inline size_t key_end(const unsigned char *s, size_t n, size_t i) {
    size_t j = scan_to(s, i, n, KEY_STOPS);
    return (j > i && j < n && s[j] == '=') ? j : 0;
}

/* ---- strict JSON (RFC 8259), token by token ---- */

#define JSON_DEPTH 64   /* containers nested deeper are left to DuckDB (no unbounded recursion here) */
#define COPY_SLACK 16   /* json_string may write this far past a decoded string's end: its room must have it */
enum { JSON_PAIRS = 1, JSON_NUL = 2 }; /* escapes a reader takes beyond the plain ones: surrogate pairs, \u0000 */

static inline int json_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline size_t json_ws(const unsigned char *s, size_t n, size_t i) {
    while (i < n && json_space(s[i])) i++;
    return i;
}

static inline int hex4(const unsigned char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d = is_digit((unsigned char)c) ? c - '0'
                               : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : 16;
        if (d > 15) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

static inline size_t put_utf8(unsigned char *t, unsigned cp) {
    if (cp < 0x80) { t[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { t[0] = 0xC0 | cp >> 6; t[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) { t[0] = 0xE0 | cp >> 12; t[1] = 0x80 | (cp >> 6 & 0x3F); t[2] = 0x80 | (cp & 0x3F); return 3; }
    t[0] = 0xF0 | cp >> 18; t[1] = 0x80 | (cp >> 12 & 0x3F); t[2] = 0x80 | (cp >> 6 & 0x3F); t[3] = 0x80 | (cp & 0x3F);
    return 4;
}

static inline int plain_byte(unsigned char c) { return c != '"' && c != '\\' && c >= 0x20; }

#if defined(__SSE2__)
/* The bytes of w that end a run of plain string bytes: a '"', a '\\' or a control character (c <= 0x1F). */
static inline int stops16(__m128i w) {
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), control = _mm_set1_epi8(0x1F);
    __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(w, quote), _mm_cmpeq_epi8(w, backslash)),
                                _mm_cmpeq_epi8(_mm_min_epu8(w, control), w));
    return _mm_movemask_epi8(stop);
}
#endif

/* Where the run of plain string bytes from s[i] ends (at a '"', a '\\', a control character, or n), sixteen bytes
 * at a time with SSE2 (every x86-64 has it), else eight: most of a JSON line is such runs. */
static inline size_t plain_run(const unsigned char *s, size_t n, size_t i) {
#if defined(__SSE2__)
    while (i + 16 <= n) {
        int mask = stops16(_mm_loadu_si128((const __m128i *)(s + i)));
        if (mask) return i + (size_t)__builtin_ctz((unsigned)mask);
        i += 16;
    }
#else
    while (i + 8 <= n) {
        uint64_t w = load8(s + i), q = w ^ EVERY_BYTE('"'), b = w ^ EVERY_BYTE('\\');
        if (zero_bytes(q) | zero_bytes(b) | bytes_below(w, 0x20)) break;
        i += 8;
    }
#endif
    while (i < n && plain_byte(s[i])) i++;
    return i;
}

/* The run of plain bytes from s[*j] copied to t + *m (perhaps COPY_SLACK bytes more, overwritten later), both
 * moved past it: with SSE2 each sixteen bytes are stored as they are scanned, so the short runs between the
 * escapes of a string cost no call. */
static inline void copy_run(const unsigned char *s, size_t n, size_t *j, unsigned char *t, size_t *m) {
    size_t i = *j, k = *m;
#if defined(__SSE2__)
    while (i + 16 <= n) {
        __m128i w = _mm_loadu_si128((const __m128i *)(s + i));
        _mm_storeu_si128((__m128i *)(t + k), w);
        int mask = stops16(w);
        if (mask) {
            unsigned step = (unsigned)__builtin_ctz((unsigned)mask);
            *j = i + step, *m = k + step;
            return;
        }
        i += 16, k += 16;
    }
#endif
    while (i < n && plain_byte(s[i])) t[k++] = s[i++];
    *j = i, *m = k;
}

/* The escape at s[*j] (its backslash): its code point (a surrogate pair as one, where `take` has JSON_PAIRS), *j
 * moved past it; -1 for one the reader does not take (\u0000 without JSON_NUL, any surrogate without JSON_PAIRS,
 * a lone one, an unknown escape, no end). */
static inline long json_escape(const unsigned char *s, size_t n, size_t *j, int take) {
    size_t i = *j;
    if (i + 1 >= n) return -1;
    unsigned e = s[i + 1], cp;
    i += 2;
    switch (e) {
    case '"': case '\\': case '/': cp = e; break;
    case 'b': cp = '\b'; break;
    case 'f': cp = '\f'; break;
    case 'n': cp = '\n'; break;
    case 'r': cp = '\r'; break;
    case 't': cp = '\t'; break;
    case 'u':
        if (i + 4 > n || !hex4(s + i, &cp) || (cp == 0 && !(take & JSON_NUL)) || (cp >= 0xDC00 && cp <= 0xDFFF))
            return -1;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (!(take & JSON_PAIRS) || i + 6 > n || s[i] != '\\' || s[i + 1] != 'u' || !hex4(s + i + 2, &lo)
                || lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
        }
        break;
    default: return -1;
    }
    *j = i;
    return (long)cp;
}

/* A string at s[*i] (its opening quote) decoded into t (room for its length and COPY_SLACK), *i moved past its
 * closing quote: the decoded length, or -1 for anything json_escape does not take, a raw control character or no
 * end. */
static inline long json_string(const unsigned char *s, size_t n, size_t *i, unsigned char *t, int take) {
    size_t j = *i + 1, m = 0;
    for (;;) {
        copy_run(s, n, &j, t, &m);
        if (j >= n || s[j] < 0x20) return -1;
        if (s[j] == '"') break;
        long cp = json_escape(s, n, &j, take);
        if (cp < 0) return -1;
        m += put_utf8(t + m, (unsigned)cp);
    }
    *i = j + 1;
    return (long)m;
}

/* json_string's judgement of the string at s[i] without decoding it: where it ends, or 0. */
static inline size_t json_string_end(const unsigned char *s, size_t n, size_t i, int take) {
    for (i = plain_run(s, n, i + 1); i < n && s[i] != '"'; i = plain_run(s, n, i)) {
        if (s[i] < 0x20 || json_escape(s, n, &i, take) < 0) return 0; /* else a '\\': plain_run stops at no other */
    }
    return i < n ? i + 1 : 0;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at s[i]: its end, or 0. */
static inline size_t json_number_end(const unsigned char *s, size_t n, size_t i) {
    size_t j = i < n && s[i] == '-' ? i + 1 : i;
    if (j >= n || !is_digit(s[j])) return 0;
    j = s[j] == '0' ? j + 1 : digits_end(s, n, j);
    if (j < n && s[j] == '.') {
        size_t f = j + 1;
        if ((j = digits_end(s, n, f)) == f) return 0;
    }
    if (j < n && (s[j] | 32) == 'e') {
        size_t e = j + 1 < n && (s[j + 1] == '+' || s[j + 1] == '-') ? j + 2 : j + 1;
        if ((j = digits_end(s, n, e)) == e) return 0;
    }
    return j;
}

/* true, false or null at s[i]: its end, or 0. */
static inline size_t json_literal_end(const unsigned char *s, size_t n, size_t i) {
    switch (s[i]) {
    case 't': return n - i >= 4 && memcmp(s + i, "true", 4) == 0 ? i + 4 : 0;
    case 'f': return n - i >= 5 && memcmp(s + i, "false", 5) == 0 ? i + 5 : 0;
    case 'n': return n - i >= 4 && memcmp(s + i, "null", 4) == 0 ? i + 4 : 0;
    default: return 0;
    }
}

static inline size_t json_value_end(const unsigned char *s, size_t n, size_t i, int depth, int take);

/* An object or an array at s[i] (its '{' or '['): members (a string, ':', a value) or values, ',' between. */
static inline size_t json_container_end(const unsigned char *s, size_t n, size_t i, int depth, int take) {
    unsigned char close = s[i] == '{' ? '}' : ']';
    if (depth >= JSON_DEPTH) return 0;
    i = json_ws(s, n, i + 1);
    if (i < n && s[i] == close) return i + 1;
    for (;;) {
        if (close == '}') {
            if (i >= n || s[i] != '"' || (i = json_string_end(s, n, i, take)) == 0) return 0;
            i = json_ws(s, n, i);
            if (i >= n || s[i] != ':') return 0;
            i = json_ws(s, n, i + 1);
        }
        if ((i = json_value_end(s, n, i, depth + 1, take)) == 0) return 0;
        i = json_ws(s, n, i);
        if (i < n && s[i] == close) return i + 1;
        if (i >= n || s[i] != ',') return 0;
        i = json_ws(s, n, i + 1);
    }
}

/* The strict JSON value at s[i] (no whitespace before it), its strings' escapes those of `take`, its containers
 * nested at most JSON_DEPTH deep from `depth`: its end, or 0 when it is none. */
static inline size_t json_value_end(const unsigned char *s, size_t n, size_t i, int depth, int take) {
    if (i >= n) return 0;
    switch (s[i]) {
    case '{': case '[': return json_container_end(s, n, i, depth, take);
    case '"': return json_string_end(s, n, i, take);
    case 't': case 'f': case 'n': return json_literal_end(s, n, i);
    default: return json_number_end(s, n, i);
    }
}

#endif
