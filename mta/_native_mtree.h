/* A shared plan's execution trees in C, for mta/_native_multi.h: the
 * partials at absolute positions, Tree's open partial and keys
 * (mta/multi/tree.py: add, suffix, window, first_key, evict) and the final
 * techniques naive, R-Int, FlatFIT and SlickDeque (Non-Inv) (naive.py,
 * rint.py, flatfit.py, slickdeque_noninv.py), rule for rule (included by
 * mta/_native.c, one translation unit). */
#ifndef MTA_NATIVE_MTREE_H
#define MTA_NATIVE_MTREE_H
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

/* The array a of *cap elements of size bytes with room for element n: a
 * itself while n < *cap, else a reallocated to twice the capacity (16 at
 * first) with *cap updated; NULL with MemoryError set if that fails (a is
 * then unchanged). */
static void *room_for(void *a, Py_ssize_t *cap, Py_ssize_t n, size_t size) {
    if (n < *cap) return a;
    Py_ssize_t grown = *cap ? 2 * *cap : 16;
    void *p = PyMem_Realloc(a, (size_t)grown * size);
    if (!p) { PyErr_NoMemory(); return NULL; }
    *cap = grown;
    return p;
}

/* How many dead elements, those at positions [base, lo), to drop: all of
 * them once they are more than DROP_AFTER and than the live ones, else 0
 * (amortized O(1) a position). */
static long long dead_to_drop(long long base, long long hi, long long lo) {
    long long dead = lo - base;
    return dead > DROP_AFTER && 2 * dead > hi - base ? dead : 0;
}

static int iarr_append(IArr *q, long long v) {
    Py_ssize_t n = (Py_ssize_t)(q->hi - q->base);
    long long *a = room_for(q->a, &q->cap, n, sizeof *a);
    if (!a) return -1;
    q->a = a;
    a[n] = v;
    q->hi++;
    return 0;
}

static void iarr_drop_before(IArr *q, long long lo) {
    long long dead = dead_to_drop(q->base, q->hi, lo);
    if (dead) {
        memmove(q->a, q->a + dead, (size_t)(q->hi - lo) * sizeof *q->a);
        q->base = lo;
    }
}

static int oarr_append(OArr *q, PyObject *v) {  /* steals v (may be NULL) */
    Py_ssize_t n = (Py_ssize_t)(q->hi - q->base);
    PyObject **a = room_for(q->a, &q->cap, n, sizeof *a);
    if (!a) { Py_XDECREF(v); return -1; }
    q->a = a;
    a[n] = v;
    q->hi++;
    return 0;
}

/* Slots are cleared before their reference is dropped: a finaliser run by
 * the release may start a collection, which visits the held slots. */
static void oarr_drop_before(OArr *q, long long lo) {
    long long dead = dead_to_drop(q->base, q->hi, lo);
    if (dead) {
        for (long long i = q->base; i < lo; i++) Py_CLEAR(OAT(q, i));
        memmove(q->a, q->a + dead, (size_t)(q->hi - lo) * sizeof *q->a);
        q->base = lo;
    }
}

static void oarr_pop(OArr *q) {
    q->hi--;
    Py_XDECREF(OAT(q, q->hi));
}

static void oarr_clear(OArr *q) {
    for (long long i = q->base; i < q->hi; i++) Py_CLEAR(OAT(q, i));
    PyMem_Free(q->a);
    q->a = NULL;
    q->cap = 0;
    q->base = q->hi = 0;
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
        long long *s = room_for(t->stack, &t->capstack, n, sizeof *s);
        if (!s) return NULL;
        t->stack = s;
        s[n++] = i;
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

#endif
