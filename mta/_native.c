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

/* -- re-entry guard -----------------------------------------------------
 *
 * An operation calls user code (combine, wsp, comparisons, the finalisers
 * of the references it drops) while its state is half-updated; a call back
 * into the same core from there would work on that state.  Every method
 * that reads or changes the window's objects enters the core first, and
 * leaves it on every way out: a call that finds the core busy is refused
 * before it changes anything (RuntimeError), and the operation it was made
 * from goes on, or fails the core if the error reaches it through user
 * code.  A core made by __new__ alone (or cleared by the garbage
 * collector) has no combine and refuses every call the same way. */

static int ready(Core *c, const char *name) {
    if (!c->combine) {
        PyErr_Format(PyExc_RuntimeError, "%s.%s(): the core is not initialised", Py_TYPE(c)->tp_name, name);
        return 0;
    }
    if (c->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s.%s() called while an operation on the same window runs (from its "
                     "combine, slide policy or a finaliser): re-entrant calls are refused", Py_TYPE(c)->tp_name, name);
        return 0;
    }
    return 1;
}

/* ready, not failed, and now busy; else -1 with the error set */
static int enter(Core *c, const char *name) {
    if (!ready(c, name) || (c->failure && check_usable(c) < 0)) return -1;
    c->busy = 1;
    return 0;
}

/* leave the core, returning r (NULL: the error set) */
static PyObject *leave(Core *c, PyObject *r) {
    c->busy = 0;
    return r;
}

/* -- operations, once for both engines ----------------------------------
 *
 * Each takes the engine's algorithms as constant function arguments: the
 * compiler specialises them per engine, and the rule (what push and slide
 * do, what a refusal leaves) stays in one place.  fail() runs before the
 * core is left: normalising the exception and dropping references run
 * Python code, which must find the core busy. */

typedef int (*insert_fn)(Core *, PyObject *);
typedef int (*evict_fn)(Core *, long long);  /* count checked: 0 <= count <= len */
typedef PyObject *(*query_fn)(Core *);
typedef long long (*enforce_fn)(Core *);

static inline long long window_size(Core *c) { return c->levels[0].hi - c->levels[0].lo; }

static inline PyObject *op_insert(Core *c, PyObject *v, insert_fn ins) {
    if (enter(c, "insert") < 0) return NULL;
    return leave(c, ins(c, v) < 0 ? fail(c, "insert") : Py_NewRef(Py_None));
}

static inline PyObject *op_evict(Core *c, evict_fn ev) {
    if (enter(c, "evict") < 0) return NULL;
    if (!window_size(c)) {
        PyErr_SetString(c->empty_error, "evict() on an empty window");
        return leave(c, NULL);
    }
    return leave(c, ev(c, 1) < 0 ? fail(c, "evict") : Py_NewRef(Py_None));
}

static inline PyObject *op_bulk_evict(Core *c, PyObject *arg, evict_fn ev) {
    if (enter(c, "bulk_evict_checked") < 0) return NULL;
    long long count = PyLong_AsLongLong(arg);
    if (count == -1 && PyErr_Occurred()) return leave(c, NULL);
    if (count < 0 || count > window_size(c)) {
        PyErr_SetString(PyExc_ValueError, "bulk_evict_checked: count out of range");
        return leave(c, NULL);
    }
    return leave(c, ev(c, count) < 0 ? fail(c, "bulk_evict") : Py_NewRef(Py_None));
}

static inline PyObject *op_query(Core *c, query_fn qry) {
    if (enter(c, "query") < 0) return NULL;
    PyObject *r = qry(c);
    return leave(c, r ? r : fail(c, "query"));
}

static inline PyObject *op_enforce(Core *c, enforce_fn enf) {
    if (enter(c, "enforce") < 0) return NULL;
    long long n = enf(c);
    return leave(c, n < 0 ? fail(c, "enforce") : PyLong_FromLongLong(n));
}

static inline PyObject *op_push(Core *c, PyObject *v, insert_fn ins, enforce_fn enf, query_fn qry) {
    if (enter(c, "push") < 0) return NULL;
    if (ins(c, v) < 0 || enf(c) < 0) return leave(c, fail(c, "push"));
    PyObject *r = qry(c);
    return leave(c, r ? r : fail(c, "push"));
}

/* slide(values, counts) on two lists.  Both are copied first (user code the
 * loop runs could change the caller's lists) and every count is checked
 * before any change: 0 <= count <= the window's size after its insert. */
