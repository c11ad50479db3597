/* forensics.ingest.readers._logfmt: the compiled logfmt tokenizer (optional; the SQL in queries/ingest_logfmt.sql is the fallback).
 *
 * tokenize(buffer, start, end, fields, threads, keep_lines) reads the lines of buffer[start:end) (which starts at
 * a line and ends after one) into the text columns that stage_logfmt computes in SQL: the line (without
 * keep_lines, only where typed_columns may keep it: see may_be_skipped), each canonical field's
 * unquoted text (the first of its keys, in order, present on the line) and why the line is not a record. It
 * mirrors those regexes byte for byte (see forensics/ingest/tokenizer.py), on up to two threads with the GIL
 * released, and hands back Arrow buffers (validity, int32 offsets, data) that pyarrow wraps without a copy.
 * It also types what DuckDB spent most of its time on per line, exactly as the SQL does (tests hold them
 * equal): the recipient's normal form, the msg_id (mm_msg_id), and the common ISO timestamps with a zone
 * (timestamp[us, UTC]; any other is NULL, left to SQL's mm_ts).
 * A range holding invalid UTF-8 or an overlong line is reported dirty (the caller repairs the file as the
 * SQL path does); line-ending styles seen are reported (DuckDB's reader treats mixed ones its own way).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "_typing.h"
#include "_grammar.h"
#define MM_BLOCK_NAME "forensics.ingest.readers._logfmt.Block"
#include "_buffers.h"
#include "_fields.h"

#define MAX_LINE 7900000 /* forensics.ingest.repair.MAX_LINE_BYTES: a longer line is read from a repaired copy */
#define HASH_SIZE 1024 /* slot_of takes 10 bits */
#define MAX_KEYS 512
#define MAX_FIELD_KEYS 256


enum { P_NONE = 0, P_BLANK = 1, P_NO_PAIRS = 2 };

/* The numbers the Python side reads of this module. */
static const IntConstant CONSTANTS[] = {
    {"DIRTY", F_DIRTY}, {"CRLF", F_CRLF}, {"LONE", F_LONE}, {"NFIELDS", NFIELDS}, {"MAX_KEYS", MAX_KEYS},
    {"MAX_FIELD_KEYS", MAX_FIELD_KEYS}, {"MAX_LINE", MAX_LINE}, {NULL, 0},
};


/* What a key is looked up by (key_ends): its length and two words holding its first and last bytes, which are all of
 * its bytes when it has at most 16 of them (the bytes between are compared too when it has more). */
typedef struct {
    uint64_t head, tail;
    size_t len;
} KeyEnds;

typedef struct {
    const char *key; /* the key, without space or '=' */
    KeyEnds ends;
    int field;
} Key;

typedef struct {
    Key keys[HASH_SIZE]; /* the vocabulary's keys; a key's id is its index in keys */
    int nkeys;
    size_t longest; /* the longest key's length: a longer run of key bytes is no key of the vocabulary */
    int16_t table[HASH_SIZE]; /* open addressing: key id + 1, 0 = empty */
    int field_keys[NFIELDS][MAX_FIELD_KEYS]; /* key ids of each field, best first */
    int nfield_keys[NFIELDS];
} Vocabulary;

typedef struct {
    Batch batch; /* first: the shared code (_fields.h) takes a job as its Batch; its code is a line's problem */
    const Vocabulary *vocab;
    int keep_lines; /* every line's text (keep_raw); else only where SQL may find the line is not a record */
    /* per line scratch: where each key was first seen after a space (value position + 1, 0 = absent), and the
     * span of its first key=value pair (shady lines) */
    size_t seen_at[HASH_SIZE];
    uint32_t fields_seen; /* bit f: a key of field f has its seen_at (most fields' keys are absent from a line) */
    size_t pair_start[HASH_SIZE], pair_len[HASH_SIZE];
    int pair_seen[HASH_SIZE];
} Job;

/* ---- the vocabulary's keys, looked up by their ends ---- */

