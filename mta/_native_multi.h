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
    int ready;                          /* __init__ completed */
    int busy;                           /* a method runs: user code it calls may not call back in */
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

/* -- the Python type ------------------------------------------------------
 *
 * As the engine cores (mta/_native.c): every method but count enters the
 * core and leaves it on every way out, refusing a call made while another
 * runs (from a combine's comparison or addition, a lower, a finaliser) or
 * on a core whose __init__ did not complete. */

static int multi_enter(Multi *m, const char *name) {
    if (!m->ready) {
        PyErr_Format(PyExc_RuntimeError, "%s.%s(): the core is not initialised", Py_TYPE(m)->tp_name, name);
        return -1;
    }
    if (m->busy) {
        PyErr_Format(PyExc_RuntimeError, "%s.%s() called while another call on the same core runs (from a "
                     "combine, a lower or a finaliser): re-entrant calls are refused", Py_TYPE(m)->tp_name, name);
        return -1;
    }
    m->busy = 1;
    return 0;
}

static PyObject *multi_leave(Multi *m, PyObject *r) {
    m->busy = 0;
    return r;
}

static PyObject *push(Multi *m, PyObject *v) {
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

static PyObject *Multi_push(Multi *m, PyObject *v) {
    if (multi_enter(m, "push") < 0) return NULL;
    return multi_leave(m, push(m, v));
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
    if (multi_enter(m, "suffix") < 0) return NULL;
    if (tree_arg(m, args, &i, &a, &b, 0) < 0 || tree_suffix(&m->trees[i], a, &v) < 0) return multi_leave(m, NULL);
    return multi_leave(m, value_or_empty(m, v));
}

static PyObject *Multi_window(Multi *m, PyObject *args) {
    int i;
    long long a, b;
    PyObject *v;
    if (multi_enter(m, "window") < 0) return NULL;
    if (tree_arg(m, args, &i, &a, &b, 1) < 0 || tree_window(&m->trees[i], a, b, &v) < 0) return multi_leave(m, NULL);
    return multi_leave(m, value_or_empty(m, v));
}

static PyObject *Multi_first_key(Multi *m, PyObject *args) {
    int i;
    long long a, b, x;
    if (multi_enter(m, "first_key") < 0) return NULL;
    if (tree_arg(m, args, &i, &a, &b, 0) < 0) return multi_leave(m, NULL);
    return multi_leave(m, tree_first_key(&m->trees[i], a, &x) ? PyLong_FromLongLong(x) : Py_NewRef(Py_None));
}

static PyObject *Multi_held(Multi *m, PyObject *arg) {
    if (multi_enter(m, "held") < 0) return NULL;
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return multi_leave(m, NULL);
    if (i < 0 || i >= m->ntrees) { PyErr_SetString(PyExc_IndexError, "no such tree"); return multi_leave(m, NULL); }
    return multi_leave(m, PyLong_FromLongLong(m->trees[i].hi - m->trees[i].lo));
}

static PyObject *Multi_evict(Multi *m, PyObject *unused) {
    if (multi_enter(m, "evict") < 0) return NULL;
    if (m->count) evict_all(m, m->count - 1);
    return multi_leave(m, Py_NewRef(Py_None));
}

static PyObject *Multi_nexts(Multi *m, PyObject *unused) {
    if (multi_enter(m, "nexts") < 0) return NULL;
    PyObject *out = PyList_New(m->nspecs);
    for (int j = 0; out && j < m->nspecs; j++) {
        PyObject *x = PyLong_FromLongLong(m->specs[j].next);
        if (!x) { Py_CLEAR(out); break; }
        PyList_SET_ITEM(out, j, x);
    }
    return multi_leave(m, out);
}

static long long *int_array(PyObject *seq, Py_ssize_t *n);

/* all ends converted (from a copy of the list: __index__ may change it)
 * before any is set */
static PyObject *Multi_set_nexts(Multi *m, PyObject *arg) {
    if (multi_enter(m, "set_nexts") < 0) return NULL;
    Py_ssize_t n = -1;
    long long *ends = PyList_Check(arg) ? int_array(arg, &n) : NULL;
    if (n != m->nspecs) {
        PyMem_Free(ends);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "set_nexts takes a list, one end per spec");
        return multi_leave(m, NULL);
    }
    for (int j = 0; j < m->nspecs; j++) m->specs[j].next = ends[j];
    PyMem_Free(ends);
    return multi_leave(m, Py_NewRef(Py_None));
}

