/* forensics.ingest.readers._jsonl: the compiled JSON Lines reader (optional; queries/ingest_jsonl.sql's stage_jsonl is the fallback).
 *
 * read(buffer, start, end, paths, always, fields, rare, threads) reads the lines of buffer[start:end) (which
 * starts at a line and ends after one) into the text columns stage_jsonl computes with json_extract_string: each
 * canonical field's text from the first of its JSONPaths whose value is not blank. The first `always` paths
 * count on every line, the others (stage_jsonl's :rare_paths) only on a line holding a `rare` key at any depth
 * (where stage_jsonl's :rare_keys regex matches). It does the common case only and is strict about it: a
 * line it cannot read exactly as DuckDB's JSON reader (yyjson) would, it marks DEFERRED, and SQL reads that
 * line with the very expressions of stage_jsonl (stage_jsonl_tokens). Deferred are
 * lines that are not a JSON object by strict RFC 8259 (DuckDB is laxer: trailing commas, NaN, ...), numbers with
 * an exponent anywhere (yyjson may refuse or keep them raw), wanted values that are objects, arrays, fractions,
 * -0 or over 18 digits (DuckDB prints those its own way), a wanted key seen twice in one object, any key with
 * an escape (the regex may match it), a surrogate escape anywhere, \u0000 in a wanted value and nesting over
 * MAX_DEPTH.
 * On the lines it reads it also types the recipient's normal form, the msg_id and the ISO times with a zone, as
 * the logfmt tokenizer does and with its code (forensics/ingest/readers/_typing.h); a deferred line's are typed by SQL.
 * Runs on up to two threads with the GIL released; hands back Arrow buffers (validity, int32 offsets, data) as
 * bytes. A range holding invalid UTF-8 or an overlong line is reported dirty (the caller repairs the file as the
 * SQL path does); line-ending styles seen are reported (DuckDB's reader treats mixed ones its own way).
 *
 * read_lines(data, offsets, paths, always, fields, rare) reads lines given one by one instead, as an Arrow string
 * array's buffers: the inner lines of an envelope, which DuckDB took off (see read_given).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_typing.h"
#include "_grammar.h"
#include "_buffers.h"
#include "_fields.h"

#define MAX_LINE 7900000 /* forensics.ingest.repair.MAX_LINE_BYTES: a longer line is read from a repaired copy */
#define MAX_NODES 1024    /* path components and rare keys */
#define MAX_PATHS 512
#define HASH_SIZE 2048
#define MAX_DEPTH 64
#define RARE (-2) /* the parent of a rare key in the table */

enum { SETTLED = 0, BLANK = 1, DEFERRED = 2 };

/* The numbers the Python side reads of this module. */
static const IntConstant CONSTANTS[] = {
    {"DIRTY", F_DIRTY}, {"CRLF", F_CRLF}, {"LONE", F_LONE}, {"DEFERRED", DEFERRED}, {"BLANK", BLANK},
    {"MAX_PATHS", MAX_PATHS}, {"MAX_NODES", MAX_NODES}, {"MAX_LINE", MAX_LINE}, {NULL, 0},
};

/* ---- what to read: a trie of path components (node 0 is the object of the line) and the rare keys ---- */

typedef struct {
    const unsigned char *key;
    size_t len;
    int parent;
    int path; /* the path ending here (-1: none) */
} Node;

typedef struct {
    Node nodes[MAX_NODES];
    int nnodes;
    int16_t table[HASH_SIZE]; /* open addressing on (parent, key): node id + 1, 0 = empty */
    int field_paths[NFIELDS][MAX_PATHS];
    int nfield_paths[NFIELDS];
    int npaths, always; /* paths from `always` on count only on a line holding a rare key */
} Plan;

static uint32_t slot_of(int parent, const unsigned char *s, size_t n) {
    uint32_t h = 2166136261u ^ (uint32_t)(parent + 3);
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h & (HASH_SIZE - 1);
}

static int node_of(const Plan *p, int parent, const unsigned char *s, size_t n) {
    for (uint32_t slot = slot_of(parent, s, n);; slot = (slot + 1) & (HASH_SIZE - 1)) {
        int id = p->table[slot] - 1;
        if (id < 0) return -1;
        const Node *node = &p->nodes[id];
        if (node->parent == parent && node->len == n && memcmp(node->key, s, n) == 0) return id;
    }
}

