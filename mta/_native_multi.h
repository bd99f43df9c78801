/* The compiled execution of a shared plan (mta/multi/compiled.py wraps it):
 * SharedWindows' push for rows= queries, periodic and without lag, on
 * trees whose monoid is a ready one (a native combine) and whose final
 * technique is the naive one, R-Int, FlatFIT or SlickDeque (Non-Inv)
 * (included by mta/_native.c, one translation unit).
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
#include "_native_state.h"

enum { FIN_NAIVE = 0, FIN_RINT = 1, FIN_FLATFIT = 2, FIN_SDNONINV = 3 };

/* Python's ListStore.drop_before and Tree.evict drop a dead prefix once
 * it is longer than this and than the live part. */
#define DROP_AFTER 64

typedef struct {      /* integers at positions [base, hi) */
    long long *a;
    Py_ssize_t cap;
    long long base, hi;
} IArr;

typedef struct {      /* object references (NULL: EMPTY) at positions [base, hi) */
    PyObject **a;
    Py_ssize_t cap;
    long long base, hi;
} OArr;

#define IAT(q, i) ((q)->a[(i) - (q)->base])
#define OAT(q, i) ((q)->a[(i) - (q)->base])

static int iarr_append(IArr *q, long long v) {
    Py_ssize_t n = (Py_ssize_t)(q->hi - q->base);
    if (n == q->cap) {
        Py_ssize_t cap = q->cap ? 2 * q->cap : 16;
        long long *a = PyMem_Realloc(q->a, (size_t)cap * sizeof(long long));
        if (!a) { PyErr_NoMemory(); return -1; }
        q->a = a;
        q->cap = cap;
    }
    q->a[n] = v;
    q->hi++;
    return 0;
}

static void iarr_drop_before(IArr *q, long long lo) {
    long long dead = lo - q->base;
    if (dead > DROP_AFTER && 2 * dead > q->hi - q->base) {
        memmove(q->a, q->a + dead, (size_t)(q->hi - lo) * sizeof(long long));
        q->base = lo;
    }
}

static int oarr_append(OArr *q, PyObject *v) {  /* steals v (may be NULL) */
    Py_ssize_t n = (Py_ssize_t)(q->hi - q->base);
    if (n == q->cap) {
        Py_ssize_t cap = q->cap ? 2 * q->cap : 16;
        PyObject **a = PyMem_Realloc(q->a, (size_t)cap * sizeof(PyObject *));
        if (!a) { Py_XDECREF(v); PyErr_NoMemory(); return -1; }
        q->a = a;
        q->cap = cap;
    }
    q->a[n] = v;
    q->hi++;
    return 0;
}

static void oarr_drop_before(OArr *q, long long lo) {
    long long dead = lo - q->base;
    if (dead > DROP_AFTER && 2 * dead > q->hi - q->base) {
        for (long long i = q->base; i < lo; i++) Py_XDECREF(OAT(q, i));
        memmove(q->a, q->a + dead, (size_t)(q->hi - lo) * sizeof(PyObject *));
        q->base = lo;
    }
}

static void oarr_pop(OArr *q) {
    q->hi--;
    Py_XDECREF(OAT(q, q->hi));
}

static void oarr_clear(OArr *q) {
    for (long long i = q->base; i < q->hi; i++) Py_XDECREF(OAT(q, i));
    PyMem_Free(q->a);
    q->a = NULL;
}

/* One tree: Tree's open partial and keys, and its final technique. */
typedef struct {
    int kind, fin, inv_native;          /* inv_native: R-Int's inverse is a - b */
    PyObject *combine, *inverse;
    long long *table, length;           /* EdgeSet's table of the composite slide */
    Py_ssize_t ntable;
    int open;
    long long open_key, open_end;
    PyObject *open_value;
    IArr keys;                          /* the first key of each closed partial, by position */
    long long lo, hi;                   /* the final technique's live positions */
    OArr vals;                          /* naive and FlatFIT: partials; R-Int: P[i]; SlickDeque: node values */
    IArr ints;                          /* FlatFIT: pointers; SlickDeque: node positions */
    long long head;                     /* SlickDeque: first live node */
    long long *stack;                   /* FlatFIT's Positions */
    Py_ssize_t capstack;
} MTree;

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

static PyObject *mcombine(MTree *t, PyObject *a, PyObject *b) {
    return combine_with(t->kind, t->combine, a, b);
}

static long long floordiv(long long x, long long s) {
    long long q = x / s;
    return (x % s != 0 && (x < 0) != (s < 0)) ? q - 1 : q;
}

static long long next_multiple(long long x, long long s) { return (floordiv(x, s) + 1) * s; }

