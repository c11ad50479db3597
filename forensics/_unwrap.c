/* forensics._unwrap: the Docker json-file and CRI envelopes taken off in C (optional; queries/envelopes.sql's
 * envelope_docker_json and envelope_cri are the fallback and the reference).
 *
 * unwrap(buffer, start, end, kind, first_line) reads the physical lines of buffer[start:end) (which starts at a
 * line and ends after one) and gives, per line, the text inside its envelope (an Arrow string array: the line
 * itself where it is not an entry of the envelope, as the SQL passes it on whole), the entry's time
 * (timestamp[us, UTC]) and what it was: not an entry, or an entry of stdout, of stderr, or of no named stream.
 * The logfmt tokenizer then reads the texts (forensics/ingest/unwrapped.py).
 *
 * It takes the common case only, and says DEFER for the whole file at the first line where it cannot be sure to
 * read it exactly as DuckDB does: a piece of a longer line (Docker's 16 KiB split, CRI's P) or an unfinished
 * one, an entry holding more than one line, a CR in a physical line, invalid UTF-8, a JSON entry of any other shape than
 * Docker's own {"log": "...", "stream": "...", "time": "..."} (no space outside strings, no other key, strings
 * only, no \u0000), a time iso_utc_us does not read, a stream other than stdout or stderr. The caller then takes
 * the envelope off in DuckDB, which reads every case.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wunused-function" /* the typing this reader does not need */
#include "_typing.h"

enum { K_DOCKER = 1, K_CRI = 2 };
enum { E_NONE = 0, E_STDOUT = 1, E_STDERR = 2, E_NO_STREAM = 3 }; /* what a line was */
enum { U_DEFER = 1, U_NOMEM = 2 };

typedef struct {
    Column text; /* the text inside each line's envelope (valid everywhere: a blank line is '') */
    int8_t *what;
    int64_t *ts, *line_no;
    uint8_t *ts_valid;
    size_t rows, cap, ts_nulls;
} Out;

static int reserve(Out *o) {
    if (o->rows < o->cap) return 0;
    size_t cap = o->cap ? o->cap * 2 : 65536;
    if (grow_rows(&o->text, 1, &o->what, &o->ts, &o->ts_valid, o->cap, cap)) return -1;
    int64_t *line_no = realloc(o->line_no, cap * sizeof(int64_t));
    if (line_no == NULL) return -1;
    o->line_no = line_no, o->cap = cap;
    return 0;
}

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

