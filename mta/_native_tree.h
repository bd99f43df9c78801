/* The level machinery both compiled MTAs share, as mta/tree.py (included by
 * _native_mta.h and _native_lmta.h): Algorithm 2's search and the repair of
 * the leftmost branch after leaves left. */
#ifndef MTA_NATIVE_TREE_H
#define MTA_NATIVE_TREE_H
#include "_native_state.h"

/* mta.tree.repair_heads: drop parents whose children have all left. */
static void repair_heads(Core *c) {
    Level *below = &c->levels[0];
    for (int l = 1; l < c->nlev; l++) {
        Level *q = &c->levels[l];
        long long lo = below->lo < below->hi ? below->lo >> 1 : q->hi;
        if (lo > q->lo) q->lo = lo < q->hi ? lo : q->hi;
        below = q;
    }
}

/* mta.tree.recompute_spine: the leftmost branch bottom-up, O(height). */
static int recompute_spine(Core *c) {
    Level *below = &c->levels[0];
    for (int l = 1; l < c->nlev; l++) {
        Level *q = &c->levels[l];
        if (q->lo == q->hi) break;
        long long first = q->lo << 1;
        if (first < below->lo) first = below->lo;
        PyObject *v;
        if (first + 1 < below->hi && !(first & 1)) {
            if (!(v = combine(c, AT(below, first), AT(below, first + 1)))) return -1;
        } else {
            v = AT(below, first);
            Py_INCREF(v);
        }
        level_set(q, q->lo, v);
        below = q;
    }
    return 0;
}

static int wsp_holds(Core *c, PyObject *total, PyObject *cand) {
    PyObject *args[2] = {total, cand};
    PyObject *r = PyObject_Vectorcall(c->wsp, args, 2, NULL);
    if (!r) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* Algorithm 2 (mta.tree.bulk_search) on the Log MTA's tree or the Amortized
 * MTA's forest: *acc is NULL (EMPTY) or a new reference, replaced by the
 * aggregate of what left. */
static int bulk_search(Core *c, PyObject *total, PyObject **acc) {
    long long floor = 0;
    for (int l = c->nlev - 1; l >= 0; l--) {
        Level *q = &c->levels[l];
        long long lo = q->lo, hi = q->hi;
        if (floor > lo) lo = floor < hi ? floor : hi;
        while (lo < hi) {
            PyObject *v = AT(q, lo), *cand;
            if (*acc) {
                if (!(cand = combine(c, *acc, v))) return -1;
            } else {
                Py_INCREF(v);
                cand = v;
            }
            int t = wsp_holds(c, total, cand);
            if (t <= 0) { Py_DECREF(cand); if (t < 0) return -1; break; }
            Py_XSETREF(*acc, cand);
            lo++;
        }
        q->lo = lo;
        floor = lo << 1;
    }
    return 0;
}

#endif