static PyObject *slide_loop(Core *c, PyObject *values, PyObject *counts, insert_fn ins, evict_fn ev,
                            query_fn qry) {
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (PyList_GET_SIZE(counts) != n) {
        PyErr_SetString(PyExc_ValueError, "slide_checked: one count per value");
        return NULL;
    }
    PyObject *vs = PyList_AsTuple(values), *ks = PyList_AsTuple(counts), *out = NULL;
    long long *k = PyMem_Malloc((size_t)n * sizeof(long long) + 1);
    if (!vs || !ks || !k) {
        if (!k) PyErr_NoMemory();
        goto done;
    }
    long long held = window_size(c);
    for (Py_ssize_t i = 0; i < n; i++) {
        k[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(ks, i));
        if (k[i] == -1 && PyErr_Occurred()) goto done;
        if (k[i] < 0 || k[i] > held + 1) {
            PyErr_Format(PyExc_ValueError, "slide_checked: count %lld at %zd is outside 0..%lld", k[i], i, held + 1);
            goto done;
        }
        held += 1 - k[i];
    }
    if (!(out = PyList_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = NULL;
        if (ins(c, PyTuple_GET_ITEM(vs, i)) < 0 || ev(c, k[i]) < 0 || !(r = qry(c))) {
            fail(c, "slide");
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, r);
    }
done:
    Py_XDECREF(vs);
    Py_XDECREF(ks);
    PyMem_Free(k);
    return out;
}

static inline PyObject *op_slide(Core *c, PyObject *args, insert_fn ins, evict_fn ev, query_fn qry) {
    PyObject *values, *counts;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &values, &PyList_Type, &counts)) return NULL;
    if (enter(c, "slide_checked") < 0) return NULL;
    return leave(c, slide_loop(c, values, counts, ins, ev, qry));
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

/* a failed core's head too: its first level's live slots stay held */
static PyObject *Core_head(Core *c, PyObject *unused) {
    if (!ready(c, "head")) return NULL;
    Level *q = &c->levels[0];
    if (q->lo == q->hi) { PyErr_SetString(c->empty_error, "head() of an empty window"); return NULL; }
    return Py_NewRef(AT(q, q->lo));
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
    if (c->combine || c->busy) { PyErr_SetString(PyExc_TypeError, "a core is initialised once"); return -1; }
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

/* Drop everything the core holds, leaving it without a combine, as
 * __new__ makes one: it then refuses every call.  Busy meanwhile: the
 * references dropped may run finalisers. */
static int Core_clear(Core *c) {
    int was_busy = c->busy;
    c->busy = 1;
    for (int l = 0; l < c->nlev; l++) level_discard(&c->levels[l]);
    c->nlev = 0;
    stack_clear(c);
    PyMem_Free(c->stack);
    c->stack = NULL;
    c->capstack = 0;
    Py_CLEAR(c->r0);
    Py_CLEAR(c->r1);
    Py_CLEAR(c->result);
    Py_CLEAR(c->combine);
    Py_CLEAR(c->identity);
    Py_CLEAR(c->wsp);
    Py_CLEAR(c->raise_failed);
    Py_CLEAR(c->empty_error);
    Py_CLEAR(c->failure);
    c->busy = was_busy;
    return 0;
}

/* Every reference the core holds: a failed core's exception holds the
 * caller's frame through its traceback, and that frame the engine. */
static int Core_traverse(Core *c, visitproc visit, void *arg) {
    for (int l = 0; l < c->nlev; l++) {
        Level *q = &c->levels[l];
        for (long long i = q->base; i < q->hi; i++) Py_VISIT(AT(q, i));
    }
    for (Py_ssize_t i = 0; i < c->nstack; i++) Py_VISIT(c->stack[i]);
    Py_VISIT(c->r0);
    Py_VISIT(c->r1);
    Py_VISIT(c->result);
    Py_VISIT(c->combine);
    Py_VISIT(c->identity);
    Py_VISIT(c->wsp);
    Py_VISIT(c->raise_failed);
    Py_VISIT(c->empty_error);
    Py_VISIT(c->failure);
    return 0;
}

static void Core_dealloc(Core *c) {
    PyObject_GC_UnTrack(c);
    Core_clear(c);
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
    {"mark_failed", (PyCFunction)Core_mark_failed, METH_VARARGS, "Fail the core as the wrapper failed."},
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
    {"mark_failed", (PyCFunction)Core_mark_failed, METH_VARARGS, "Fail the core as the wrapper failed."},
    {NULL},
};

static PyGetSetDef Core_getset[] = {
    {"failure", (getter)Core_failure, NULL, "The exception user code raised, or None.", NULL},
    {"failed_in", (getter)Core_failed_in, NULL, "The operation it was raised in, or None.", NULL},
    {NULL},
};

static PySequenceMethods Core_as_sequence = {.sq_length = (lenfunc)Core_len};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mta._native.AmortizedCore",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The Amortized MTA over in-memory level queues (see mta/native.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_traverse = (traverseproc)Core_traverse,
    .tp_clear = (inquiry)Core_clear,
    .tp_free = PyObject_GC_Del,
    .tp_methods = Core_methods,
    .tp_getset = Core_getset,
    .tp_as_sequence = &Core_as_sequence,
};

static PyTypeObject LogCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mta._native.LogCore",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The Log MTA over in-memory level queues (see mta/native.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_traverse = (traverseproc)Core_traverse,
    .tp_clear = (inquiry)Core_clear,
    .tp_free = PyObject_GC_Del,
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