/* s[0, n) (n > 0) as a KeyEnds, reading no byte outside it. */
static inline KeyEnds key_ends(const unsigned char *s, size_t n) {
    if (n >= 8) return (KeyEnds){load8(s), load8(s + n - 8), n};
    if (n >= 4) return (KeyEnds){load4(s), load4(s + n - 4), n};
    return (KeyEnds){(uint64_t)s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16, 0, n};
}

static inline uint32_t slot_of(KeyEnds e) { /* HASH_SIZE is 1024: the multiply's top 10 bits */
    uint64_t h = (e.head ^ (e.tail * 0x9e3779b97f4a7c15ull >> 7) ^ e.len) * 0xff51afd7ed558ccdull;
    return (uint32_t)(h >> 54);
}

static inline int same_key(const Key *key, KeyEnds e, const unsigned char *s) {
    return key->ends.len == e.len && key->ends.head == e.head && key->ends.tail == e.tail
           && (e.len <= 16 || memcmp(key->key + 8, s + 8, e.len - 16) == 0);
}

/* The id of the key s[0, n) (n > 0), or -1. Inlined where a line's keys are looked up (a call cost more than
 * most lookups). */
static inline __attribute__((always_inline)) int key_id(const Vocabulary *v, const unsigned char *s, size_t n) {
    KeyEnds e = key_ends(s, n);
    for (uint32_t slot = slot_of(e);; slot = (slot + 1) & (HASH_SIZE - 1)) {
        int id = v->table[slot] - 1;
        if (id < 0) return -1;
        if (same_key(&v->keys[id], e, s)) return id;
    }
}

/* ---- the regexes of stage_logfmt, by hand ---- */

/* key_end and key_id in one: the id of the vocabulary key whose run [^\s="]+ starts at i and is followed by
 * '=' (-1: none). The run is given up once it is longer than any key; *stop is where its scan stopped (no space
 * lies between i and it). */
static int key_at(const Vocabulary *v, const unsigned char *s, size_t n, size_t i, size_t *stop) {
    size_t limit = n - i > v->longest ? i + v->longest + 1 : n;
    size_t j = scan_to(s, i, limit, KEY_STOPS);
    *stop = j;
    if (j == i || j == limit || s[j] != '=') return -1; /* no '=' after it, or longer than any key */
    return key_id(v, s + i, j - i);
}

/* "(?:[^"\\]|\\.)*" from i (s[i] is the opening quote): the index after its closing quote, or 0. */
static size_t quoted_end(const unsigned char *s, size_t n, size_t i) {
    size_t j = i + 1;
    while ((j = scan_to(s, j, n, C_QUOTE | C_BACKSLASH)) < n) {
        if (s[j] == '"') return j + 1;
        if (j + 1 >= n) return 0; /* a backslash, and nothing after it */
        j += 2;
    }
    return 0;
}

/* ("(?:[^"\\]|\\.)*"|[^\s"]*) from i: the end of the value. */
static size_t value_end(const unsigned char *s, size_t n, size_t i) {
    if (i < n && s[i] == '"') {
        size_t q = quoted_end(s, n, i);
        return q ? q : i;
    }
    return scan_to(s, i, n, C_SPACE | C_QUOTE);
}

/* From j inside a quoted value opened by `="`: whether ` k=` follows (\s[^\s="]+=) before its closing quote
 * (*stop: where the scan stopped: that quote, an escape cut off by the line's end, or the end). */
static int holds_pair(const unsigned char *s, size_t n, size_t j, size_t *stop) {
    int shady = 0;
    while ((j = scan_to(s, j, n, C_SPACE | C_QUOTE | C_BACKSLASH)) < n) {
        uint8_t c = byte_class[s[j]];
        if ((c & C_SPACE) && key_end(s, n, j + 1)) { shady = 1; break; }
        if (c & C_QUOTE) break;
        if (c & C_BACKSLASH) {
            if (j + 1 >= n) break;
            j += 2;
        } else {
            j++;
        }
    }
    *stop = j;
    return shady;
}

/* regexp_matches(line, '="(?:[^"\\]|\\.)*?\s[^\s="]+='): a quoted value that holds ` k=`. Each `="` is found
 * by a memchr for its quote. */
