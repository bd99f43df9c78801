/* The Amortized MTA's algorithms on the state of _native_state.h (included by
 * mta/_native.c): each function mirrors the Python one it names. */
#ifndef MTA_NATIVE_MTA_H
#define MTA_NATIVE_MTA_H
#include "_native_tree.h"

/* -- the Amortized MTA -------------------------------------------------- */

/* Algorithms 4 and 5: R0 and the Stack from the leftmost tree's head pairs,
 * R1 from the other trees' root (tail) pairs.  O(log n). */
static int split(Core *c) {
    stack_clear(c);
    c->split_stale = 0;
    clear_ref(&c->r0);
    clear_ref(&c->r1);
    Level *q0 = &c->levels[0];
    if (q0->lo == q0->hi) return 0;
    for (int l = c->nlev - 1; l >= 0; l--) {
        Level *q = &c->levels[l];
        long long lo = q->lo;
        if (!(lo & 1) && lo + 1 < q->hi && stack_push(c, AT(q, lo + 1)) < 0) return -1;
    }
    PyObject *leaf = AT(q0, q0->lo);
    PyObject *r0;
    if (c->nstack) {
        if (!(r0 = combine(c, leaf, c->stack[c->nstack - 1]))) return -1;
    } else {
        Py_INCREF(leaf);
        r0 = leaf;
    }
    PyObject *r1 = NULL;
    for (int l = c->nlev - 2; l >= 0; l--) {
        Level *q = &c->levels[l];
        long long start = (q->hi - 1) & ~1LL;
        PyObject *tree;
        if (start + 1 < q->hi) {
            if (!(tree = combine(c, AT(q, start), AT(q, start + 1)))) goto fail;
        } else {
            tree = AT(q, start);
            Py_INCREF(tree);
        }
        if (r1) {
            PyObject *t = combine(c, r1, tree);
            Py_DECREF(tree);
            Py_DECREF(r1);
            r1 = t;
            if (!r1) goto fail;
        } else {
            r1 = tree;
        }
    }
    c->r0 = r0;
    c->r1 = r1;
    return 0;
fail:
    Py_DECREF(r0);
    Py_XDECREF(r1);  /* the trees combined before the one that failed */
    return -1;
}

/* Algorithm 3's loop: propagate final pairs' aggregates upward. */
static int climb(Core *c, long long pos) {
    Level *q = &c->levels[0];
    int m = 0;
    while (!(pos & 1) && pos > q->lo) {
        long long left = pos - 2;
        PyObject *value;
        if (left >= q->lo) {
            if (!(value = combine(c, AT(q, left), AT(q, pos - 1)))) return -1;
        } else {
            value = AT(q, pos - 1);
            Py_INCREF(value);
        }
        m++;
        if (m == c->nlev) {  /* the leftmost tree's root pair got a parent */
            if (m == MAX_LEVELS) { Py_DECREF(value); PyErr_SetString(PyExc_OverflowError, "window too tall"); return -1; }
            level_init(&c->levels[m], left >> 1);
            c->nlev++;
        }
        q = &c->levels[m];
        pos = q->hi;
        if (level_append(c, q, value) < 0) return -1;
    }
    if ((pos & 1) && m == c->nlev - 1) c->split_stale = 1;  /* completed the top pair */
    return 0;
}

/* Algorithm 3.  O(1) amortized. */
static int insert(Core *c, PyObject *v) {
    PyObject *r1 = c->r1;
    if (r1) {
        if (!(r1 = combine(c, r1, v))) return -1;
    } else {
        Py_INCREF(v);
        r1 = v;
    }
    Py_XSETREF(c->r1, r1);
    clear_ref(&c->result);
    Level *q = &c->levels[0];
    long long pos = q->hi;
    Py_INCREF(v);
    if (level_append(c, q, v) < 0) return -1;
    if ((pos & 1) || pos == q->lo) {
        if (c->nlev == 1) c->split_stale = 1;
        return 0;
    }
    return climb(c, pos);
}

