/* forensics/ingest/readers/_fields.h: the canonical fields as the compiled readers that fill them (forensics/ingest/readers/_logfmt.c, _jsonl.c)
 * are built: their count, names and order, and which of them the readers type (the recipient, the msg_id, the
 * time). The table itself is Python's (forensics.ingest.fields.CANONICAL): the Python side hands it to the
 * module's configure() right after import, which refuses (ImportError, so the reader counts as not installed) a
 * table other than this one, and the readers refuse to run before a table has been agreed. Include after
 * Python.h. */
#ifndef MAILMORTEM_FIELDS_H
#define MAILMORTEM_FIELDS_H

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

#endif