static int hex4(const unsigned char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d = c >= '0' && c <= '9' ? c - '0' : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10 : 16;
        if (d > 15) return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

static size_t put_utf8(unsigned char *t, unsigned cp) {
    if (cp < 0x80) { t[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { t[0] = 0xC0 | cp >> 6; t[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) { t[0] = 0xE0 | cp >> 12; t[1] = 0x80 | (cp >> 6 & 0x3F); t[2] = 0x80 | (cp & 0x3F); return 3; }
    t[0] = 0xF0 | cp >> 18; t[1] = 0x80 | (cp >> 12 & 0x3F); t[2] = 0x80 | (cp >> 6 & 0x3F); t[3] = 0x80 | (cp & 0x3F);
    return 4;
}

/* A JSON string at s[*i] (its opening quote), decoded into t (room for its length): the decoded length, or -1
 * for anything this reader does not take (a raw control character, \u0000, a lone surrogate, no end). */
static long json_string(const unsigned char *s, size_t n, size_t *i, unsigned char *t) {
    size_t j = *i + 1, m = 0;
    while (j < n && s[j] != '"') {
        unsigned c = s[j];
        if (c < 0x20) return -1;
        if (c != '\\') { t[m++] = (unsigned char)c; j++; continue; }
        if (j + 1 >= n) return -1;
        unsigned e = s[j + 1], cp;
        j += 2;
        switch (e) {
        case '"': case '\\': case '/': t[m++] = (unsigned char)e; break;
        case 'b': t[m++] = '\b'; break;
        case 'f': t[m++] = '\f'; break;
        case 'n': t[m++] = '\n'; break;
        case 'r': t[m++] = '\r'; break;
        case 't': t[m++] = '\t'; break;
        case 'u':
            if (j + 4 > n || !hex4(s + j, &cp) || cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return -1;
            j += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (j + 6 > n || s[j] != '\\' || s[j + 1] != 'u' || !hex4(s + j + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return -1;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                j += 6;
            }
            m += put_utf8(t + m, cp);
            break;
        default: return -1;
        }
    }
    if (j >= n) return -1;
    *i = j + 1;
    return (long)m;
}

typedef struct {
    const unsigned char *s; /* a value's decoded text in the scratch buffer, or NULL when the key is absent */
    size_t n;
} Value;

/* {"log":"...","stream":"...","time":"..."} in any order, each key at most once: 0, or -1 to defer. */
static int docker_entry(const unsigned char *s, size_t n, unsigned char *scratch, Value v[3]) {
    static const char *const keys[3] = {"log", "stream", "time"};
    size_t i = 1, used = 0;
    memset(v, 0, 3 * sizeof(Value));
    if (n < 2 || s[n - 1] != '}') return -1;
    if (n == 2) return 0;
    for (;;) {
        if (i >= n || s[i] != '"') return -1;
        const unsigned char *key_end = memchr(s + i + 1, '"', n - i - 1);
        if (key_end == NULL || memchr(s + i + 1, '\\', (size_t)(key_end - s - i - 1))) return -1; /* escaped keys */
        long klen = json_string(s, n, &i, scratch + used);
        if (klen < 0 || i >= n || s[i] != ':' || ++i >= n || s[i] != '"') return -1;
        int k = 0;
        while (k < 3 && !(strlen(keys[k]) == (size_t)klen && memcmp(keys[k], scratch + used, (size_t)klen) == 0)) k++;
        if (k == 3 || v[k].s) return -1;
        long vlen = json_string(s, n, &i, scratch + used);
        if (vlen < 0) return -1;
        v[k].s = scratch + used, v[k].n = (size_t)vlen;
        used += (size_t)vlen;
        if (i == n - 1) return 0;
        if (s[i] != ',') return -1;
        i++;
    }
}

/* One Docker json-file line: its text and what it was; 1 to defer, -1 out of memory. */
static int docker_line(Out *o, const unsigned char *s, size_t n, unsigned char *scratch, int64_t *us, int *what) {
    Value v[3];
    *what = E_NONE;
    if (n == 0 || s[0] != '{') return put(&o->text, o->rows, (const char *)s, n);
    if (docker_entry(s, n, scratch, v)) return 1;
    if (v[2].s == NULL) return put(&o->text, o->rows, (const char *)s, n); /* no time: no entry (the SQL's v) */
    const Value *log = &v[0], *stream = &v[1];
    if (log->s && (log->n == 0 || log->s[log->n - 1] != '\n')) return 1; /* a piece, or unfinished */
    size_t len = log->s ? log->n - 1 : 0;
    if (len && log->s[len - 1] == '\r') len--; /* a \r\n ends it too; a \r inside stays, as in the SQL */
    if (len && memchr(log->s, '\n', len)) return 1; /* lines: envelope_lines splits them */
    if (!time_us(v[2].s, v[2].n, us)) return 1;
    if (stream->s == NULL) *what = E_NO_STREAM;
    else if (stream->n == 6 && memcmp(stream->s, "stdout", 6) == 0) *what = E_STDOUT;
    else if (stream->n == 6 && memcmp(stream->s, "stderr", 6) == 0) *what = E_STDERR;
    else return 1;
    return put(&o->text, o->rows, log->s ? (const char *)log->s : "", len);
}

/* ---- CRI: `<RFC 3339> <stdout|stderr> <F|P>[:tags] <line>` ---- */

static inline int re2_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }

/* One CRI line: its text and what it was; 1 to defer, -1 out of memory. */
static int cri_line(Out *o, const unsigned char *s, size_t n, int64_t *us, int *what) {
    *what = E_NONE;
    size_t t = 0;
    while (t < n && !re2_space(s[t])) t++;
    if (t == 0 || t + 9 > n || s[t] != ' ' || s[t + 7] != ' ' || (s[t + 8] != 'F' && s[t + 8] != 'P'))
        return put(&o->text, o->rows, (const char *)s, n);
    int out = memcmp(s + t + 1, "stdout", 6) == 0, err = memcmp(s + t + 1, "stderr", 6) == 0;
    if (!out && !err) return put(&o->text, o->rows, (const char *)s, n);
    size_t h = t + 9; /* the head's end: after [FP], and after :tags */
    if (h < n && s[h] == ':')
        while (h < n && !re2_space(s[h])) h++;
    if (h < n && s[h] != ' ') return put(&o->text, o->rows, (const char *)s, n); /* run into the text */
    if (s[t + 8] == 'P' || !time_us(s, t, us)) return 1;
    *what = out ? E_STDOUT : E_STDERR;
    return h < n ? put(&o->text, o->rows, (const char *)s + h + 1, n - h - 1) : put(&o->text, o->rows, "", 0);
}

/* ---- the range ---- */

static int unwrap_range(Out *o, const unsigned char *b, size_t i, size_t end, int kind, int64_t first_line) {
    unsigned char *scratch = malloc(end - i + 1);
    if (scratch == NULL) return U_NOMEM;
    int r = 0;
    while (i < end && r == 0) {
        const unsigned char *nl = memchr(b + i, '\n', end - i);
        size_t stop = nl ? (size_t)(nl - b) : end, n = stop - i;
        if (reserve(o)) { r = U_NOMEM; break; }
        int64_t us = 0;
        int what;
        if (memchr(b + i, '\r', n) || !valid_utf8(b + i, n)) { r = U_DEFER; break; }
        int read = kind == K_DOCKER ? docker_line(o, b + i, n, scratch, &us, &what) : cri_line(o, b + i, n, &us, &what);
        if (read) { r = read > 0 ? U_DEFER : U_NOMEM; break; }
        o->what[o->rows] = (int8_t)what;
        o->ts[o->rows] = us;
        if (what != E_NONE) o->ts_valid[o->rows / 8] |= (uint8_t)(1u << (o->rows % 8));
        else o->ts_nulls++;
        o->line_no[o->rows] = first_line + (int64_t)o->rows;
        o->rows++;
        i = stop + 1;
    }
    free(scratch);
    return r;
}

/* ---- Python ---- */

typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
} Block;

static void block_dealloc(Block *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int block_getbuffer(Block *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static PyBufferProcs block_as_buffer = {(getbufferproc)block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "forensics._unwrap.Block",
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory filled by the unwrapper, readable as a buffer.",
};

/* Takes ownership of data (freed with the block, or now if the block cannot be made). */
static PyObject *block_of(void *data, Py_ssize_t size) {
    if (data == NULL && (data = malloc(1)) == NULL) return PyErr_NoMemory();
    Block *block = PyObject_New(Block, &BlockType);
    if (block == NULL) {
        free(data);
        return NULL;
    }
    block->data = data, block->size = size;
    return (PyObject *)block;
}

static void free_out(Out *o) {
    free(o->text.valid), free(o->text.offsets), free(o->text.data);
    free(o->what), free(o->ts), free(o->ts_valid), free(o->line_no);
}

/* unwrap(buffer, start, end, kind, first_line) -> (rows, flags, text (data, offsets), what, ts (valid, data,
 * nulls), line_no); rows is 0 and flags DEFER when the file is for DuckDB to unwrap. */
static PyObject *unwrap(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    int kind;
    long long first_line;
    if (!PyArg_ParseTuple(args, "y*nniL", &view, &start, &end, &kind, &first_line)) return NULL;
    if (start < 0 || end > view.len || start > end || (kind != K_DOCKER && kind != K_CRI)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "unwrap: a range inside the buffer, kind DOCKER or CRI");
        return NULL;
    }
    Out o = {0};
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = unwrap_range(&o, view.buf, (size_t)start, (size_t)end, kind, (int64_t)first_line);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (r == U_NOMEM || (r == 0 && reserve(&o))) {
        free_out(&o);
        return PyErr_NoMemory();
    }
    if (r == U_DEFER) {
        free_out(&o);
        return Py_BuildValue("(ni)", (Py_ssize_t)0, U_DEFER);
    }
    size_t rows = o.rows;
    PyObject *result = Py_BuildValue("(ni(NN)N(NNn)N)", (Py_ssize_t)rows, 0,
                                     block_of(o.text.data, (Py_ssize_t)o.text.len),
                                     block_of(o.text.offsets, (Py_ssize_t)((rows + 1) * sizeof(int32_t))),
                                     block_of(o.what, (Py_ssize_t)rows), block_of(o.ts_valid, (Py_ssize_t)((rows + 7) / 8)),
                                     block_of(o.ts, (Py_ssize_t)(rows * sizeof(int64_t))), (Py_ssize_t)o.ts_nulls,
                                     block_of(o.line_no, (Py_ssize_t)(rows * sizeof(int64_t))));
    free(o.text.valid);
    return result;
}

static PyMethodDef methods[] = {
    {"unwrap", unwrap, METH_VARARGS,
     "unwrap(buffer, start, end, kind, first_line) -> (rows, flags, text, what, ts, line_no) of a range's lines"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "forensics._unwrap", NULL, -1, methods};

PyMODINIT_FUNC PyInit__unwrap(void) {
    if (PyType_Ready(&BlockType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "DOCKER", K_DOCKER) || PyModule_AddIntConstant(m, "CRI", K_CRI)
        || PyModule_AddIntConstant(m, "DEFER", U_DEFER) || PyModule_AddIntConstant(m, "STDOUT", E_STDOUT)
        || PyModule_AddIntConstant(m, "STDERR", E_STDERR) || PyModule_AddIntConstant(m, "NO_STREAM", E_NO_STREAM)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
