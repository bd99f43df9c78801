/* The compiled execution of a shared plan (mta/multi/compiled.py wraps it):
 * SharedWindows' push for rows= queries, periodic and without lag, on
 * trees whose monoid is a ready one (a native combine) and whose final
 * technique is the naive one, R-Int, FlatFIT or SlickDeque (Non-Inv)
 * (included by mta/_native.c, one translation unit; the trees and final
 * techniques are in _native_mtree.h).
 *
 * The same rules as mta/multi/tree.py (Tree.add, suffix, window,
 * first_key, evict), the final techniques' modules (naive.py, rint.py,
 * flatfit.py, slickdeque_noninv.py) and mta/multi/schedule.py (Spec.report,
 * Spec.floor), on C arrays: partials at absolute positions, keys as C
 * integers.  The pure-Python modules stay the reference; every rule here
 * mirrors one there and the multi-query tests run both.  A push answers
 * every spec whose next window it completes, one lookup per spec, and
 * hands back the Results sorted by (end, query order).
 *
 * Failure: an exception from user code (lift is called by the caller,
 * lower here, combine on odd values) propagates; the Python wrapper marks
 * its SharedWindows failed, as the pure-Python push does. */
#ifndef MTA_NATIVE_MULTI_H
#define MTA_NATIVE_MULTI_H
#include "_native_mtree.h"

typedef struct {
    int tree;
    long long slide, width, next;       /* next: end of the next unreported window */
    PyObject *lower;                    /* NULL: the value is the answer */
    Py_ssize_t nmem;
    PyObject **names;
    long long *ranks;
} MSpec;

typedef struct {
    long long end, rank;
    PyObject *result;
} Entry;

typedef struct {
    PyObject_HEAD
    int ntrees, nspecs;
    MTree *trees;
    MSpec *specs;
    PyTypeObject *result_type;
    PyObject *empty;
    long long count, evict_every;
    Entry *entries;
    Py_ssize_t nentries, capentries;
} Multi;

/* -- the schedule: Spec.report and Spec.floor ----------------------------- */

static int add_entry(Multi *m, long long end, long long rank, PyObject *result) {  /* steals result */
    if (m->nentries == m->capentries) {
        Py_ssize_t cap = m->capentries ? 2 * m->capentries : 64;
        Entry *e = PyMem_Realloc(m->entries, (size_t)cap * sizeof(Entry));
        if (!e) { Py_DECREF(result); PyErr_NoMemory(); return -1; }
        m->entries = e;
        m->capentries = cap;
    }
    m->entries[m->nentries].end = end;
    m->entries[m->nentries].rank = rank;
    m->entries[m->nentries].result = result;
    m->nentries++;
    return 0;
}

/* one Result per member of the spec for the window ending at e (value stolen) */
static int emit(Multi *m, MSpec *s, long long e, PyObject *value) {
    PyObject *v = value;
    if (s->lower) {
        v = PyObject_CallOneArg(s->lower, value);
        Py_DECREF(value);
        if (!v) return -1;
    }
    PyObject *end = PyLong_FromLongLong(e - 1);
    if (!end) { Py_DECREF(v); return -1; }
    int rc = 0;
    for (Py_ssize_t j = 0; j < s->nmem; j++) {
        PyObject *r = m->result_type->tp_alloc(m->result_type, 3);
        if (!r) { rc = -1; break; }
        Py_INCREF(s->names[j]);
        Py_INCREF(end);
        Py_INCREF(v);
        PyTuple_SET_ITEM(r, 0, s->names[j]);
        PyTuple_SET_ITEM(r, 1, end);
        PyTuple_SET_ITEM(r, 2, v);
        if (add_entry(m, e - 1, s->ranks[j], r) < 0) { rc = -1; break; }
    }
    Py_DECREF(end);
    Py_DECREF(v);
    return rc;
}

/* Spec.report for a rows window without lag: the windows ending at
 * e <= threshold that hold elements, skipping runs of empty ones */