static int is_shady(const unsigned char *s, size_t n) {
    size_t i = 0; /* the next `="` to try starts at i or later */
    while (i + 1 < n) {
        const unsigned char *quote = memchr(s + i + 1, '"', n - i - 1);
        if (quote == NULL) return 0;
        size_t q = (size_t)(quote - s);
        if (s[q - 1] != '=') { i = q; continue; }
        size_t j;
        if (holds_pair(s, n, q + 1, &j)) return 1;
        i = j - 1; /* the next `="` starts no earlier than the quote this scan stopped at, less one */
    }
    return 0;
}

/* ^\s*([0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)(?:\s|$): the span of the leading timestamp. */
static int lead_ts(const unsigned char *s, size_t n, size_t *from, size_t *to) {
    size_t i = 0;
    while (i < n && is_space(s[i])) i++;
    size_t b = i;
    static const char shape[] = "dddd-dd-dd";
    for (int k = 0; k < 10; k++, i++) {
        if (i >= n) return 0;
        if (shape[k] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != '-') return 0;
    }
    if (i >= n || (s[i] != 'T' && s[i] != ' ')) return 0;
    i++;
    size_t r = i;
    while (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == ':' || s[i] == '.')) i++;
    if (i == r) return 0;
    if (i < n && s[i] == 'Z') {
        if (i + 1 == n || is_space(s[i + 1])) i++;
    } else if (i < n && (s[i] == '+' || s[i] == '-')) {
        size_t z = i + 1;
        while (z < n && ((s[z] >= '0' && s[z] <= '9') || s[z] == ':')) z++;
        if (z > i + 1 && (z == n || is_space(s[z]))) i = z;
    }
    if (i < n && !is_space(s[i])) return 0;
    *from = b;
    *to = i;
    return 1;
}

/* mm_unquote: a quoted value loses its quotes, then \" becomes " and then \\ becomes \ (two passes). */
static int put_unquoted(Job *job, Column *col, size_t row, const unsigned char *v, size_t n) {
    if (n < 2 || v[0] != '"' || v[n - 1] != '"') return put(col, row, (const char *)v, n);
    if (grow((void **)&job->batch.scratch, &job->batch.scratch_cap, n, 1)) return -1;
    char *t = (char *)job->batch.scratch;
    size_t m = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        if (v[i] == '\\' && i + 2 < n && v[i + 1] == '"') {
            t[m++] = '"';
            i++;
        } else {
            t[m++] = (char)v[i];
        }
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (t[i] == '\\' && i + 1 < m && t[i + 1] == '\\') i++;
        t[k++] = t[i];
    }
    return put(col, row, t, k);
}

/* ---- one line ---- */

/* Where each vocabulary key first occurs as ` key=` in ' ' || line (seen_at), and on a shady line each key's
 * first pair of regexp_extract_all(l, '\s([^\s="]+)=(value)') (pair_*). Returns the number of keys seen. */
static void find_keys(Job *job, const unsigned char *s, size_t n, int shady) {
    const Vocabulary *v = job->vocab;
    for (int id = 0; id < v->nkeys; id++) job->seen_at[id] = 0;
    job->fields_seen = 0;
    /* a key starts the line or follows a space: from one such start to the next by memchr */
    for (size_t i = 0; i < n;) {
        size_t stop;
        int id = key_at(v, s, n, i, &stop);
        if (id >= 0 && !job->seen_at[id]) {
            job->seen_at[id] = stop + 2;
            job->fields_seen |= 1u << v->keys[id].field;
        }
        const unsigned char *space = memchr(s + stop, ' ', n - stop);
        if (space == NULL) break;
        i = (size_t)(space - s) + 1;
    }
    if (!shady) return;
    for (int id = 0; id < v->nkeys; id++) job->pair_seen[id] = 0; /* read on shady lines only */
    /* l = ' ' || line: l[0] is a space, l[p] is s[p - 1] */
    size_t p = 0, ln = n + 1;
    while (p < ln) {
        unsigned char c = p == 0 ? ' ' : s[p - 1];
        size_t e = is_space(c) ? key_end(s, n, p) : 0; /* the key starts at l[p + 1] = s[p] */
        if (!e) { p++; continue; }
        size_t vend = value_end(s, n, e + 1);
        int id = key_id(v, s + p, e - p);
        if (id >= 0 && !job->pair_seen[id]) {
            job->pair_seen[id] = 1;
            job->pair_start[id] = e + 1;
            job->pair_len[id] = vend - (e + 1);
        }
        p = vend + 1;
    }
}

