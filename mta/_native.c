/* The Amortized MTA's in-memory core in C (optional; mta/native.py wraps it): the
 * Python type and module here, the state in _native_state.h, the algorithms in
 * _native_mta.h (one translation unit).
 *
 * The same algorithms as mta/amortized_mta.py, mta/tree.py and
 * mta/level_queue.py, on level queues held as C arrays of object
 * references: insert is Algorithm 3, eviction Algorithms 6 and 7 with the
 * lazy split of Algorithms 4 and 5, enforcement section 4.2.4 (single
 * evictions, then Algorithm 2 after log2 n of them), bulk eviction by
 * position.  The pure-Python modules stay the reference: every rule here
 * mirrors one there, and the engine tests run both against the oracle.
 *
 * Values stay Python objects.  combine is a Python callable, except for the
 * ready monoids mta/native.py recognises (KIND_*), whose combine is done
 * here with the same comparisons and additions the Python callable makes.
 *
 * Failure: if user code (combine, wsp, a comparison) raises during an
 * operation, the core keeps the exception and every later operation calls
 * raise_failed(exception, operation_name), which raises EngineFailedError.
 */
#include "_native_mta.h"

/* -- failure guard ------------------------------------------------------ */

static void *fail(Core *c, const char *name) {
    /* user code raised half-way: keep the exception, mark the core failed */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb) PyException_SetTraceback(value, tb);
    Py_INCREF(value);
    Py_XSETREF(c->failure, value);
    c->failed_in = name;
    PyErr_Restore(type, value, tb);
    return NULL;
}

static int check_usable(Core *c) {
    if (!c->failure) return 0;
    PyObject *r = PyObject_CallFunction(c->raise_failed, "Os", c->failure, c->failed_in);
    Py_XDECREF(r);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "engine failed");
    return -1;
}

#define GUARD(c) do { if ((c)->failure && check_usable(c) < 0) return NULL; } while (0)

/* -- Python methods ----------------------------------------------------- */

static PyObject *Core_insert(Core *c, PyObject *v) {
    GUARD(c);
    if (insert(c, v) < 0) return fail(c, "insert");
    Py_RETURN_NONE;
}

static PyObject *Core_evict(Core *c, PyObject *unused) {
    GUARD(c);
    if (c->levels[0].lo == c->levels[0].hi) {
        PyErr_SetString(c->empty_error, "evict() on an empty window");
        return NULL;
    }
    if (evict_one(c) < 0) return fail(c, "evict");
    Py_RETURN_NONE;
}

static PyObject *Core_bulk_evict_checked(Core *c, PyObject *arg) {
    GUARD(c);
    long long count = PyLong_AsLongLong(arg);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0 || count > c->levels[0].hi - c->levels[0].lo) {
        PyErr_SetString(PyExc_ValueError, "bulk_evict_checked: count out of range");
        return NULL;
    }
    if (bulk_evict(c, count) < 0) return fail(c, "bulk_evict");
    Py_RETURN_NONE;
}

static PyObject *Core_query(Core *c, PyObject *unused) {
    GUARD(c);
    PyObject *r = query(c);
    return r ? r : fail(c, "query");
}

static PyObject *Core_enforce(Core *c, PyObject *unused) {
    GUARD(c);
    long long n = enforce(c);
    return n < 0 ? fail(c, "enforce") : PyLong_FromLongLong(n);
}

static PyObject *Core_push(Core *c, PyObject *v) {
    GUARD(c);
    if (insert(c, v) < 0 || enforce(c) < 0) return fail(c, "push");
    PyObject *r = query(c);
    return r ? r : fail(c, "push");
}

/* slide(values, counts): both lists, the counts checked by the caller. */
static PyObject *Core_slide_checked(Core *c, PyObject *args) {
    PyObject *values, *counts;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &values, &PyList_Type, &counts)) return NULL;
    GUARD(c);
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (PyList_GET_SIZE(counts) != n) {
        PyErr_SetString(PyExc_ValueError, "slide_checked: one count per value");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (insert(c, PyList_GET_ITEM(values, i)) < 0) goto fail;
        long long k = PyLong_AsLongLong(PyList_GET_ITEM(counts, i));
        if (k == -1 && PyErr_Occurred()) goto fail;
        if (k == 1) {
            if (evict_one(c) < 0) goto fail;
        } else if (k && bulk_evict(c, k) < 0) {
            goto fail;
        }
        PyObject *r = query(c);
        if (!r) goto fail;
        PyList_SET_ITEM(out, i, r);
    }
    return out;
fail:
    Py_DECREF(out);
    return fail(c, "slide");
}

static PyObject *Core_height(Core *c, PyObject *unused) { return PyLong_FromLong(c->nlev); }

static PyObject *Core_head(Core *c, PyObject *unused) {
    Level *q = &c->levels[0];
    if (q->lo == q->hi) { PyErr_SetString(c->empty_error, "head() of an empty window"); return NULL; }
    PyObject *v = AT(q, q->lo);
    Py_INCREF(v);
    return v;
}

static PyObject *Core_local_size(Core *c, PyObject *unused) {
    long long n = 0;
    for (int l = 0; l < c->nlev; l++) n += c->levels[l].hi - c->levels[l].base;
    return PyLong_FromLongLong(n + c->nstack + 2 + c->nlev);
}