static PyObject *Multi_get_count(Multi *m, void *unused) { return PyLong_FromLongLong(m->count); }

/* the integers of seq (*n of them, set on success), read from a tuple copy
 * of it: converting an item may run __index__, which could change a list
 * being read */
static long long *int_array(PyObject *seq, Py_ssize_t *n) {
    PyObject *items = PySequence_Tuple(seq);
    if (!items) return NULL;
    Py_ssize_t k = PyTuple_GET_SIZE(items);
    long long *out = PyMem_Malloc((size_t)(k + 1) * sizeof(long long));
    if (!out) { Py_DECREF(items); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < k; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(items, i));
        if (out[i] == -1 && PyErr_Occurred()) { PyMem_Free(out); Py_DECREF(items); return NULL; }
    }
    Py_DECREF(items);
    *n = k;
    return out;
}

/* trees: [(kind, combine, final, inverse or None, inverse_is_subtract, table, length)]
 * specs: [(tree, slide, width, lower or None, [(rank, name)])]
 * The lists are read from tuple copies: parsing an entry may run user code
 * (__index__, __bool__) that changes them.  The core is ready once all of
 * it is built; a failed __init__ leaves it refusing every call. */
static int Multi_init(Multi *m, PyObject *args, PyObject *kw) {
    static char *names[] = {"trees", "specs", "result_type", "empty", "evict_every", NULL};
    PyObject *tree_list, *spec_list, *rtype, *empty;
    long long evict_every;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!O!OL", names, &PyList_Type, &tree_list, &PyList_Type,
                                     &spec_list, &PyType_Type, &rtype, &empty, &evict_every))
        return -1;
    if (m->trees || m->busy) { PyErr_SetString(PyExc_TypeError, "a core is initialised once"); return -1; }
    if (!PyType_IsSubtype((PyTypeObject *)rtype, &PyTuple_Type) || evict_every < 1) {
        PyErr_SetString(PyExc_TypeError, "result_type must be a tuple type, evict_every >= 1");
        return -1;
    }
    PyObject *trees = PyList_AsTuple(tree_list), *specs = trees ? PyList_AsTuple(spec_list) : NULL;
    PyObject *members = NULL;
    int rc = -1;
    if (!specs) goto done;
    Py_ssize_t nt = PyTuple_GET_SIZE(trees), ns = PyTuple_GET_SIZE(specs);
    m->trees = PyMem_Calloc((size_t)nt + 1, sizeof(MTree));
    m->specs = PyMem_Calloc((size_t)ns + 1, sizeof(MSpec));
    if (!m->trees || !m->specs) { PyErr_NoMemory(); goto done; }
    Py_INCREF(rtype);
    m->result_type = (PyTypeObject *)rtype;
    Py_INCREF(empty);
    m->empty = empty;
    m->evict_every = evict_every;
    for (Py_ssize_t i = 0; i < nt; i++) {
        MTree *t = &m->trees[i];
        PyObject *comb, *inv, *table;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(trees, i), "iOiOpOL", &t->kind, &comb, &t->fin, &inv, &t->inv_native,
                              &table, &t->length))
            goto done;
        m->ntrees = (int)i + 1;
        Py_INCREF(comb);
        t->combine = comb;
        Py_INCREF(inv);
        t->inverse = inv;
        if (t->kind <= KIND_CALL || t->kind > KIND_MOMENTS || t->fin < FIN_NAIVE || t->fin > FIN_SDNONINV) {
            PyErr_SetString(PyExc_ValueError, "unknown combine kind or final technique");
            goto done;
        }
        if (!(t->table = int_array(table, &t->ntable))) goto done;
        if (!t->ntable || t->length < 1) { PyErr_SetString(PyExc_ValueError, "empty edge table"); goto done; }
        if (t->fin == FIN_RINT && oarr_append(&t->vals, NULL) < 0) goto done;  /* P[0]: no partial yet */
    }
    for (Py_ssize_t j = 0; j < ns; j++) {
        MSpec *s = &m->specs[j];
        PyObject *lower, *member_list;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, j), "iLLOO!", &s->tree, &s->slide, &s->width, &lower,
                              &PyList_Type, &member_list))
            goto done;
        m->nspecs = (int)j + 1;
        if (s->tree < 0 || s->tree >= nt || s->slide < 1) {
            PyErr_SetString(PyExc_ValueError, "bad spec");
            goto done;
        }
        s->lower = lower == Py_None ? NULL : lower;
        Py_XINCREF(s->lower);
        Py_XSETREF(members, PyList_AsTuple(member_list));
        if (!members) goto done;
        Py_ssize_t k = PyTuple_GET_SIZE(members);
        s->names = PyMem_Calloc((size_t)k + 1, sizeof(PyObject *));
        s->ranks = PyMem_Calloc((size_t)k + 1, sizeof(long long));
        if (!s->names || !s->ranks) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t x = 0; x < k; x++) {
            PyObject *name;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(members, x), "LU", &s->ranks[x], &name)) goto done;
            Py_INCREF(name);
            s->names[x] = name;
            s->nmem = x + 1;
        }
    }
    m->ready = 1;
    rc = 0;