/* EdgeSet.next_after with its table */
static long long next_edge(MTree *t, long long x) {
    long long r = x - floordiv(x, t->length) * t->length;
    Py_ssize_t lo = 0, hi = t->ntable;
    while (lo < hi) {  /* bisect_right */
        Py_ssize_t mid = (lo + hi) / 2;
        if (r < t->table[mid]) hi = mid; else lo = mid + 1;
    }
    return x - r + (lo < t->ntable ? t->table[lo] : t->length + t->table[0]);
}

/* the first live position whose key is >= a (bisect_left over the live keys) */
static long long key_position(MTree *t, long long a) {
    long long lo = t->lo, hi = t->hi;
    while (lo < hi) {
        long long mid = (lo + hi) / 2;
        if (IAT(&t->keys, mid) < a) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* -- final techniques: append (steals v), range, evict -------------------- */

static int final_append(MTree *t, PyObject *v) {
    switch (t->fin) {
    case FIN_RINT: {  /* P[hi + 1] = P[hi] + v */
        PyObject *last = OAT(&t->vals, t->hi);
        if (last) {
            PyObject *s = mcombine(t, last, v);
            Py_DECREF(v);
            if (!s) return -1;
            v = s;
        }
        if (oarr_append(&t->vals, v) < 0) return -1;
        break;
    }
    case FIN_FLATFIT:  /* the new partial points past itself */
        if (iarr_append(&t->ints, t->hi + 1) < 0) { Py_DECREF(v); return -1; }
        if (oarr_append(&t->vals, v) < 0) { t->ints.hi--; return -1; }
        break;
    case FIN_SDNONINV:  /* pop the tail nodes v beats */
        while (t->ints.hi > t->head) {
            PyObject *tail = OAT(&t->vals, t->vals.hi - 1);
            PyObject *r = mcombine(t, tail, v);
            if (!r) { Py_DECREF(v); return -1; }
            int beats = r == v;
            if (!beats && r != tail) {
                beats = PyObject_RichCompareBool(r, v, Py_EQ);
                if (beats < 0) { Py_DECREF(r); Py_DECREF(v); return -1; }
            }
            Py_DECREF(r);
            if (!beats) break;
            t->ints.hi--;
            oarr_pop(&t->vals);
        }
        if (iarr_append(&t->ints, t->hi) < 0) { Py_DECREF(v); return -1; }
        if (oarr_append(&t->vals, v) < 0) { t->ints.hi--; return -1; }
        break;
    default:
        if (oarr_append(&t->vals, v) < 0) return -1;
    }
    t->hi++;
    return 0;
}

static PyObject *flatfit_range(MTree *t, long long lo, long long hi) {
    OArr *partials = &t->vals;
    IArr *pointers = &t->ints;
    Py_ssize_t n = 0;
    long long i = lo;
    while (IAT(pointers, i) < hi) {
        if (n == t->capstack) {
            Py_ssize_t cap = t->capstack ? 2 * t->capstack : 16;
            long long *s = PyMem_Realloc(t->stack, (size_t)cap * sizeof(long long));
            if (!s) return PyErr_NoMemory();
            t->stack = s;
            t->capstack = cap;
        }
        t->stack[n++] = i;
        i = IAT(pointers, i);
    }
    PyObject *acc = OAT(partials, i);
    Py_INCREF(acc);
    while (n) {
        i = t->stack[--n];
        PyObject *x = mcombine(t, OAT(partials, i), acc);
        Py_DECREF(acc);
        if (!x) return NULL;
        acc = x;
        Py_INCREF(acc);
        Py_SETREF(OAT(partials, i), acc);
        IAT(pointers, i) = hi;
    }
    return acc;
}

/* the aggregate of the partials [lo, hi), lo < hi (new reference) */
static PyObject *final_range(MTree *t, long long lo, long long hi) {
    if (lo < t->lo || hi > t->hi) {
        PyErr_Format(PyExc_ValueError, "range [%lld, %lld) outside the live partials [%lld, %lld)",
                     lo, hi, t->lo, t->hi);
        return NULL;
    }
    if ((t->fin == FIN_FLATFIT || t->fin == FIN_SDNONINV) && hi != t->hi) {
        PyErr_Format(PyExc_ValueError, "this technique answers only ranges ending at the newest partial (%lld), "
                     "not [%lld, %lld)", t->hi, lo, hi);
        return NULL;
    }
    switch (t->fin) {
    case FIN_RINT: {
        PyObject *before = OAT(&t->vals, lo), *total = OAT(&t->vals, hi);
        if (!before) { Py_INCREF(total); return total; }
        if (t->inv_native) return PyNumber_Subtract(total, before);
        PyObject *args[2] = {total, before};
        return PyObject_Vectorcall(t->inverse, args, 2, NULL);
    }
    case FIN_FLATFIT:
        return flatfit_range(t, lo, hi);
    case FIN_SDNONINV: {
        long long a = t->head, b = t->ints.hi;
        while (a < b) {
            long long mid = (a + b) / 2;
            if (IAT(&t->ints, mid) < lo) a = mid + 1; else b = mid;
        }
        PyObject *v = OAT(&t->vals, a);
        Py_INCREF(v);
        return v;
    }
    default: {
        PyObject *acc = OAT(&t->vals, lo);
        Py_INCREF(acc);
        for (long long p = lo + 1; p < hi; p++) {
            PyObject *x = mcombine(t, acc, OAT(&t->vals, p));
            Py_DECREF(acc);
            if (!x) return NULL;
            acc = x;
        }
        return acc;
    }
    }
}

static void final_evict(MTree *t, long long lo) {
    if (lo <= t->lo) return;
    t->lo = lo < t->hi ? lo : t->hi;
    if (t->fin == FIN_SDNONINV) {
        long long a = t->head, b = t->ints.hi;
        while (a < b) {
            long long mid = (a + b) / 2;
            if (IAT(&t->ints, mid) < t->lo) a = mid + 1; else b = mid;
        }
        t->head = a;
        if (a - t->ints.base > DROP_AFTER && 2 * (a - t->ints.base) > t->ints.hi - t->ints.base) {
            iarr_drop_before(&t->ints, a);
            oarr_drop_before(&t->vals, a);
        }
        return;
    }
    oarr_drop_before(&t->vals, t->lo);
    if (t->fin == FIN_FLATFIT) iarr_drop_before(&t->ints, t->lo);
}

/* -- the tree: Tree.add, suffix, window, first_key, evict ---------------- */

static int tree_add(MTree *t, long long key, PyObject *v) {
    if (t->open) {
        if (key < t->open_end) {
            PyObject *x = mcombine(t, t->open_value, v);
            if (!x) return -1;
            Py_SETREF(t->open_value, x);
            return 0;
        }
        PyObject *closed = t->open_value;
        t->open_value = NULL;
        t->open = 0;
        if (iarr_append(&t->keys, t->open_key) < 0) { Py_DECREF(closed); return -1; }
        if (final_append(t, closed) < 0) { t->keys.hi--; return -1; }
    }
    Py_INCREF(v);
    t->open_key = key;
    t->open_value = v;
    t->open_end = next_edge(t, key);
    t->open = 1;
    return 0;
}

/* fold the open partial into value (NULL: EMPTY) when it lies in the window */
static PyObject *with_open(MTree *t, PyObject *value, int inside) {
    if (!inside || !t->open) return value;
    if (!value) { Py_INCREF(t->open_value); return t->open_value; }
    PyObject *x = mcombine(t, value, t->open_value);
    Py_DECREF(value);
    return x;
}

/* Tree.suffix: [a, past every key); *value NULL for EMPTY.  -1 on error. */
static int tree_suffix(MTree *t, long long a, PyObject **value) {
    long long lo = key_position(t, a);
    PyObject *v = NULL;
    if (lo < t->hi && !(v = final_range(t, lo, t->hi))) return -1;
    v = with_open(t, v, a <= t->open_key);
    if (!v && PyErr_Occurred()) return -1;
    *value = v;
    return 0;
}

/* Tree.window, left-closed [a, b) */
static int tree_window(MTree *t, long long a, long long b, PyObject **value) {
    long long lo = key_position(t, a), hi = key_position(t, b);
    PyObject *v = NULL;
    if (lo < hi && !(v = final_range(t, lo, hi))) return -1;
    v = with_open(t, v, a <= t->open_key && t->open_key < b);
    if (!v && PyErr_Occurred()) return -1;
    *value = v;
    return 0;
}

/* Tree.first_key: 1 and *key when a partial starts at or after a, else 0 */
static int tree_first_key(MTree *t, long long a, long long *key) {
    long long i = key_position(t, a);
    if (i < t->hi) { *key = IAT(&t->keys, i); return 1; }
    if (t->open && t->open_key >= a) { *key = t->open_key; return 1; }
    return 0;
}

static void tree_evict(MTree *t, long long floor) {
    long long i = key_position(t, floor);
    if (i > t->lo) final_evict(t, i);
    iarr_drop_before(&t->keys, t->lo);
}

static void tree_clear(MTree *t) {
    Py_CLEAR(t->open_value);
    Py_CLEAR(t->combine);
    Py_CLEAR(t->inverse);
    PyMem_Free(t->table);
    PyMem_Free(t->keys.a);
    PyMem_Free(t->ints.a);
    PyMem_Free(t->stack);
    oarr_clear(&t->vals);
    t->table = NULL;
    t->keys.a = t->ints.a = t->stack = NULL;
}

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