/* The node of key under parent, added when new (-1: the plan is full). */
static int add_node(Plan *p, int parent, const unsigned char *s, size_t n) {
    int id = node_of(p, parent, s, n);
    if (id >= 0) return id;
    if (p->nnodes >= MAX_NODES) return -1;
    id = p->nnodes++;
    p->nodes[id] = (Node){s, n, parent, -1};
    uint32_t slot = slot_of(parent, s, n);
    while (p->table[slot]) slot = (slot + 1) & (HASH_SIZE - 1);
    p->table[slot] = (int16_t)(id + 1);
    return id;
}

/* ---- Arrow columns ---- */

typedef struct {
    const unsigned char *s; /* a value: in the line, or decoded into the job's scratch */
    size_t len;
} Span;

typedef struct {
    Batch batch; /* first: the shared code (_fields.h) takes a job as its Batch; its code is SETTLED, BLANK or DEFERRED */
    const Plan *plan;
    int given; /* the lines came from DuckDB (read_lines): their text stays there, none is copied back */
    /* per line: the value of each path (s NULL: absent or null), when each node was last met (a key met twice in
     * one object), and how much of the batch's scratch decoded strings fill */
    Span vals[MAX_PATHS];
    size_t met[MAX_NODES];
    size_t line_no;
    int rare_seen;
    size_t scratch_len;
} Job;

/* The row's value of a column: s[0, n), or NULL when s is NULL. */
static int put_value(Column *col, size_t row, const unsigned char *s, size_t n) {
    if (s == NULL) {
        put_null(col, row);
        return 0;
    }
    return put(col, row, (const char *)s, n);
}

/* ---- strict JSON; any doubt is a deferral (return 1) ---- */

typedef struct {
    Job *job;
    const unsigned char *s;
    size_t n, i;
} Cursor;

static void skip_ws(Cursor *c) { c->i = json_ws(c->s, c->n, c->i); }

/* A string at c->i (its opening quote); *v its text, decoded when `want` (else NULL), *escaped whether it had
 * an escape. A surrogate escape is never taken, nor \u0000 in a value read. */
static int string(Cursor *c, int want, Span *v, int *escaped) {
    size_t from = c->i + 1, i = plain_run(c->s, c->n, from);
    *escaped = 0;
    if (i < c->n && c->s[i] == '"') {
        if (want) *v = (Span){c->s + from, i - from};
        c->i = i + 1;
        return 0;
    }
    *escaped = 1;
    if (!want) {
        size_t end = json_string_end(c->s, c->n, c->i, JSON_NUL);
        if (end == 0) return 1;
        c->i = end;
        return 0;
    }
    Job *job = c->job;
    unsigned char *out = job->batch.scratch + job->scratch_len;
    long w = json_string(c->s, c->n, &c->i, out, 0);
    if (w < 0) return 1;
    *v = (Span){out, (size_t)w}, job->scratch_len += (size_t)w;
    return 0;
}

/* A number at c->i (json_number_end's grammar): *v its text when it is a plain integer DuckDB prints as written
 * (else NULL). */
static int number(Cursor *c, Span *v) {
    size_t from = c->i, end = json_number_end(c->s, c->n, from);
    if (end == 0) return 1;
    size_t digits = from + (c->s[from] == '-'), int_end = c->s[digits] == '0' ? digits + 1 : digits_end(c->s, end, digits);
    int plain = int_end == end;
    if (!plain && (c->s[int_end] != '.' || digits_end(c->s, end, int_end + 1) != end))
        return 1; /* an exponent: yyjson may refuse it or keep it raw */
    size_t int_digits = int_end - digits;
    if (int_digits > 300) return 1; /* a finite double or not: left to yyjson */
    c->i = end;
    if (plain && int_digits <= 18 && !(c->s[from] == '-' && c->s[digits] == '0'))
        *v = (Span){c->s + from, end - from};
    else
        *v = (Span){NULL, 1}; /* a number DuckDB prints its own way: wanted, it defers */
    return 0;
}

static int value(Cursor *c, int node, int depth);

static int literal(Cursor *c, Span *v) {
    size_t end = json_literal_end(c->s, c->n, c->i);
    if (end == 0) return 1;
    if (c->s[c->i] != 'n') *v = (Span){c->s + c->i, end - c->i};
    c->i = end;
    return 0;
}

