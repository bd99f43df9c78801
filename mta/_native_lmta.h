/* The Log MTA's algorithms on the state of _native_state.h (included by
 * mta/_native.c): each function mirrors the method of mta/log_mta.py it
 * names.  The Log MTA uses the Core's levels only (no Stack, no Result
 * Pair): the root, the head of the top level, is the window's aggregate. */
#ifndef MTA_NATIVE_LMTA_H
#define MTA_NATIVE_LMTA_H
#include "_native_tree.h"

/* LogMTA.insert, Algorithm 1: append a leaf and update each level's tail up
 * to the root.  O(log n). */
static int log_insert(Core *c, PyObject *v) {
    Level *below = &c->levels[0];
    long long pos = below->hi;
    Py_INCREF(v);
    if (level_append(c, below, v) < 0) return -1;
    int m = 1;
    while (below->hi - below->lo > 1) {  /* not yet the root level */
        long long parent = pos >> 1, left = parent << 1;
        PyObject *value;
        if (left >= below->lo && left + 1 < below->hi) {
            if (!(value = combine(c, AT(below, left), AT(below, left + 1)))) return -1;
        } else {
            value = AT(below, pos);
            Py_INCREF(value);
        }
        if (m == MAX_LEVELS) { Py_DECREF(value); PyErr_SetString(PyExc_OverflowError, "window too tall"); return -1; }
        Level *q = &c->levels[m];
        if (m == c->nlev) {  /* the old root level got a second element */
            level_init(q, below->lo >> 1);
            c->nlev++;
            if (q->lo < parent) {  /* the old root's pair differs from the new leaf's */
                PyObject *root = AT(below, below->lo);
                Py_INCREF(root);
                if (level_append(c, q, root) < 0) { Py_DECREF(value); return -1; }
            }
        }
        if (parent == q->hi) {
            if (level_append(c, q, value) < 0) return -1;
        } else {
            level_set(q, parent, value);
        }
        below = q;
        pos = parent;
        m++;
    }
    return 0;
}

/* LogMTA._restore: after leaves left, drop orphaned parents, cut the levels
 * above the new root, recompute the leftmost branch.  O(log n). */
static int log_restore(Core *c) {
    repair_heads(c);
    int root = 0;
    while (root < c->nlev - 1 && c->levels[root].hi - c->levels[root].lo > 1) root++;
    while (c->nlev > root + 1) level_discard(&c->levels[--c->nlev]);
    return recompute_spine(c);
}

/* LogMTA.bulk_evict of a count already checked (0 <= count <= len); a count
 * of 1 is LogMTA.evict.  O(log n). */
static int log_bulk_evict(Core *c, long long count) {
    if (!count) return 0;
    c->levels[0].lo += count;
    return log_restore(c);
}

/* LogMTA.query: the root, or the identity when empty.  A new reference. */
static PyObject *log_query(Core *c) {
    PyObject *r;
    if (c->levels[0].lo == c->levels[0].hi) {
        r = c->identity;
    } else {
        Level *top = &c->levels[c->nlev - 1];
        r = AT(top, top->lo);
    }
    Py_INCREF(r);
    return r;
}

/* LogMTA.enforce, Algorithm 2: evict the longest prefix P with
 * wsp(total, P).  Returns the number evicted, or -1 on error. */
static long long log_enforce(Core *c) {
    Level *q = &c->levels[0];
    if (c->wsp == Py_None || q->lo == q->hi) return 0;
    long long before = q->lo;
    PyObject *total = log_query(c), *acc = NULL;
    int r = bulk_search(c, total, &acc);
    Py_DECREF(total);
    Py_XDECREF(acc);
    if (r < 0 || (q->lo != before && log_restore(c) < 0)) return -1;
    return q->lo - before;
}

#endif