/* The key whose value field f takes (-1: none): the first of its keys on the line; on a shady line the first that
 * also has a pair. */
static int field_key(const Job *job, int f, int shady) {
    const Vocabulary *v = job->vocab;
    if (!(job->fields_seen >> f & 1)) return -1;
    for (int k = 0; k < v->nfield_keys[f]; k++) {
        int id = v->field_keys[f][k];
        if (job->seen_at[id] && (!shady || job->pair_seen[id])) return id;
    }
    return -1;
}

static int line_fields(Job *job, size_t row, const unsigned char *s, size_t n) {
    int shady = is_shady(s, n);
    find_keys(job, s, n, shady);
    for (int f = 0; f < NFIELDS; f++) {
        Column *col = &job->batch.cols[f + 1];
        int id = field_key(job, f, shady);
        if (id >= 0) {
            size_t from = shady ? job->pair_start[id] : job->seen_at[id] - 1;
            size_t len = shady ? job->pair_len[id] : value_end(s, n, from) - from;
            if (put_unquoted(job, col, row, s + from, len)) return -1;
            continue;
        }
        size_t a, b;
        if (f == 0 && lead_ts(s, n, &a, &b)) { /* ts: else the timestamp leading the line */
            if (put(col, row, (const char *)s + a, b - a)) return -1;
            continue;
        }
        put_null(col, row);
    }
    return 0;
}


/* Whether typed_columns may make this row a skipped line (whose text it keeps): a problem found here, a time
 * not typed here (mm_ts may not read it either), or no event (trim()med empty, as no_event) and no msg_id.
 * Other rows' text is not sent at all: moving every line's text into DuckDB cost more than tokenizing it. */
static int may_be_skipped(const Job *job, size_t row) {
    if (job->batch.code[row] != P_NONE || !is_set(job->batch.ts_valid, row)) return 1;
    const Column *event = &job->batch.cols[EVENT_FIELD + 1], *msg_id = &job->batch.cols[TYPED_COL + 1];
    int no_event = !is_set(event->valid, row)
                   || is_blank((const unsigned char *)event->data + event->offsets[row],
                               (size_t)(event->offsets[row + 1] - event->offsets[row]));
    return no_event && !is_set(msg_id->valid, row);
}

static int add_line(Job *job, const unsigned char *s, size_t n) {
    if (n > MAX_LINE || !valid_utf8(s, n)) {
        job->batch.flags |= F_DIRTY;
        return 1;
    }
    if (reserve_rows(&job->batch)) return -1;
    size_t row = job->batch.rows;
    if (n == 0) {
        for (int c = 1; c < TYPED_COL; c++) put_null(&job->batch.cols[c], row);
        job->batch.code[row] = P_BLANK;
    } else {
        job->batch.code[row] = is_blank(s, n) ? P_BLANK : memchr(s, '=', n) == NULL ? P_NO_PAIRS : P_NONE;
        if (job->batch.code[row] == P_BLANK) {
            for (int c = 1; c < TYPED_COL; c++) put_null(&job->batch.cols[c], row);
        } else if (line_fields(job, row, s, n)) {
            return -1;
        }
    }
    if (type_row(&job->batch, row)) return -1;
    if (n > 0 && (job->keep_lines || may_be_skipped(job, row))) {
        if (put(&job->batch.cols[LINE_COL], row, (const char *)s, n)) return -1;
    } else {
        put_null(&job->batch.cols[LINE_COL], row);
    }
    job->batch.rows++;
    return 0;
}