/* An object at c->i, whose keys are looked up under `node` (-1: nothing wanted inside). */
static int object(Cursor *c, int node, int depth) {
    const Plan *p = c->job->plan;
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == '}') return c->i++, 0;
    for (;;) {
        if (c->i >= c->n || c->s[c->i] != '"') return 1;
        size_t from = c->i + 1;
        int escaped;
        Span unused;
        if (string(c, 0, &unused, &escaped) || escaped) return 1;
        size_t len = c->i - 1 - from;
        if (node_of(p, RARE, c->s + from, len) >= 0) c->job->rare_seen = 1;
        int child = node >= 0 ? node_of(p, node, c->s + from, len) : -1;
        if (child >= 0) {
            if (c->job->met[child] == c->job->line_no) return 1;
            c->job->met[child] = c->job->line_no;
        }
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] != ':') return 1;
        c->i++;
        if (value(c, child, depth + 1)) return 1;
        skip_ws(c);
        if (c->i >= c->n) return 1;
        if (c->s[c->i++] == '}') return 0;
        if (c->s[c->i - 1] != ',') return 1;
        skip_ws(c);
    }
}

static int array(Cursor *c, int depth) {
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == ']') return c->i++, 0;
    for (;;) {
        if (value(c, -1, depth + 1)) return 1;
        skip_ws(c);
        if (c->i >= c->n) return 1;
        if (c->s[c->i++] == ']') return 0;
        if (c->s[c->i - 1] != ',') return 1;
    }
}

/* A value at c->i (after whitespace) at trie node `node` (-1: not wanted): a path's value is kept. */
static int value(Cursor *c, int node, int depth) {
    skip_ws(c);
    if (c->i >= c->n || depth > MAX_DEPTH) return 1;
    int path = node >= 0 ? c->job->plan->nodes[node].path : -1;
    Span v = {NULL, 0};
    int escaped, failed;
    switch (c->s[c->i]) {
    case '{': return path >= 0 ? 1 : object(c, node, depth);
    case '[': return path >= 0 ? 1 : array(c, depth);
    case '"': failed = string(c, path >= 0, &v, &escaped); break;
    case 't': case 'f': case 'n': failed = literal(c, &v); break;
    default: failed = number(c, &v); break;
    }
    if (failed) return 1;
    if (path >= 0) {
        if (v.s == NULL && v.len) return 1; /* a number printed DuckDB's way */
        c->job->vals[path] = v;
    }
    return 0;
}

/* ---- a line ---- */

static int settle(Job *job, size_t row, const unsigned char *s, size_t n) {
    const Plan *p = job->plan;
    job->line_no++;
    for (int k = 0; k < p->npaths; k++) job->vals[k] = (Span){NULL, 0};
    if (job->batch.scratch_cap < n + COPY_SLACK) { /* every value decoded is no longer than its text */
        unsigned char *grown = realloc(job->batch.scratch, n + COPY_SLACK);
        if (grown == NULL) return -1;
        job->batch.scratch = grown, job->batch.scratch_cap = n + COPY_SLACK;
    }
    job->scratch_len = 0;
    job->rare_seen = 0;
    Cursor c = {job, s, n, 0};
    skip_ws(&c);
    if (c.i >= n || s[c.i] != '{' || object(&c, 0, 0)) return 1;
    skip_ws(&c);
    if (c.i != n) return 1;
    for (int f = 0; f < NFIELDS; f++) {
        const Span *pick = NULL;
        for (int k = 0; k < p->nfield_paths[f] && pick == NULL; k++) {
            int path = p->field_paths[f][k];
            const Span *v = &job->vals[path];
            if (v->s && !is_blank(v->s, v->len) && (path < p->always || job->rare_seen)) pick = v;
        }
        if (put_value(&job->batch.cols[f + 1], row, pick ? pick->s : NULL, pick ? pick->len : 0)) return -1;
    }
    return 0;
}

/* A line as a row: settled here, blank, or deferred to SQL (as is every line that is not `readable`: not valid
 * UTF-8, which settle needs). */
