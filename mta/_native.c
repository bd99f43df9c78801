/* The in-memory cores of the two MTAs in C (optional; mta/native.py wraps
 * them): the Python types and module here, the state in _native_state.h,
 * the shared level machinery in _native_tree.h, the Amortized MTA's
 * algorithms in _native_mta.h and the Log MTA's in _native_lmta.h (one
 * translation unit); _native_mtree.h and _native_multi.h hold a shared plan's
 * execution for mta/multi (mta/multi/compiled.py); _native_moments.h the
 * sliding windows' moments and _native_extreme.h their max and min, for the
 * columnar engine (spark_ops/kernels.py).
 *
 * The same algorithms as mta/amortized_mta.py, mta/log_mta.py, mta/tree.py
 * and mta/level_queue.py, on level queues held as C arrays of object
 * references.  Amortized MTA: insert is Algorithm 3, eviction Algorithms 6
 * and 7 with the lazy split of Algorithms 4 and 5, enforcement section
 * 4.2.4 (single evictions, then Algorithm 2 after log2 n of them), bulk
 * eviction by position.  Log MTA: insert is Algorithm 1, enforcement
 * Algorithm 2, eviction of any count by position.  The pure-Python modules
 * stay the reference: every rule here mirrors one there, and the engine
 * tests run both against the oracle.
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
#include "_native_lmta.h"
#include "_native_multi.h"
#include "_native_moments.h"
#include "_native_extreme.h"

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

/* -- operations, once for both engines ----------------------------------
 *
 * Each takes the engine's algorithms as constant function arguments: the
 * compiler specialises them per engine, and the rule (what push and slide
 * do, what a refusal leaves) stays in one place. */

typedef int (*insert_fn)(Core *, PyObject *);
typedef int (*evict_fn)(Core *, long long);  /* count checked: 0 <= count <= len */
typedef PyObject *(*query_fn)(Core *);
typedef long long (*enforce_fn)(Core *);

static inline PyObject *op_insert(Core *c, PyObject *v, insert_fn ins) {
    GUARD(c);
    if (ins(c, v) < 0) return fail(c, "insert");
    Py_RETURN_NONE;
}

static inline PyObject *op_evict(Core *c, evict_fn ev) {
    GUARD(c);
    if (c->levels[0].lo == c->levels[0].hi) {
        PyErr_SetString(c->empty_error, "evict() on an empty window");
        return NULL;
    }
    if (ev(c, 1) < 0) return fail(c, "evict");
    Py_RETURN_NONE;
}

static inline PyObject *op_bulk_evict(Core *c, PyObject *arg, evict_fn ev) {
    GUARD(c);
    long long count = PyLong_AsLongLong(arg);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0 || count > c->levels[0].hi - c->levels[0].lo) {
        PyErr_SetString(PyExc_ValueError, "bulk_evict_checked: count out of range");
        return NULL;
    }
    if (ev(c, count) < 0) return fail(c, "bulk_evict");
    Py_RETURN_NONE;
}

static inline PyObject *op_query(Core *c, query_fn qry) {
    GUARD(c);
    PyObject *r = qry(c);
    return r ? r : fail(c, "query");
}

static inline PyObject *op_enforce(Core *c, enforce_fn enf) {
    GUARD(c);
    long long n = enf(c);
    return n < 0 ? fail(c, "enforce") : PyLong_FromLongLong(n);
}

static inline PyObject *op_push(Core *c, PyObject *v, insert_fn ins, enforce_fn enf, query_fn qry) {
    GUARD(c);
    if (ins(c, v) < 0 || enf(c) < 0) return fail(c, "push");
    PyObject *r = qry(c);
    return r ? r : fail(c, "push");
}

/* slide(values, counts): both lists, the counts checked by the caller. */
static inline PyObject *op_slide(Core *c, PyObject *args, insert_fn ins, evict_fn ev, query_fn qry) {
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
        if (ins(c, PyList_GET_ITEM(values, i)) < 0) goto fail;
        long long k = PyLong_AsLongLong(PyList_GET_ITEM(counts, i));
        if (k == -1 && PyErr_Occurred()) goto fail;
        if (ev(c, k) < 0) goto fail;
        PyObject *r = qry(c);
        if (!r) goto fail;
        PyList_SET_ITEM(out, i, r);
    }
    return out;
fail:
    Py_DECREF(out);
    return fail(c, "slide");
}

/* -- the Amortized MTA's methods ---------------------------------------- */

/* as Engine.slide calls it: evict() for one, bulk_evict(k) for more */
static int amta_evict(Core *c, long long k) {
    return k == 1 ? evict_one(c) : k ? bulk_evict(c, k) : 0;
}

static PyObject *Core_insert(Core *c, PyObject *v) { return op_insert(c, v, insert); }
static PyObject *Core_evict(Core *c, PyObject *unused) { return op_evict(c, amta_evict); }
static PyObject *Core_bulk_evict_checked(Core *c, PyObject *arg) { return op_bulk_evict(c, arg, bulk_evict); }
static PyObject *Core_query(Core *c, PyObject *unused) { return op_query(c, query); }
static PyObject *Core_enforce(Core *c, PyObject *unused) { return op_enforce(c, enforce); }
static PyObject *Core_push(Core *c, PyObject *v) { return op_push(c, v, insert, enforce, query); }
static PyObject *Core_slide_checked(Core *c, PyObject *args) { return op_slide(c, args, insert, amta_evict, query); }

/* -- the Log MTA's methods ---------------------------------------------- */