/* Algorithms 6 and 7: remove the oldest leaf in amortized O(1). */
static int evict_one(Core *c) {
    if (c->split_stale && split(c) < 0) return -1;
    PyObject *r0 = c->nstack ? c->stack[--c->nstack] : NULL;
    Py_XSETREF(c->r0, r0);
    clear_ref(&c->result);
    Level *q = &c->levels[0];
    long long pos = q->lo;
    q->lo = pos + 1;
    if (!(pos & 1) && pos + 1 < q->hi) return 0;  /* <e0, e1> became <empty, e1> */
    PyObject *heads[MAX_LEVELS];  /* e1 of each new full head pair (borrowed) */
    int nh = 0, top = c->nlev - 1, m = 0;
    for (;;) {
        if ((pos & 1) && pos + 2 < q->hi) heads[nh++] = AT(q, pos + 2);
        if (m == top) {  /* the leftmost tree is gone: the next one moves up */
            if (top) {
                level_discard(&c->levels[top]);
                c->nlev--;
            }
            c->split_stale = 1;
            return 0;
        }
        m++;
        pos >>= 1;
        q = &c->levels[m];
        q->lo = pos + 1;
        if (!(pos & 1) && pos + 1 < q->hi) break;
    }
    for (int i = nh - 1; i >= 0; i--)
        if (stack_push(c, heads[i]) < 0) return -1;
    return 0;
}

/* query(): the Result Pair combined, cached.  Returns a new reference. */
static PyObject *query(Core *c) {
    if (!c->result) {
        PyObject *r;
        if (!c->r0) {
            r = c->r1 ? c->r1 : c->identity;
            Py_INCREF(r);
        } else if (!c->r1) {
            r = c->r0;
            Py_INCREF(r);
        } else if (!(r = combine(c, c->r0, c->r1))) {
            return NULL;
        }
        c->result = r;
    }
    Py_INCREF(c->result);
    return c->result;
}

/* Leaves left by position: drop emptied parents and levels, rebuild the
 * Result Pair and the Stack. */
static int after_bulk(Core *c) {
    repair_heads(c);
    while (c->nlev > 1 && c->levels[c->nlev - 1].lo == c->levels[c->nlev - 1].hi) {
        level_discard(&c->levels[c->nlev - 1]);
        c->nlev--;
    }
    clear_ref(&c->r0);
    clear_ref(&c->r1);
    clear_ref(&c->result);
    c->split_stale = 1;
    if (c->levels[0].lo < c->levels[0].hi) return split(c);
    return 0;
}

static int bit_length(long long n) {
    int b = 0;
    while (n) { b++; n >>= 1; }
    return b;
}

/* Section 4.2.4: single evictions, then bulk after log2 n of them.
 * Returns the number evicted, or -1 on error. */
static long long enforce(Core *c) {
    Level *q = &c->levels[0];
    long long n = q->hi - q->lo;
    if (c->wsp == Py_None || !n) return 0;
    long long evicted = -1;
    PyObject *total = query(c);
    if (!total) return -1;
    PyObject *acc = AT(q, q->lo);
    Py_INCREF(acc);
    int t = wsp_holds(c, total, acc);
    if (t <= 0) { evicted = t < 0 ? -1 : 0; goto done; }
    long long budget = bit_length(n);
    evicted = 0;
    for (;;) {
        if (evict_one(c) < 0) { evicted = -1; goto done; }
        evicted++;
        if (q->lo == q->hi) goto done;
        if (evicted == budget) {
            long long before = q->lo;
            if (recompute_spine(c) < 0 || bulk_search(c, total, &acc) < 0 || after_bulk(c) < 0) {
                evicted = -1;
                goto done;
            }
            evicted += q->lo - before;
            goto done;
        }
        PyObject *cand = combine(c, acc, AT(q, q->lo));
        if (!cand) { evicted = -1; goto done; }
        t = wsp_holds(c, total, cand);
        if (t <= 0) { Py_DECREF(cand); if (t < 0) evicted = -1; goto done; }
        Py_SETREF(acc, cand);
    }
done:
    Py_DECREF(total);
    Py_XDECREF(acc);
    return evicted;
}

/* bulk_evict of a count already checked (0 <= count <= len). */
static int bulk_evict(Core *c, long long count) {
    Level *q = &c->levels[0];
    if (count < bit_length(q->hi - q->lo)) {
        while (count--)
            if (evict_one(c) < 0) return -1;
        return 0;
    }
    q->lo += count;
    return after_bulk(c);
}

#endif
