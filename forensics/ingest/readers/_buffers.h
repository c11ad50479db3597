/* The Python side the compiled readers share (forensics/ingest/readers/_logfmt.c, _jsonl.c, _unwrap.c): memory they filled,
 * owned by a Block that pyarrow.py_buffer keeps alive, an Arrow string array's buffers checked before use, and the
 * module made with its constants.
 * Include after Python.h; define MM_BLOCK_NAME (the type's name in the module) first. */
#ifndef MAILMORTEM_BUFFERS_H
#define MAILMORTEM_BUFFERS_H

#include <stdint.h>
#include <stdlib.h>

#ifdef MM_BLOCK_NAME
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
    .tp_name = MM_BLOCK_NAME,
    .tp_basicsize = sizeof(Block),
    .tp_dealloc = (destructor)block_dealloc,
    .tp_as_buffer = &block_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory filled by a compiled reader, readable as a buffer.",
};

/* Takes ownership of data (freed with the block, or now if the block cannot be made). */
static PyObject *block_of(void *data, Py_ssize_t size) {
    if (data == NULL && (data = malloc(1)) == NULL) return PyErr_NoMemory(); /* pyarrow refuses NULL */
    Block *block = PyObject_New(Block, &BlockType);
    if (block == NULL) {
        free(data);
        return NULL;
    }
    block->data = data;
    block->size = size;
    return (PyObject *)block;
}
#endif

/* The rows of an Arrow string array given as its data and int32 offsets (line i is data[offsets[i]:offsets[i +
 * 1]]), or -1 with ValueError set when the offsets are not rows + 1 ascending int32s within the data. */
static Py_ssize_t arrow_rows(const Py_buffer *data, const Py_buffer *offsets) {
    const int32_t *off = offsets->buf;
    size_t rows = offsets->len >= (Py_ssize_t)sizeof(int32_t) ? (size_t)offsets->len / sizeof(int32_t) - 1 : 0;
    if (offsets->len % sizeof(int32_t) || (rows && off[0] < 0) || (rows && off[rows] > data->len)) {
        PyErr_SetString(PyExc_ValueError, "offsets: int32, rows + 1 of them, within the data");
        return -1;
    }
    for (size_t i = 0; i < rows; i++)
        if (off[i] > off[i + 1]) {
            PyErr_SetString(PyExc_ValueError, "offsets: not ascending");
            return -1;
        }
    return (Py_ssize_t)rows;
}

/* A constant of a module, as Python reads it: its name and value. */
typedef struct {
    const char *name;
    long value;
} IntConstant;

/* The module `name` with its methods and constants (up to the one named NULL), the Block type made ready first
 * where the reader has one; or NULL with an error set. Once per process: the definition is kept here. */
static PyObject *module_with(const char *name, PyMethodDef *methods, const IntConstant *constants) {
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, .m_size = -1};
    def.m_name = name, def.m_methods = methods;
#ifdef MM_BLOCK_NAME
    if (PyType_Ready(&BlockType) < 0) return NULL;
#endif
    PyObject *m = PyModule_Create(&def);
    for (const IntConstant *c = constants; m && c->name; c++)
        if (PyModule_AddIntConstant(m, c->name, c->value)) Py_CLEAR(m);
    return m;
}

#endif