static int add_line(Job *job, const unsigned char *s, size_t n, int readable) {
    if (reserve_rows(&job->batch)) return -1;
    size_t row = job->batch.rows++;
    int code = n == 0 || is_blank(s, n) ? BLANK : SETTLED;
    int r = code != SETTLED ? 0 : readable ? settle(job, row, s, n) : 1;
    if (r < 0) return -1;
    job->batch.code[row] = (int8_t)(r > 0 ? DEFERRED : code);
    for (int f = 1; job->batch.code[row] != SETTLED && f < TYPED_COL; f++) /* SQL reads a deferred line's fields */
        put_null(&job->batch.cols[f], row);
    if (type_row(&job->batch, row)) return -1;
    /* every line's text: typing may still find a settled line is no record, and a skip keeps its text */
    if (job->given) return put_null(&job->batch.cols[0], row), 0;
    return put_value(&job->batch.cols[0], row, n ? s : NULL, n);
}

/* The range's lines (line_end: forensics/ingest/readers/_grammar.h). Stops at a line DuckDB's reader refuses (invalid UTF-8,
 * over its size limit): the caller repairs the file. */
static void *run_job(void *arg) {
    Job *job = arg;
    Batch *b = &job->batch;
    size_t i = b->start, next;
    while (i < b->end && !(b->flags & (F_DIRTY | F_NOMEM))) {
        size_t n = line_end(b->buf, i, b->end, &next, &b->flags) - i;
        if (n > MAX_LINE || !valid_utf8(b->buf + i, n)) b->flags |= F_DIRTY;
        else if (add_line(job, b->buf + i, n, 1)) b->flags |= F_NOMEM;
        i = next;
    }
    return NULL;
}

/* ---- Python interface ---- */

static int plan_error(const char *what) {
    PyErr_SetString(PyExc_ValueError, what);
    return -1;
}

/* paths: a list of tuples of components (bytes), the first `always` read on every line; fields: 17 lists of
 * path indices, best first; rare: keys. */
static int read_plan(PyObject *paths, int always, PyObject *fields, PyObject *rare, Plan *p) {
    memset(p, 0, sizeof(*p));
    p->nnodes = 1; /* the line's object */
    p->nodes[0] = (Node){NULL, 0, -1, -1};
    if (!PyList_Check(paths) || PyList_GET_SIZE(paths) > MAX_PATHS) return plan_error("paths: at most 512");
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(paths); k++) {
        PyObject *parts = PyList_GET_ITEM(paths, k);
        if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) == 0) return plan_error("paths: tuples of bytes");
        int node = 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(parts); j++) {
            PyObject *part = PyTuple_GET_ITEM(parts, j);
            if (!PyBytes_Check(part) || PyBytes_GET_SIZE(part) == 0) return plan_error("paths: non-empty bytes");
            node = add_node(p, node, (const unsigned char *)PyBytes_AS_STRING(part), (size_t)PyBytes_GET_SIZE(part));
            if (node < 0) return plan_error("paths: too many components");
        }
        if (p->nodes[node].path >= 0) return plan_error("paths: each once");
        p->nodes[node].path = p->npaths++;
    }
    p->always = always;
    if (!PyList_Check(rare)) return plan_error("rare: a list of bytes");
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(rare); k++) {
        PyObject *key = PyList_GET_ITEM(rare, k);
        if (!PyBytes_Check(key)) return plan_error("rare: a list of bytes");
        if (add_node(p, RARE, (const unsigned char *)PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key)) < 0)
            return plan_error("rare: too many keys");
    }
    if (!PyList_Check(fields) || PyList_GET_SIZE(fields) != NFIELDS) return plan_error("fields: 17 lists");
    for (int f = 0; f < NFIELDS; f++) {
        PyObject *list = PyList_GET_ITEM(fields, f);
        if (!PyList_Check(list) || PyList_GET_SIZE(list) > MAX_PATHS) return plan_error("fields: lists of indices");
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list); k++) {
            long at = PyLong_AsLong(PyList_GET_ITEM(list, k));
            if (at < 0 || at >= p->npaths) return PyErr_Occurred() ? -1 : plan_error("fields: a path index");
            p->field_paths[f][p->nfield_paths[f]++] = (int)at;
        }
    }
    return 0;
}

static PyObject *bytes_of(const void *s, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)s : "", (Py_ssize_t)n);
}

/* (rows, flags, codes, [(validity, offsets, data, nulls) per text column], (validity, data, nulls) of the
 * timestamps), copied into bytes. */