/* The range's lines (line_end: forensics/ingest/readers/_grammar.h). */
static void *run_job(void *arg) {
    Job *job = arg;
    const unsigned char *b = job->batch.buf;
    size_t i = job->batch.start, end = job->batch.end, next;
    while (i < end) {
        size_t stop = line_end(b, i, end, &next, &job->batch.flags);
        int r = add_line(job, b + i, stop - i);
        if (r < 0) { job->batch.flags |= F_NOMEM; return NULL; }
        if (r > 0) return NULL;
        i = next;
    }
    return NULL;
}

/* ---- Python interface ---- */

static int read_vocabulary(PyObject *fields, Vocabulary *v) {
    memset(v, 0, sizeof(*v));
    if (!PyList_Check(fields) || PyList_GET_SIZE(fields) != NFIELDS) {
        PyErr_SetString(PyExc_ValueError, "fields: a list of 17 lists of keys (bytes)");
        return -1;
    }
    for (int f = 0; f < NFIELDS; f++) {
        PyObject *keys = PyList_GET_ITEM(fields, f);
        if (!PyList_Check(keys) || PyList_GET_SIZE(keys) > MAX_FIELD_KEYS) {
            PyErr_SetString(PyExc_ValueError, "fields: each a list of at most MAX_FIELD_KEYS keys");
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(keys); k++) {
            PyObject *key = PyList_GET_ITEM(keys, k);
            if (!PyBytes_Check(key) || PyBytes_GET_SIZE(key) == 0 || v->nkeys >= MAX_KEYS) {
                PyErr_SetString(PyExc_ValueError, "fields: keys are non-empty bytes, at most 512 of them");
                return -1;
            }
            const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(key);
            size_t n = (size_t)PyBytes_GET_SIZE(key);
            if (key_id(v, s, n) >= 0) {
                PyErr_SetString(PyExc_ValueError, "fields: a key feeds one field once");
                return -1;
            }
            int id = v->nkeys++;
            v->keys[id] = (Key){(const char *)s, key_ends(s, n), f};
            if (n > v->longest) v->longest = n;
            uint32_t slot = slot_of(v->keys[id].ends);
            while (v->table[slot]) slot = (slot + 1) & (HASH_SIZE - 1);
            v->table[slot] = (int16_t)(id + 1);
            v->field_keys[f][v->nfield_keys[f]++] = id;
        }
    }
    return 0;
}

/* (rows, flags, problem, [(validity, offsets, data, nulls) per text column], (validity, data, nulls) of the
 * timestamps); the job's memory moves to Python. A typed column is its text column's own buffers when no
 * value differs. */
static PyObject *batch_of(void *job) {
    Batch *b = job;
    PyObject *columns = PyList_New(NCOLS);
    if (columns == NULL) return NULL;
    size_t rows = b->rows;
    for (int c = 0; c < NCOLS; c++) {
        if (c >= TYPED_COL && !b->typed_differs[c - TYPED_COL]) {
            PyObject *same = PyList_GET_ITEM(columns, typed_field[c - TYPED_COL] + 1);
            Py_INCREF(same);
            PyList_SET_ITEM(columns, c, same);
            continue;
        }
        Column *col = &b->cols[c];
        if (rows == 0) {
            col->offsets = realloc(col->offsets, sizeof(int32_t));
            if (col->offsets) col->offsets[0] = 0;
        }
        PyObject *valid = block_of((char *)col->valid, (Py_ssize_t)(rows + 7) / 8);
        PyObject *offsets = block_of((char *)col->offsets, (Py_ssize_t)((rows + 1) * sizeof(int32_t)));
        PyObject *data = block_of(col->data, (Py_ssize_t)col->len);
        col->valid = NULL, col->offsets = NULL, col->data = NULL;
        PyObject *item = (valid && offsets && data) ? Py_BuildValue("(NNNn)", valid, offsets, data,
                                                                    (Py_ssize_t)col->nulls) : NULL;
        if (item == NULL) {
            Py_XDECREF(valid), Py_XDECREF(offsets), Py_XDECREF(data), Py_DECREF(columns);
            return NULL;
        }
        PyList_SET_ITEM(columns, c, item);
    }
    PyObject *problem = block_of((char *)b->code, (Py_ssize_t)rows);
    PyObject *ts_valid = block_of((char *)b->ts_valid, (Py_ssize_t)(rows + 7) / 8);
    PyObject *ts = block_of((char *)b->ts, (Py_ssize_t)(rows * sizeof(int64_t)));
    b->code = NULL, b->ts_valid = NULL, b->ts = NULL;
    if (problem == NULL || ts_valid == NULL || ts == NULL) {
        Py_XDECREF(problem), Py_XDECREF(ts_valid), Py_XDECREF(ts), Py_DECREF(columns);
        return NULL;
    }
    return Py_BuildValue("(niNN(NNn))", (Py_ssize_t)rows, b->flags, problem, columns, ts_valid, ts,
                         (Py_ssize_t)b->ts_nulls);
}

