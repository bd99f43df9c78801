/* The compiled cores' state: the Core object (one struct for both MTAs), the
 * combines, level queues and the Amortized MTA's Stack (included by
 * mta/_native.c, one translation unit). */
#ifndef MTA_NATIVE_STATE_H
#define MTA_NATIVE_STATE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { KIND_CALL = 0, KIND_ADD = 1, KIND_BUILTIN_MAX = 2, KIND_SELECT_GT = 3, KIND_SELECT_LT = 4, KIND_MOMENTS = 5,
       KIND_PRODUCT = 6 };

#define MAX_LEVELS 64 /* positions are < 2**63: at most 64 levels */

typedef struct {
    PyObject **items;     /* items[i - base] for positions base <= i < hi */
    Py_ssize_t cap;
    long long base, lo, hi;
} Level;

typedef struct {
    PyObject_HEAD
    Level levels[MAX_LEVELS];
    int nlev;
    int is_log;                  /* a Log MTA core: levels only, the rest unused */
    PyObject *r0, *r1, *result;  /* the Amortized MTA's Result Pair; NULL: EMPTY */
    PyObject **stack;
    Py_ssize_t nstack, capstack;
    int split_stale;
    int kind;
    int busy;                    /* an operation runs: user code it calls may not call back in */
    PyObject *combine, *identity, *wsp, *raise_failed, *empty_error;  /* combine NULL: not initialised */
    PyObject *failure;           /* the exception user code raised, or NULL */
    const char *failed_in;
    long long compact_after;
} Core;

/* -- combine ------------------------------------------------------------ */

static PyObject *select_by(PyObject *a, PyObject *b, int op) {
    /* mta.aggregators._select: b if a is None or b op a, else a (b None: a) */
    if (b == Py_None) { Py_INCREF(a); return a; }
    if (a == Py_None) { Py_INCREF(b); return b; }
    int wins = PyObject_RichCompareBool(b, a, op);
    if (wins < 0) return NULL;
    PyObject *r = wins ? b : a;
    Py_INCREF(r);
    return r;
}

/* mta.aggregators._moments_combine on (count, mean, M2) triples, the same
 * operations in the same order; anything but two 3-tuples calls it. */
static PyObject *moments(PyObject *fn, PyObject *a, PyObject *b) {
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) || PyTuple_GET_SIZE(a) != 3 || PyTuple_GET_SIZE(b) != 3) {
        PyObject *args[2] = {a, b};
        return PyObject_Vectorcall(fn, args, 2, NULL);
    }
    PyObject *na = PyTuple_GET_ITEM(a, 0), *nb = PyTuple_GET_ITEM(b, 0);
    int t = PyObject_IsTrue(na);
    if (t <= 0) { if (t < 0) return NULL; Py_INCREF(b); return b; }
    if ((t = PyObject_IsTrue(nb)) <= 0) { if (t < 0) return NULL; Py_INCREF(a); return a; }
    PyObject *n = NULL, *delta = NULL, *x = NULL, *y = NULL, *mean = NULL, *m2 = NULL, *out = NULL;
    if (!(n = PyNumber_Add(na, nb))) goto done;
    if (!(delta = PyNumber_Subtract(PyTuple_GET_ITEM(b, 1), PyTuple_GET_ITEM(a, 1)))) goto done;
    /* a[1] + delta * nb / n */
    if (!(x = PyNumber_Multiply(delta, nb))) goto done;
    Py_SETREF(x, PyNumber_TrueDivide(x, n));
    if (!x || !(mean = PyNumber_Add(PyTuple_GET_ITEM(a, 1), x))) goto done;
    /* a[2] + b[2] + delta * delta * na * nb / n */
    Py_SETREF(x, PyNumber_Multiply(delta, delta));
    if (!x) goto done;
    Py_SETREF(x, PyNumber_Multiply(x, na));
    if (!x) goto done;
    Py_SETREF(x, PyNumber_Multiply(x, nb));
    if (!x) goto done;
    Py_SETREF(x, PyNumber_TrueDivide(x, n));
    if (!x || !(y = PyNumber_Add(PyTuple_GET_ITEM(a, 2), PyTuple_GET_ITEM(b, 2)))) goto done;
    if (!(m2 = PyNumber_Add(y, x))) goto done;
    out = PyTuple_Pack(3, n, mean, m2);
done:
    Py_XDECREF(n);
    Py_XDECREF(delta);
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(mean);
    Py_XDECREF(m2);
    return out;
}