static PyObject *batch_of(void *job) {
    Batch *b = job;
    size_t rows = b->rows;
    PyObject *columns = PyList_New(NCOLS);
    for (int c = 0; columns && c < NCOLS; c++) {
        Column *col = &b->cols[c];
        int32_t zero = 0;
        PyObject *item = Py_BuildValue("(NNNn)", bytes_of(col->valid, rows ? (rows + 7) / 8 : 0),
                                       bytes_of(rows ? (void *)col->offsets : &zero, (rows + 1) * sizeof(int32_t)),
                                       bytes_of(col->data, col->len), (Py_ssize_t)col->nulls);
        if (item == NULL) Py_CLEAR(columns);
        else PyList_SET_ITEM(columns, c, item);
    }
    if (columns == NULL) return NULL;
    return Py_BuildValue("(niNN(NNn))", (Py_ssize_t)rows, b->flags, bytes_of(b->code, rows), columns,
                         bytes_of(b->ts_valid, rows ? (rows + 7) / 8 : 0), bytes_of(b->ts, rows * sizeof(int64_t)),
                         (Py_ssize_t)b->ts_nulls);
}

/* Lines given one by one (line i is data[off[i]:off[i + 1])), read like a file's lines but not split: they
 * hold no line end of their own (a \r in one stays in it, as in the SQL path). A line that is not valid UTF-8
 * (a VARCHAR may hold one: a lone surrogate escape, decoded) is deferred; stops at one over MAX_LINE (F_DIRTY:
 * rows then falls short). */
static void read_given(void *arg, const int32_t *off, size_t rows) {
    Job *job = arg;
    Batch *b = &job->batch;
    for (size_t i = 0; i < rows && !(b->flags & (F_DIRTY | F_NOMEM)); i++) {
        const unsigned char *s = b->buf + off[i];
        size_t n = (size_t)(off[i + 1] - off[i]);
        if (n > MAX_LINE) b->flags |= F_DIRTY;
        else if (add_line(job, s, n, valid_utf8(s, n))) b->flags |= F_NOMEM;
    }
}

static const Reader JSONL = {sizeof(Job), run_job, read_given, batch_of};

/* read_lines(data, offsets, paths, always, fields, rare) -> (rows, flags, codes, columns, ts): the lines of an
 * Arrow string array (its data and int32 offsets), as read() reads a range's, on the calling thread (DuckDB
 * calls it from its own threads) with the GIL released. The line column is all NULL: the text is DuckDB's. */
static PyObject *read_lines(PyObject *self, PyObject *args) {
    if (fields_ready()) return NULL;
    Py_buffer data, offsets;
    PyObject *paths, *fields, *rare, *result = NULL;
    int always;
    if (!PyArg_ParseTuple(args, "y*y*OiOO", &data, &offsets, &paths, &always, &fields, &rare)) return NULL;
    Plan *plan = calloc(1, sizeof(Plan));
    if (plan == NULL) PyErr_NoMemory();
    else if (read_plan(paths, always, fields, rare, plan) == 0)
        result = read_lines_given(&JSONL, &(Job){.plan = plan, .given = 1}, &data, &offsets);
    free(plan);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

static PyObject *read_ranges(PyObject *self, PyObject *args) {
    if (fields_ready()) return NULL;
    Py_buffer view;
    Py_ssize_t start, end;
    PyObject *paths, *fields, *rare, *result = NULL;
    int always, threads;
    if (!PyArg_ParseTuple(args, "y*nnOiOOi", &view, &start, &end, &paths, &always, &fields, &rare, &threads))
        return NULL;
    Plan *plan = calloc(1, sizeof(Plan));
    if (plan == NULL) PyErr_NoMemory();
    else if (range_inside(&view, start, end) && read_plan(paths, always, fields, rare, plan) == 0)
        result = read_range(&JSONL, &(Job){.plan = plan}, &view, (size_t)start, (size_t)end, threads);
    free(plan);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"configure", configure_fields, METH_O,
     "configure(fields) -> None: the canonical fields' names (forensics.ingest.fields.CANONICAL), which must be the "
     "ones this module was built for (ImportError otherwise); the readers run only after it"},
    {"read", read_ranges, METH_VARARGS,
     "read(buffer, start, end, paths, always, fields, rare, threads) -> [(rows, flags, codes, columns)] per thread"},
    {"read_lines", read_lines, METH_VARARGS,
     "read_lines(data, offsets, paths, always, fields, rare) -> (rows, flags, codes, columns, ts) of an Arrow "
     "string array's lines"},
    {NULL, NULL, 0, NULL},
};

PyMODINIT_FUNC PyInit__jsonl(void) {
    return module_with("forensics.ingest.readers._jsonl", methods, CONSTANTS);
}