/* Lines given one by one (tokenize_lines), read like a range's; stops at a dirty line (rows then falls short). */
static void read_given(void *arg, const int32_t *off, size_t rows) {
    Job *job = arg;
    for (size_t i = 0; i < rows && !(job->batch.flags & (F_DIRTY | F_NOMEM)); i++)
        if (add_line(job, job->batch.buf + off[i], (size_t)(off[i + 1] - off[i])) < 0) job->batch.flags |= F_NOMEM;
}

static const Reader LOGFMT = {sizeof(Job), run_job, read_given, batch_of};

static PyObject *tokenize(PyObject *self, PyObject *args) {
    if (fields_ready()) return NULL;
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *fields;
    int threads, keep_lines = 1;
    if (!PyArg_ParseTuple(args, "y*nnOi|p", &view, &start, &end, &fields, &threads, &keep_lines)) return NULL;
    PyObject *result = NULL;
    Vocabulary *vocab = calloc(1, sizeof(Vocabulary));
    if (vocab == NULL) PyErr_NoMemory();
    else if (range_inside(&view, start, end) && read_vocabulary(fields, vocab) == 0)
        result = read_range(&LOGFMT, &(Job){.vocab = vocab, .keep_lines = keep_lines}, &view, (size_t)start,
                            (size_t)end, threads);
    free(vocab);
    PyBuffer_Release(&view);
    return result;
}

/* tokenize_lines(data, offsets, fields) -> (rows, flags, problem, columns, ts): lines given one by one rather
 * than as a file's range, as an Arrow string array's buffers (line i is data[offsets[i]:offsets[i + 1]), int32
 * offsets): the inner lines of an envelope, taken off by DuckDB, which hold no line end of their own (a \r in
 * one stays in it, as in the SQL path). Read like tokenize's lines, on the calling thread (DuckDB calls it from
 * its own threads) with the GIL released; stops at a dirty line (rows then falls short). */