static inline PyObject *combine_with(int kind, PyObject *fn, PyObject *a, PyObject *b);

/* A product of monoids' combine (mta.monoid.product_monoid), componentwise:
 * spec is (the product's Python combine, its components' kinds, the objects
 * those kinds take), as mta.native.combine_spec builds it, so no Python frame
 * runs for the product itself and ready components combine natively.  The
 * components run in order, as the Python combine runs them; anything but two
 * tuples of the product's width calls the Python combine. */
static PyObject *product(PyObject *spec, PyObject *a, PyObject *b) {
    PyObject *kinds = PyTuple_GET_ITEM(spec, 1), *fns = PyTuple_GET_ITEM(spec, 2);
    Py_ssize_t n = PyTuple_GET_SIZE(fns);
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) || PyTuple_GET_SIZE(a) != n || PyTuple_GET_SIZE(b) != n) {
        PyObject *args[2] = {a, b};
        return PyObject_Vectorcall(PyTuple_GET_ITEM(spec, 0), args, 2, NULL);
    }
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = combine_with((int)PyLong_AsLong(PyTuple_GET_ITEM(kinds, i)), PyTuple_GET_ITEM(fns, i),
                                   PyTuple_GET_ITEM(a, i), PyTuple_GET_ITEM(b, i));
        if (!r) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, i, r);
    }
    return out;
}

/* Whether (kind, fn) is a combine a core can run: a known kind, and for
 * KIND_PRODUCT a spec as product() reads it, its components checked the same
 * way (sets a ValueError when not). */
static int combine_spec_ok(int kind, PyObject *fn) {
    if (kind < KIND_CALL || kind > KIND_PRODUCT) { PyErr_SetString(PyExc_ValueError, "unknown combine kind"); return 0; }
    if (kind != KIND_PRODUCT) return 1;
    if (!PyTuple_CheckExact(fn) || PyTuple_GET_SIZE(fn) != 3 || !PyTuple_CheckExact(PyTuple_GET_ITEM(fn, 1))
        || !PyTuple_CheckExact(PyTuple_GET_ITEM(fn, 2))
        || PyTuple_GET_SIZE(PyTuple_GET_ITEM(fn, 1)) != PyTuple_GET_SIZE(PyTuple_GET_ITEM(fn, 2))) {
        PyErr_SetString(PyExc_ValueError, "a product combine is (combine, kinds, callables) of one width");
        return 0;
    }
    PyObject *kinds = PyTuple_GET_ITEM(fn, 1), *fns = PyTuple_GET_ITEM(fn, 2);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kinds); i++) {
        long k = PyLong_Check(PyTuple_GET_ITEM(kinds, i)) ? PyLong_AsLong(PyTuple_GET_ITEM(kinds, i)) : -1;
        if (k == -1 && PyErr_Occurred()) return 0;
        if (!combine_spec_ok((int)k, PyTuple_GET_ITEM(fns, i))) return 0;
    }
    return 1;
}

/* the combine of kind (fn: the Python callable, for KIND_CALL) */
static inline PyObject *combine_with(int kind, PyObject *fn, PyObject *a, PyObject *b) {
    switch (kind) {
    case KIND_ADD:
        return PyNumber_Add(a, b);
    case KIND_BUILTIN_MAX: {  /* max(a, b): b only if b > a */
        int gt = PyObject_RichCompareBool(b, a, Py_GT);
        if (gt < 0) return NULL;
        PyObject *r = gt ? b : a;
        Py_INCREF(r);
        return r;
    }
    case KIND_SELECT_GT:
        return select_by(a, b, Py_GT);
    case KIND_SELECT_LT:
        return select_by(a, b, Py_LT);
    case KIND_MOMENTS:
        return moments(fn, a, b);
    case KIND_PRODUCT:
        return product(fn, a, b);
    default: {
        PyObject *args[2] = {a, b};
        return PyObject_Vectorcall(fn, args, 2, NULL);
    }
    }
}

static PyObject *combine(Core *c, PyObject *a, PyObject *b) { return combine_with(c->kind, c->combine, a, b); }

/* -- level queues ------------------------------------------------------- */

#define AT(q, i) ((q)->items[(i) - (q)->base])

static void level_init(Level *q, long long lo) {
    q->items = NULL;
    q->cap = 0;
    q->base = q->lo = q->hi = lo;
}

/* Slots are cleared before their reference is dropped: a finaliser run by
 * the release may start a collection, which visits the held slots. */