static PyObject *Core_level_bases(Core *c, PyObject *unused) {
    PyObject *out = PyList_New(c->nlev);
    for (int l = 0; out && l < c->nlev; l++) {
        PyObject *b = PyLong_FromLongLong(c->levels[l].base);
        if (!b) { Py_CLEAR(out); break; }
        PyList_SET_ITEM(out, l, b);
    }
    return out;
}

static Py_ssize_t Core_len(Core *c) { return (Py_ssize_t)(c->levels[0].hi - c->levels[0].lo); }

static PyObject *Core_failure(Core *c, void *unused) {
    PyObject *f = c->failure ? c->failure : Py_None;
    Py_INCREF(f);
    return f;
}

static int Core_init(Core *c, PyObject *args, PyObject *kw) {
    static char *names[] = {"combine", "identity", "kind", "wsp", "raise_failed", "empty_error", "compact_after", NULL};
    PyObject *comb, *ident, *wsp, *raise_failed, *empty_error;
    int kind;
    long long compact_after;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiOOOL", names, &comb, &ident, &kind, &wsp, &raise_failed,
                                     &empty_error, &compact_after))
        return -1;
    if (c->combine) { PyErr_SetString(PyExc_TypeError, "AmortizedCore is initialised once"); return -1; }
    if (kind < KIND_CALL || kind > KIND_MOMENTS) { PyErr_SetString(PyExc_ValueError, "unknown combine kind"); return -1; }
    Py_INCREF(comb); c->combine = comb;
    Py_INCREF(ident); c->identity = ident;
    Py_INCREF(wsp); c->wsp = wsp;
    Py_INCREF(raise_failed); c->raise_failed = raise_failed;
    Py_INCREF(empty_error); c->empty_error = empty_error;
    c->kind = kind;
    c->compact_after = compact_after;
    level_init(&c->levels[0], 0);
    c->nlev = 1;
    return 0;
}

static void Core_dealloc(Core *c) {
    for (int l = 0; l < c->nlev; l++) level_discard(&c->levels[l]);
    stack_clear(c);
    PyMem_Free(c->stack);
    Py_XDECREF(c->r0);
    Py_XDECREF(c->r1);
    Py_XDECREF(c->result);
    Py_XDECREF(c->combine);
    Py_XDECREF(c->identity);
    Py_XDECREF(c->wsp);
    Py_XDECREF(c->raise_failed);
    Py_XDECREF(c->empty_error);
    Py_XDECREF(c->failure);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef Core_methods[] = {
    {"insert", (PyCFunction)Core_insert, METH_O, "Algorithm 3: append v.  O(1) amortized."},
    {"evict", (PyCFunction)Core_evict, METH_NOARGS, "Algorithms 6 and 7: remove the oldest.  O(1) amortized."},
    {"bulk_evict_checked", (PyCFunction)Core_bulk_evict_checked, METH_O,
     "Remove count oldest (0 <= count <= len, checked by the caller).  O(log n)."},
    {"query", (PyCFunction)Core_query, METH_NOARGS, "The window's aggregate (identity when empty).  O(1)."},
    {"enforce", (PyCFunction)Core_enforce, METH_NOARGS, "Section 4.2.4; returns how many left.  O(log n) calls."},
    {"push", (PyCFunction)Core_push, METH_O, "insert(v), enforce(), query()."},
    {"slide_checked", (PyCFunction)Core_slide_checked, METH_VARARGS,
     "slide(values, counts) on two lists, counts checked by the caller."},
    {"height", (PyCFunction)Core_height, METH_NOARGS, "Levels in use."},
    {"head", (PyCFunction)Core_head, METH_NOARGS, "The oldest element."},
    {"local_size", (PyCFunction)Core_local_size, METH_NOARGS, "References held."},
    {"level_bases", (PyCFunction)Core_level_bases, METH_NOARGS,
     "Each level's first held position (above its live head once compacted)."},
    {NULL},
};

static PyGetSetDef Core_getset[] = {
    {"failure", (getter)Core_failure, NULL, "The exception user code raised, or None.", NULL},
    {NULL},
};

static PySequenceMethods Core_as_sequence = {.sq_length = (lenfunc)Core_len};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mta._native.AmortizedCore",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The Amortized MTA over in-memory level queues (see mta/native.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
    .tp_getset = Core_getset,
    .tp_as_sequence = &Core_as_sequence,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mta._native", "Compiled Amortized MTA core.", -1, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "AmortizedCore", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "KIND_CALL", KIND_CALL);
    PyModule_AddIntConstant(m, "KIND_ADD", KIND_ADD);
    PyModule_AddIntConstant(m, "KIND_BUILTIN_MAX", KIND_BUILTIN_MAX);
    PyModule_AddIntConstant(m, "KIND_SELECT_GT", KIND_SELECT_GT);
    PyModule_AddIntConstant(m, "KIND_SELECT_LT", KIND_SELECT_LT);
    PyModule_AddIntConstant(m, "KIND_MOMENTS", KIND_MOMENTS);
    return m;
}