static PyObject *tokenize_lines(PyObject *self, PyObject *args) {
    if (fields_ready()) return NULL;
    Py_buffer data, offsets;
    PyObject *fields;
    if (!PyArg_ParseTuple(args, "y*y*O", &data, &offsets, &fields)) return NULL;
    PyObject *result = NULL;
    Vocabulary *vocab = calloc(1, sizeof(Vocabulary));
    if (vocab == NULL) PyErr_NoMemory();
    else if (read_vocabulary(fields, vocab) == 0)
        result = read_lines_given(&LOGFMT, &(Job){.vocab = vocab}, &data, &offsets);
    free(vocab);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

/* The typing functions on one value, for the tests that hold them equal to Python's and DuckDB's. */
static PyObject *typed_one(PyObject *arg, Typer type) {
    Py_buffer view;
    if (!PyArg_Parse(arg, "y*", &view)) return NULL;
    Column col = {0};
    int32_t offsets[2] = {0, 0};
    uint8_t valid = 0;
    col.offsets = offsets, col.valid = &valid;
    PyObject *result = NULL;
    if (!valid_utf8(view.buf, (size_t)view.len)) PyErr_SetString(PyExc_ValueError, "not UTF-8");
    else if (type(&col, 0, view.buf, (size_t)view.len) < 0) PyErr_NoMemory();
    else if (valid) result = PyBytes_FromStringAndSize(col.data, (Py_ssize_t)col.len);
    else result = Py_NewRef(Py_None);
    free(col.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *normalize_address(PyObject *self, PyObject *arg) { return typed_one(arg, put_address); }

static PyObject *msg_id(PyObject *self, PyObject *arg) { return typed_one(arg, put_msg_id); }

static PyObject *utc_microseconds(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (!PyArg_Parse(arg, "y*", &view)) return NULL;
    int64_t us;
    int ok = iso_utc_us(view.buf, (size_t)view.len, &us);
    PyBuffer_Release(&view);
    return ok ? PyLong_FromLongLong(us) : Py_NewRef(Py_None);
}

/* A log mapped by a reader (the tokenizer, the JSON Lines reader, the unwrapper, the line-ending check) that shrinks
 * while it is read (rotated with copytruncate, say) raises SIGBUS at the first page past its new end: the process
 * would die as "Bus error" without a word. This says what happened in one line and exits 1 instead; what was read
 * so far is thrown away with the process (the next run sweeps its spill folder). Only write() and _exit() here:
 * nothing else is safe in a signal handler. */
static void on_sigbus(int sig) {
    static const char text[] = "Error: an input file shrank while it was being read (rotated or truncated?); "
                               "copy the logs and run again on the copy\n";
    (void)sig;
    ssize_t unused = write(2, text, sizeof text - 1);
    (void)unused;
    _exit(1);
}

static PyObject *guard_shrinking_files(PyObject *self, PyObject *unused) {
    struct sigaction action = {0};
    action.sa_handler = on_sigbus;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

/* Whether on_sigbus handles SIGBUS: Python's signal.getsignal does not see a handler installed here (it answers
 * from its own table, filled when the interpreter started). */
static PyObject *shrink_guarded(PyObject *self, PyObject *unused) {
    struct sigaction action;
    if (sigaction(SIGBUS, NULL, &action) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    return PyBool_FromLong(!(action.sa_flags & SA_SIGINFO) && action.sa_handler == on_sigbus);
}

static PyMethodDef methods[] = {
    {"configure", configure_fields, METH_O,
     "configure(fields) -> None: the canonical fields' names (forensics.ingest.fields.CANONICAL), which must be the "
     "ones this module was built for (ImportError otherwise); the readers run only after it"},
    {"guard_shrinking_files", guard_shrinking_files, METH_NOARGS,
     "guard_shrinking_files() -> None: a SIGBUS (a mapped file shrank under a reader) exits 1 with one line"},
    {"shrink_guarded", shrink_guarded, METH_NOARGS,
     "shrink_guarded() -> bool: whether guard_shrinking_files' handler is the one SIGBUS has"},
    {"normalize_address", normalize_address, METH_O,
     "normalize_address(utf8) -> the normal form (bytes), or None: forensics.addresses.normalize_address"},
    {"msg_id", msg_id, METH_O, "msg_id(utf8) -> the msg_id as SQL's mm_msg_id gives it (bytes), or None"},
    {"utc_microseconds", utc_microseconds, METH_O,
     "utc_microseconds(text) -> microseconds since the epoch of an ISO timestamp with a zone, or None (left to SQL)"},
    {"tokenize", tokenize, METH_VARARGS,
     "tokenize(buffer, start, end, fields, threads, keep_lines=True) -> [(rows, flags, problem, columns)] per "
     "thread's range (without keep_lines, a line's text only where it may be skipped)"},
    {"tokenize_lines", tokenize_lines, METH_VARARGS,
     "tokenize_lines(data, offsets, fields) -> (rows, flags, problem, columns, ts) of an Arrow string array's lines"},
    {NULL, NULL, 0, NULL},
};

PyMODINIT_FUNC PyInit__logfmt(void) {
    return module_with("forensics.ingest.readers._logfmt", methods, CONSTANTS);
}