static int report(Multi *m, MSpec *s, long long threshold) {
    MTree *t = &m->trees[s->tree];
    long long e = s->next;
    while (e <= threshold) {
        PyObject *value;
        if (tree_suffix(t, e - s->width, &value) < 0) return -1;
        if (value) {
            if (emit(m, s, e, value) < 0) return -1;
            e += s->slide;
            s->next = e;
            continue;
        }
        long long cap = next_multiple(threshold, s->slide), x;
        if (!tree_first_key(t, e - s->width, &x)) { e = cap; break; }
        long long n = next_multiple(x, s->slide);
        e = e + s->slide > n ? e + s->slide : n;
        if (e > cap) e = cap;
    }
    s->next = e;
    return 0;
}

/* Schedule.floor for each tree, then its eviction (last: the newest key) */
static void evict_all(Multi *m, long long last) {
    for (int i = 0; i < m->ntrees; i++) {
        int any = 0;
        long long floor = 0;
        for (int j = 0; j < m->nspecs; j++) {
            MSpec *s = &m->specs[j];
            if (s->tree != i) continue;
            long long e = next_multiple(last, s->slide);
            if (s->next < e) e = s->next;
            if (!any || e - s->width < floor) floor = e - s->width;
            any = 1;
        }
        if (any) tree_evict(&m->trees[i], floor);
    }
}

static int entry_cmp(const void *x, const void *y) {
    const Entry *a = x, *b = y;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

static void drop_entries(Multi *m) {
    while (m->nentries) Py_DECREF(m->entries[--m->nentries].result);
}

/* the entries sorted by (end, rank) as a list of Results */
static PyObject *take_entries(Multi *m) {
    Py_ssize_t n = m->nentries;
    Entry *es = m->entries;
    if (n > 32) {
        qsort(es, (size_t)n, sizeof(Entry), entry_cmp);
    } else {  /* nearly sorted: specs are visited in their first query's order */
        for (Py_ssize_t i = 1; i < n; i++) {
            Entry x = es[i];
            Py_ssize_t j = i;
            while (j > 0 && entry_cmp(&es[j - 1], &x) > 0) { es[j] = es[j - 1]; j--; }
            es[j] = x;
        }
    }
    PyObject *out = PyList_New(n);
    if (!out) { drop_entries(m); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(out, i, es[i].result);
    m->nentries = 0;
    return out;
}

/* -- the Python type ------------------------------------------------------ */

static PyObject *Multi_push(Multi *m, PyObject *v) {
    long long index = m->count;
    if (index == 0)
        for (int j = 0; j < m->nspecs; j++) m->specs[j].next = next_multiple(0, m->specs[j].slide);
    for (int i = 0; i < m->ntrees; i++)
        if (tree_add(&m->trees[i], index, v) < 0) return NULL;
    for (int j = 0; j < m->nspecs; j++) {
        MSpec *s = &m->specs[j];
        if (s->next <= index + 1 && report(m, s, index + 1) < 0) { drop_entries(m); return NULL; }
    }
    m->count = index + 1;
    if (index % m->evict_every == 0) evict_all(m, index);
    return take_entries(m);
}

static int tree_arg(Multi *m, PyObject *args, int *i, long long *a, long long *b, int two) {
    if (two ? !PyArg_ParseTuple(args, "iLL", i, a, b) : !PyArg_ParseTuple(args, "iL", i, a)) return -1;
    if (*i < 0 || *i >= m->ntrees) { PyErr_SetString(PyExc_IndexError, "no such tree"); return -1; }
    return 0;
}

static PyObject *value_or_empty(Multi *m, PyObject *v) {
    if (v) return v;
    Py_INCREF(m->empty);
    return m->empty;
}

static PyObject *Multi_suffix(Multi *m, PyObject *args) {
    int i;
    long long a, b;
    PyObject *v;
    if (tree_arg(m, args, &i, &a, &b, 0) < 0 || tree_suffix(&m->trees[i], a, &v) < 0) return NULL;
    return value_or_empty(m, v);
}

static PyObject *Multi_window(Multi *m, PyObject *args) {
    int i;
    long long a, b;
    PyObject *v;
    if (tree_arg(m, args, &i, &a, &b, 1) < 0 || tree_window(&m->trees[i], a, b, &v) < 0) return NULL;
    return value_or_empty(m, v);
}

static PyObject *Multi_first_key(Multi *m, PyObject *args) {
    int i;
    long long a, b, x;
    if (tree_arg(m, args, &i, &a, &b, 0) < 0) return NULL;
    if (tree_first_key(&m->trees[i], a, &x)) return PyLong_FromLongLong(x);
    Py_RETURN_NONE;
}

static PyObject *Multi_held(Multi *m, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= m->ntrees) { PyErr_SetString(PyExc_IndexError, "no such tree"); return NULL; }
    return PyLong_FromLongLong(m->trees[i].hi - m->trees[i].lo);
}

static PyObject *Multi_evict(Multi *m, PyObject *unused) {
    if (m->count) evict_all(m, m->count - 1);
    Py_RETURN_NONE;
}

static PyObject *Multi_nexts(Multi *m, PyObject *unused) {
    PyObject *out = PyList_New(m->nspecs);
    for (int j = 0; out && j < m->nspecs; j++) {
        PyObject *x = PyLong_FromLongLong(m->specs[j].next);
        if (!x) { Py_CLEAR(out); break; }
        PyList_SET_ITEM(out, j, x);
    }
    return out;
}

static PyObject *Multi_set_nexts(Multi *m, PyObject *arg) {
    if (!PyList_Check(arg) || PyList_GET_SIZE(arg) != m->nspecs) {
        PyErr_SetString(PyExc_TypeError, "set_nexts takes a list, one end per spec");
        return NULL;
    }
    long long *ends = PyMem_Malloc((size_t)(m->nspecs + 1) * sizeof(long long));
    if (!ends) return PyErr_NoMemory();
    for (int j = 0; j < m->nspecs; j++) {
        ends[j] = PyLong_AsLongLong(PyList_GET_ITEM(arg, j));
        if (ends[j] == -1 && PyErr_Occurred()) { PyMem_Free(ends); return NULL; }
    }
    for (int j = 0; j < m->nspecs; j++) m->specs[j].next = ends[j];
    PyMem_Free(ends);
    Py_RETURN_NONE;
}

static PyObject *Multi_get_count(Multi *m, void *unused) { return PyLong_FromLongLong(m->count); }

static long long *int_array(PyObject *seq, Py_ssize_t *n) {
    PyObject *fast = PySequence_Fast(seq, "expected a sequence of ints");
    if (!fast) return NULL;
    *n = PySequence_Fast_GET_SIZE(fast);
    long long *out = PyMem_Malloc((size_t)(*n + 1) * sizeof(long long));
    if (!out) { Py_DECREF(fast); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < *n; i++) {
        out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) { PyMem_Free(out); Py_DECREF(fast); return NULL; }
    }
    Py_DECREF(fast);
    return out;
}

