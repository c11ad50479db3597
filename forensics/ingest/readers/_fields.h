/* forensics/ingest/readers/_fields.h: the canonical fields as the compiled readers that fill them (forensics/ingest/readers/_logfmt.c, _jsonl.c)
 * are built: their count, names and order, and which of them the readers type (the recipient, the msg_id, the
 * time). The table itself is Python's (forensics.ingest.fields.CANONICAL): the Python side hands it to the
 * module's configure() right after import, which refuses (ImportError, so the reader counts as not installed) a
 * table other than this one, and the readers refuse to run before a table has been agreed. Also what both readers
 * fill from those fields: a Batch (a range's columns, typed alike), and a range read on up to two threads.
 * Include after Python.h, _typing.h, _grammar.h and _buffers.h. */
#ifndef MAILMORTEM_FIELDS_H
#define MAILMORTEM_FIELDS_H

#include <pthread.h>

#define NFIELDS 17
static const char *const FIELD_NAMES[NFIELDS] = {
    "ts", "event", "worker", "incarnation", "campaign", "step", "recipient", "candidate", "msg_id", "shard", "lease",
    "test_id", "variant", "status", "attempt", "error", "count",
};
/* the fields the readers look at by position: checked against FIELD_NAMES by configure() */
enum { TS_FIELD = 0, EVENT_FIELD = 1, RECIPIENT_FIELD = 6, MSG_ID_FIELD = 8 };

_Static_assert(NFIELDS <= 32, "a reader may hold a bit per field");

static int fields_agreed; /* configure() took Python's table: the readers may run */

/* Whether the names at the fixed positions are the ones the readers take them for. */
static int positions_hold(void) {
    return strcmp(FIELD_NAMES[TS_FIELD], "ts") == 0 && strcmp(FIELD_NAMES[EVENT_FIELD], "event") == 0
           && strcmp(FIELD_NAMES[RECIPIENT_FIELD], "recipient") == 0 && strcmp(FIELD_NAMES[MSG_ID_FIELD], "msg_id") == 0;
}