done:
    Py_XDECREF(trees);
    Py_XDECREF(specs);
    Py_XDECREF(members);
    return rc;
}

/* Drop everything the core holds, leaving it refusing every call.  The
 * arrays are detached first: the references dropped may run finalisers,
 * and a collection they start visits the core. */
static int Multi_clear(Multi *m) {
    MTree *trees = m->trees;
    MSpec *specs = m->specs;
    Entry *entries = m->entries;
    int ntrees = m->ntrees, nspecs = m->nspecs;
    Py_ssize_t nentries = m->nentries;
    int was_busy = m->busy;
    m->busy = 1;
    m->ready = 0;
    m->trees = NULL;
    m->specs = NULL;
    m->entries = NULL;
    m->ntrees = m->nspecs = 0;
    m->nentries = m->capentries = 0;
    m->count = 0;
    for (int i = 0; i < ntrees; i++) tree_clear(&trees[i]);
    for (int j = 0; j < nspecs; j++) {
        MSpec *s = &specs[j];
        for (Py_ssize_t x = 0; x < s->nmem; x++) Py_DECREF(s->names[x]);
        PyMem_Free(s->names);
        PyMem_Free(s->ranks);
        Py_XDECREF(s->lower);
    }
    while (nentries) Py_DECREF(entries[--nentries].result);
    PyMem_Free(entries);
    PyMem_Free(trees);
    PyMem_Free(specs);
    Py_CLEAR(m->result_type);
    Py_CLEAR(m->empty);
    m->busy = was_busy;
    return 0;
}

static int Multi_traverse(Multi *m, visitproc visit, void *arg) {
    for (int i = 0; i < m->ntrees; i++) {
        MTree *t = &m->trees[i];
        Py_VISIT(t->combine);
        Py_VISIT(t->inverse);
        Py_VISIT(t->open_value);
        for (long long p = t->vals.base; p < t->vals.hi; p++) Py_VISIT(OAT(&t->vals, p));
    }
    for (int j = 0; j < m->nspecs; j++) {
        MSpec *s = &m->specs[j];
        Py_VISIT(s->lower);
        for (Py_ssize_t x = 0; x < s->nmem; x++) Py_VISIT(s->names[x]);
    }
    for (Py_ssize_t e = 0; e < m->nentries; e++) Py_VISIT(m->entries[e].result);
    Py_VISIT(m->result_type);
    Py_VISIT(m->empty);
    return 0;
}

static void Multi_dealloc(Multi *m) {
    PyObject_GC_UnTrack(m);
    Multi_clear(m);
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
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A shared plan's trees and schedule for rows queries (see mta/multi/compiled.py).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Multi_init,
    .tp_dealloc = (destructor)Multi_dealloc,
    .tp_traverse = (traverseproc)Multi_traverse,
    .tp_clear = (inquiry)Multi_clear,
    .tp_free = PyObject_GC_Del,
    .tp_methods = Multi_methods,
    .tp_getset = Multi_getset,
};

#endif