/* trees: [(kind, combine, final, inverse or None, inverse_is_subtract, table, length)]
 * specs: [(tree, slide, width, lower or None, [(rank, name)])] */
static int Multi_init(Multi *m, PyObject *args, PyObject *kw) {
    static char *names[] = {"trees", "specs", "result_type", "empty", "evict_every", NULL};
    PyObject *trees, *specs, *rtype, *empty;
    long long evict_every;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!OL", names, &PyList_Type, &trees, &PyList_Type, &specs,
                                     &PyType_Type, &rtype, &empty, &evict_every))
        return -1;
    if (m->trees) { PyErr_SetString(PyExc_TypeError, "a core is initialised once"); return -1; }
    if (!PyType_IsSubtype((PyTypeObject *)rtype, &PyTuple_Type) || evict_every < 1) {
        PyErr_SetString(PyExc_TypeError, "result_type must be a tuple type, evict_every >= 1");
        return -1;
    }
    Py_ssize_t nt = PyList_GET_SIZE(trees), ns = PyList_GET_SIZE(specs);
    m->trees = PyMem_Calloc((size_t)nt + 1, sizeof(MTree));
    m->specs = PyMem_Calloc((size_t)ns + 1, sizeof(MSpec));
    if (!m->trees || !m->specs) { PyErr_NoMemory(); return -1; }
    Py_INCREF(rtype);
    m->result_type = (PyTypeObject *)rtype;
    Py_INCREF(empty);
    m->empty = empty;
    m->evict_every = evict_every;
    for (Py_ssize_t i = 0; i < nt; i++) {
        MTree *t = &m->trees[i];
        PyObject *comb, *inv, *table;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(trees, i), "iOiOpOL", &t->kind, &comb, &t->fin, &inv, &t->inv_native,
                              &table, &t->length))
            return -1;
        m->ntrees = (int)i + 1;
        Py_INCREF(comb);
        t->combine = comb;
        Py_INCREF(inv);
        t->inverse = inv;
        if (t->kind <= KIND_CALL || t->kind > KIND_MOMENTS || t->fin < FIN_NAIVE || t->fin > FIN_SDNONINV) {
            PyErr_SetString(PyExc_ValueError, "unknown combine kind or final technique");
            return -1;
        }
        if (!(t->table = int_array(table, &t->ntable))) return -1;
        if (!t->ntable || t->length < 1) { PyErr_SetString(PyExc_ValueError, "empty edge table"); return -1; }
        if (t->fin == FIN_RINT && oarr_append(&t->vals, NULL) < 0) return -1;  /* P[0]: no partial yet */
    }
    for (Py_ssize_t j = 0; j < ns; j++) {
        MSpec *s = &m->specs[j];
        PyObject *lower, *members;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(specs, j), "iLLOO!", &s->tree, &s->slide, &s->width, &lower,
                              &PyList_Type, &members))
            return -1;
        m->nspecs = (int)j + 1;
        if (s->tree < 0 || s->tree >= nt || s->slide < 1) {
            PyErr_SetString(PyExc_ValueError, "bad spec");
            return -1;
        }
        s->lower = lower == Py_None ? NULL : lower;
        Py_XINCREF(s->lower);
        Py_ssize_t k = PyList_GET_SIZE(members);
        s->names = PyMem_Calloc((size_t)k + 1, sizeof(PyObject *));
        s->ranks = PyMem_Calloc((size_t)k + 1, sizeof(long long));
        if (!s->names || !s->ranks) { PyErr_NoMemory(); return -1; }
        for (Py_ssize_t x = 0; x < k; x++) {
            PyObject *name;
            if (!PyArg_ParseTuple(PyList_GET_ITEM(members, x), "LU", &s->ranks[x], &name)) return -1;
            Py_INCREF(name);
            s->names[x] = name;
            s->nmem = x + 1;
        }
    }
    return 0;
}