static PyObject *Log_insert(Core *c, PyObject *v) { return op_insert(c, v, log_insert); }
static PyObject *Log_evict(Core *c, PyObject *unused) { return op_evict(c, log_bulk_evict); }
static PyObject *Log_bulk_evict_checked(Core *c, PyObject *arg) { return op_bulk_evict(c, arg, log_bulk_evict); }
static PyObject *Log_query(Core *c, PyObject *unused) { return op_query(c, log_query); }
static PyObject *Log_enforce(Core *c, PyObject *unused) { return op_enforce(c, log_enforce); }
static PyObject *Log_push(Core *c, PyObject *v) { return op_push(c, v, log_insert, log_enforce, log_query); }
static PyObject *Log_slide_checked(Core *c, PyObject *args) {
    return op_slide(c, args, log_insert, log_bulk_evict, log_query);
}

/* -- shared methods ----------------------------------------------------- */

static PyObject *Core_height(Core *c, PyObject *unused) { return PyLong_FromLong(c->nlev); }

static PyObject *Core_head(Core *c, PyObject *unused) {
    Level *q = &c->levels[0];
    if (q->lo == q->hi) { PyErr_SetString(c->empty_error, "head() of an empty window"); return NULL; }
    PyObject *v = AT(q, q->lo);
    Py_INCREF(v);
    return v;
}

/* References held: the levels' items and one per level (as
 * LevelEngine.local_size), plus the Stack and the Result Pair (the
 * Amortized MTA's; a Log MTA core has neither). */
static PyObject *Core_local_size(Core *c, PyObject *unused) {
    long long n = 0;
    for (int l = 0; l < c->nlev; l++) n += c->levels[l].hi - c->levels[l].base;
    return PyLong_FromLongLong(n + c->nlev + c->nstack + (c->is_log ? 0 : 2));
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

static PyTypeObject LogCoreType;

static int Core_init(Core *c, PyObject *args, PyObject *kw) {
    static char *names[] = {"combine", "identity", "kind", "wsp", "raise_failed", "empty_error", "compact_after", NULL};
    PyObject *comb, *ident, *wsp, *raise_failed, *empty_error;
    int kind;
    long long compact_after;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiOOOL", names, &comb, &ident, &kind, &wsp, &raise_failed,
                                     &empty_error, &compact_after))
        return -1;
    if (c->combine) { PyErr_SetString(PyExc_TypeError, "a core is initialised once"); return -1; }
    if (!combine_spec_ok(kind, comb)) return -1;
    Py_INCREF(comb); c->combine = comb;
    Py_INCREF(ident); c->identity = ident;
    Py_INCREF(wsp); c->wsp = wsp;
    Py_INCREF(raise_failed); c->raise_failed = raise_failed;
    Py_INCREF(empty_error); c->empty_error = empty_error;
    c->kind = kind;
    c->compact_after = compact_after;
    c->is_log = Py_TYPE(c) == &LogCoreType;
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

static PyMethodDef Log_methods[] = {
    {"insert", (PyCFunction)Log_insert, METH_O, "Algorithm 1: append v, update the tails.  O(log n)."},
    {"evict", (PyCFunction)Log_evict, METH_NOARGS, "Remove the oldest (a bulk eviction of one).  O(log n)."},
    {"bulk_evict_checked", (PyCFunction)Log_bulk_evict_checked, METH_O,
     "Remove count oldest (0 <= count <= len, checked by the caller).  O(log n)."},
    {"query", (PyCFunction)Log_query, METH_NOARGS, "The root (identity when empty).  O(1)."},
    {"enforce", (PyCFunction)Log_enforce, METH_NOARGS, "Algorithm 2; returns how many left.  O(log n) calls."},
    {"push", (PyCFunction)Log_push, METH_O, "insert(v), enforce(), query()."},
    {"slide_checked", (PyCFunction)Log_slide_checked, METH_VARARGS,
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

static PyTypeObject LogCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mta._native.LogCore",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The Log MTA over in-memory level queues (see mta/native.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Log_methods,
    .tp_getset = Core_getset,
    .tp_as_sequence = &Core_as_sequence,
};

static PyMethodDef module_functions[] = {
    {"window_moments", window_moments, METH_VARARGS,
     "window_moments(x, start, end, mean_out, m2_out) -> bool: the moments of sliding windows "
     "(_native_moments.h).  O(len(x) + len(start))."},
    {"window_extreme", window_extreme, METH_VARARGS,
     "window_extreme(x, start, end, out, is_max) -> bool: the max or min of sliding windows "
     "(_native_extreme.h).  O(len(x) + len(start))."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mta._native", "Compiled MTA cores.", -1,
                                    module_functions};

static int add_type(PyObject *m, const char *name, PyTypeObject *type) {
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__native(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (add_type(m, "AmortizedCore", &CoreType) < 0 || add_type(m, "LogCore", &LogCoreType) < 0
        || add_type(m, "SharedRowsCore", &MultiType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "KIND_CALL", KIND_CALL);
    PyModule_AddIntConstant(m, "KIND_ADD", KIND_ADD);
    PyModule_AddIntConstant(m, "KIND_BUILTIN_MAX", KIND_BUILTIN_MAX);
    PyModule_AddIntConstant(m, "KIND_SELECT_GT", KIND_SELECT_GT);
    PyModule_AddIntConstant(m, "KIND_SELECT_LT", KIND_SELECT_LT);
    PyModule_AddIntConstant(m, "KIND_MOMENTS", KIND_MOMENTS);
    PyModule_AddIntConstant(m, "KIND_PRODUCT", KIND_PRODUCT);
    return m;
}