static void level_discard(Level *q) {
    for (long long i = q->base; i < q->hi; i++) Py_CLEAR(AT(q, i));
    PyMem_Free(q->items);
    q->items = NULL;
    q->cap = 0;
    q->base = q->lo = q->hi;
}

/* Append a new reference (stolen).  Once the dead prefix outgrows the live
 * part, drop it: amortized O(1) per append, as MemoryLevelQueue.append. */
static int level_append(Core *c, Level *q, PyObject *v) {
    long long dead = q->lo - q->base;
    if (dead > c->compact_after && dead >= q->hi - q->lo) {
        for (long long i = q->base; i < q->lo; i++) Py_CLEAR(AT(q, i));
        memmove(q->items, q->items + dead, (size_t)(q->hi - q->lo) * sizeof(PyObject *));
        q->base = q->lo;
    }
    Py_ssize_t n = (Py_ssize_t)(q->hi - q->base);
    if (n == q->cap) {
        Py_ssize_t cap = q->cap ? 2 * q->cap : 8;
        PyObject **items = PyMem_Realloc(q->items, (size_t)cap * sizeof(PyObject *));
        if (!items) { Py_DECREF(v); PyErr_NoMemory(); return -1; }
        q->items = items;
        q->cap = cap;
    }
    q->items[n] = v;
    q->hi++;
    return 0;
}

static void level_set(Level *q, long long i, PyObject *v) {  /* steals v */
    PyObject *old = AT(q, i);
    AT(q, i) = v;
    Py_DECREF(old);
}

static void clear_ref(PyObject **slot) { Py_CLEAR(*slot); }

static void stack_clear(Core *c) {
    while (c->nstack) Py_DECREF(c->stack[--c->nstack]);
}

/* push e1 onto the Stack as combine(e1, top) (Algorithm 7's rule) */
static int stack_push(Core *c, PyObject *e1) {
    PyObject *v;
    if (c->nstack) {
        v = combine(c, e1, c->stack[c->nstack - 1]);
        if (!v) return -1;
    } else {
        Py_INCREF(e1);
        v = e1;
    }
    if (c->nstack == c->capstack) {
        Py_ssize_t cap = c->capstack ? 2 * c->capstack : 16;
        PyObject **s = PyMem_Realloc(c->stack, (size_t)cap * sizeof(PyObject *));
        if (!s) { Py_DECREF(v); PyErr_NoMemory(); return -1; }
        c->stack = s;
        c->capstack = cap;
    }
    c->stack[c->nstack++] = v;
    return 0;
}

/* -- failure marked from Python --------------------------------------------
 *
 * Core.mark_failed(exception, operation): the wrapper (mta.native) failed
 * in its own Python code (a slide's values or a bulk eviction's count
 * raising), which the core never saw; its guard marks the core failed too,
 * so that the core's methods, which callers reach without the wrapper,
 * refuse as the pure-Python engine's do.  operation is one of the guarded
 * operations (mta.engine.GUARDED_OPERATIONS), kept as the static name the
 * failure message shows; a core already failed keeps its first failure.
 * While an operation runs, the call that failed was made from its user code
 * and changed nothing (a call back in is refused): the operation fails the
 * core itself if the error reaches it. */
static const char *const GUARDED_NAMES[] = {"insert", "evict", "bulk_evict", "enforce", "query", "push", "slide"};

static PyObject *Core_mark_failed(Core *c, PyObject *args) {
    PyObject *exc;
    const char *name;
    if (!PyArg_ParseTuple(args, "Os:mark_failed", &exc, &name)) return NULL;
    if (!PyExceptionInstance_Check(exc)) return PyErr_Format(PyExc_TypeError, "mark_failed: not an exception");
    for (size_t i = 0; i < sizeof GUARDED_NAMES / sizeof *GUARDED_NAMES; i++) {
        if (strcmp(name, GUARDED_NAMES[i])) continue;
        if (!c->failure && !c->busy) {
            c->failure = Py_NewRef(exc);
            c->failed_in = GUARDED_NAMES[i];
        }
        Py_RETURN_NONE;
    }
    return PyErr_Format(PyExc_ValueError, "mark_failed: %s is not a guarded operation", name);
}

/* Core.failed_in: the operation the failure was raised in, or None. */
static PyObject *Core_failed_in(Core *c, void *unused) {
    if (!c->failure) Py_RETURN_NONE;
    return PyUnicode_FromString(c->failed_in);
}

#endif