static void Multi_dealloc(Multi *m) {
    for (int i = 0; i < m->ntrees; i++) tree_clear(&m->trees[i]);
    for (int j = 0; j < m->nspecs; j++) {
        MSpec *s = &m->specs[j];
        for (Py_ssize_t x = 0; x < s->nmem; x++) Py_DECREF(s->names[x]);
        PyMem_Free(s->names);
        PyMem_Free(s->ranks);
        Py_XDECREF(s->lower);
    }
    drop_entries(m);
    PyMem_Free(m->entries);
    PyMem_Free(m->trees);
    PyMem_Free(m->specs);
    Py_XDECREF(m->result_type);
    Py_XDECREF(m->empty);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyMethodDef Multi_methods[] = {
    {"push", (PyCFunction)Multi_push, METH_O,
     "Add the lifted value to every tree, report the windows it completes: Results by (end, rank)."},
    {"suffix", (PyCFunction)Multi_suffix, METH_VARARGS, "suffix(tree, a): Tree.suffix (EMPTY when empty)."},
    {"window", (PyCFunction)Multi_window, METH_VARARGS, "window(tree, a, b): Tree.window over [a, b)."},
    {"first_key", (PyCFunction)Multi_first_key, METH_VARARGS, "first_key(tree, a): Tree.first_key or None."},
    {"held", (PyCFunction)Multi_held, METH_O, "held(tree): the partials its final technique holds."},
    {"evict", (PyCFunction)Multi_evict, METH_NOARGS, "Every tree forgets what no future window reads."},
    {"nexts", (PyCFunction)Multi_nexts, METH_NOARGS, "Each spec's next window end."},
    {"set_nexts", (PyCFunction)Multi_set_nexts, METH_O, "Set each spec's next window end (after a flush)."},
    {NULL},
};

static PyGetSetDef Multi_getset[] = {
    {"count", (getter)Multi_get_count, NULL, "Elements pushed.", NULL},
    {NULL},
};

static PyTypeObject MultiType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mta._native.SharedRowsCore",
    .tp_basicsize = sizeof(Multi),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A shared plan's trees and schedule for rows queries (see mta/multi/compiled.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Multi_init,
    .tp_dealloc = (destructor)Multi_dealloc,
    .tp_methods = Multi_methods,
    .tp_getset = Multi_getset,
};

#endif