/* configure(fields): fields, a sequence of str, must be FIELD_NAMES, in order; else ImportError naming both. */
static PyObject *configure_fields(PyObject *module, PyObject *fields) {
    PyObject *seq = PySequence_Fast(fields, "configure: a sequence of the canonical fields' names");
    if (seq == NULL) return NULL;
    int agree = positions_hold() && PySequence_Fast_GET_SIZE(seq) == NFIELDS;
    for (Py_ssize_t f = 0; agree && f < NFIELDS; f++) {
        PyObject *name = PySequence_Fast_GET_ITEM(seq, f);
        const char *text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : NULL;
        if (text == NULL && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        agree = text != NULL && strcmp(text, FIELD_NAMES[f]) == 0;
    }
    Py_DECREF(seq);
    fields_agreed = agree;
    if (agree) Py_RETURN_NONE;
    PyObject *built = PyTuple_New(NFIELDS);
    for (int f = 0; built && f < NFIELDS; f++) {
        PyObject *name = PyUnicode_FromString(FIELD_NAMES[f]);
        if (name == NULL) Py_CLEAR(built);
        else PyTuple_SET_ITEM(built, f, name);
    }
    if (built == NULL) return NULL;
    PyErr_Format(PyExc_ImportError,
                 "%s was built for the canonical fields %R, but forensics.ingest.fields has %R: rebuild it "
                 "(python setup.py build_ext --inplace, or reinstall mailmortem)",
                 PyModule_GetName(module), built, fields);
    Py_DECREF(built);
    return NULL;
}

/* 0, or -1 with RuntimeError set when configure() has not agreed a table. */
static int fields_ready(void) {
    if (fields_agreed) return 0;
    PyErr_SetString(PyExc_RuntimeError, "the compiled reader's field table was not configured (configure(CANONICAL))");
    return -1;
}

/* ---- a batch: the columns a reader fills from a range of lines, or from lines given one by one ---- */

#define NTYPED 2 /* text columns typed here: the recipient's normal form, the msg_id's (mm_msg_id) */
#define NCOLS (NFIELDS + 1 + NTYPED) /* the line, the fields, then the typed ones */
#define LINE_COL 0
#define TS_COL (TS_FIELD + 1)
#define TYPED_COL (NFIELDS + 1) /* the first typed column */

/* A reader's job starts with its Batch: the code here takes a job as its Batch. */
typedef struct {
    const unsigned char *buf; /* the lines: a range buf[start, end) of them, or the data of lines given */
    size_t start, end;
    size_t rows, rows_cap;
    Column cols[NCOLS];
    int8_t *code;      /* per row: a logfmt line's problem, a JSON line's settled/blank/deferred */
    int64_t *ts;       /* the timestamp typed here: microseconds since the epoch, UTC (timestamp[us, UTC]) */
    uint8_t *ts_valid; /* NULL where the SQL's mm_ts types ts_text instead */
    size_t ts_nulls;
    int typed_differs[NTYPED]; /* a typed value differs from its text (else both columns may share buffers) */
    int flags;                 /* F_DIRTY, F_CRLF, F_LONE, F_NOMEM (_grammar.h) */
    unsigned char *scratch;    /* room to decode a line's values into */
    size_t scratch_cap;
} Batch;

/* Room for the next row and the offset after it. */
static int reserve_rows(Batch *b) {
    if (b->rows + 2 <= b->rows_cap) return 0;
    size_t cap = b->rows_cap ? b->rows_cap * 2 : 4096;
    if (grow_rows(b->cols, NCOLS, &b->code, &b->ts, &b->ts_valid, b->rows_cap, cap)) return -1;
    b->rows_cap = cap;
    return 0;
}

static void free_batch(Batch *b) {
    for (int c = 0; c < NCOLS; c++) free(b->cols[c].data), free(b->cols[c].offsets), free(b->cols[c].valid);
    free(b->code);
    free(b->ts);
    free(b->ts_valid);
    free(b->scratch);
}

/* The typed text columns: the field each types, and how. */
static const int typed_field[NTYPED] = {RECIPIENT_FIELD, MSG_ID_FIELD};
static const Typer typer[NTYPED] = {put_address, put_msg_id};

/* The row's typed columns and time, from its text columns (NULL where the text is: a line SQL reads is typed
 * there). */
static int type_row(Batch *b, size_t row) {
    for (int t = 0; t < NTYPED; t++) {
        const Column *text = &b->cols[typed_field[t] + 1];
        Column *typed = &b->cols[TYPED_COL + t];
        if (!is_set(text->valid, row)) {
            put_null(typed, row);
            continue;
        }
        int differs = typer[t](typed, row, (const unsigned char *)text->data + text->offsets[row],
                               (size_t)(text->offsets[row + 1] - text->offsets[row]));
        if (differs < 0) return -1;
        b->typed_differs[t] |= differs;
    }
    const Column *tc = &b->cols[TS_COL];
    int64_t us = 0;
    if (is_set(tc->valid, row)
        && iso_utc_us((const unsigned char *)tc->data + tc->offsets[row],
                      (size_t)(tc->offsets[row + 1] - tc->offsets[row]), &us))
        b->ts_valid[row / 8] |= (uint8_t)(1u << (row % 8));
    else
        b->ts_nulls++;
    b->ts[row] = us;
    return 0;
}

/* ---- a reader's entry points: a range read on up to two threads, or lines given one by one ---- */

/* What the code below needs of a reader. */
typedef struct {
    size_t job_size;                                                /* its Job's, which starts with its Batch */
    void *(*read_range)(void *job);                                 /* a job's range buf[start, end) */
    void (*read_given)(void *job, const int32_t *off, size_t rows); /* line i: buf[off[i], off[i + 1]) */
    PyObject *(*hand_over)(void *job);                              /* its Batch as Python objects, or NULL */
} Reader;

/* 1, or 0 with ValueError set when [start, end) is not a range of the buffer. */
static int range_inside(const Py_buffer *view, Py_ssize_t start, Py_ssize_t end) {
    if (start >= 0 && end <= view->len && start <= end) return 1;
    PyErr_SetString(PyExc_ValueError, "range outside the buffer");
    return 0;
}

/* n jobs, each a copy of model (a job of the reader holding its plan and options; its Batch is set after), or NULL
 * with MemoryError set. */
static char *jobs_like(const Reader *reader, const void *model, int n) {
    char *jobs = malloc((size_t)n * reader->job_size);
    if (jobs == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (int t = 0; t < n; t++) memcpy(jobs + (size_t)t * reader->job_size, model, reader->job_size);
    return jobs;
}

/* The list of batches of view[start, end) (a range inside it), read by jobs copied from model with the GIL
 * released. With threads > 1 the range is cut at a line past its middle and what follows the cut is read on a
 * thread of its own (or here, after the first part, when no thread could start). */
static PyObject *read_range(const Reader *reader, const void *model, const Py_buffer *view, size_t start, size_t end,
                            int threads) {
    char *jobs = jobs_like(reader, model, 2);
    if (jobs == NULL) return NULL;
    Batch *one = (Batch *)jobs, *two = (Batch *)(jobs + reader->job_size);
    size_t cut = threads > 1 && end > start ? split_point(view->buf, start, end) : end;
    int n = cut < end ? 2 : 1;
    *one = (Batch){.buf = view->buf, .start = start, .end = cut};
    *two = (Batch){.buf = view->buf, .start = cut, .end = end};
    Py_BEGIN_ALLOW_THREADS
    pthread_t helper;
    int helped = n == 2 && pthread_create(&helper, NULL, reader->read_range, two) == 0;
    reader->read_range(one);
    if (helped) pthread_join(helper, NULL);
    else if (n == 2) reader->read_range(two);
    Py_END_ALLOW_THREADS
    PyObject *batches = (one->flags | two->flags) & F_NOMEM ? PyErr_NoMemory() : PyList_New(n);
    for (int t = 0; batches && t < n; t++) {
        PyObject *batch = reader->hand_over(t ? (void *)two : (void *)one);
        if (batch == NULL) Py_CLEAR(batches);
        else PyList_SET_ITEM(batches, t, batch);
    }
    free_batch(one), free_batch(two), free(jobs);
    return batches;
}

/* The batch of lines given one by one as an Arrow string array's buffers (line i is data[off[i], off[i + 1]),
 * int32 offsets), read by a job copied from model on the calling thread with the GIL released. */
static PyObject *read_lines_given(const Reader *reader, const void *model, const Py_buffer *data,
                                  const Py_buffer *offsets) {
    Py_ssize_t rows = arrow_rows(data, offsets);
    char *job = rows < 0 ? NULL : jobs_like(reader, model, 1);
    if (job == NULL) return NULL;
    Batch *batch = (Batch *)job;
    *batch = (Batch){.buf = data->buf};
    Py_BEGIN_ALLOW_THREADS
    reader->read_given(job, offsets->buf, (size_t)rows);
    Py_END_ALLOW_THREADS
    PyObject *result = batch->flags & F_NOMEM ? PyErr_NoMemory() : reader->hand_over(job);
    free_batch(batch), free(job);
    return result;
}

#endif
