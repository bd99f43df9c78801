/* The Amortized MTA's in-memory core in C (optional; mta/native.py wraps it).
 *
 * The same algorithms as mta/amortized_mta.py, mta/tree.py and
 * mta/level_queue.py, on level queues held as C arrays of object
 * references: insert is Algorithm 3, eviction Algorithms 6 and 7 with the
 * lazy split of Algorithms 4 and 5, enforcement section 4.2.4 (single
 * evictions, then Algorithm 2 after log2 n of them), bulk eviction by
 * position.  The pure-Python modules stay the reference: every rule here
 * mirrors one there, and the engine tests run both against the oracle.
 *
 * Values stay Python objects.  combine is a Python callable, except for the
 * ready monoids mta/native.py recognises (KIND_*), whose combine is done
 * here with the same comparisons and additions the Python callable makes.
 *
 * Failure: if user code (combine, wsp, a comparison) raises during an
 * operation, the core keeps the exception and every later operation calls
 * raise_failed(exception, operation_name), which raises EngineFailedError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { KIND_CALL = 0, KIND_ADD = 1, KIND_BUILTIN_MAX = 2, KIND_SELECT_GT = 3, KIND_SELECT_LT = 4, KIND_MOMENTS = 5 };

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
    PyObject *r0, *r1, *result;  /* NULL: EMPTY */
    PyObject **stack;
    Py_ssize_t nstack, capstack;
    int split_stale;
    int kind;
    PyObject *combine, *identity, *wsp, *raise_failed, *empty_error;
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
static PyObject *moments(Core *c, PyObject *a, PyObject *b) {
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b) || PyTuple_GET_SIZE(a) != 3 || PyTuple_GET_SIZE(b) != 3) {
        PyObject *args[2] = {a, b};
        return PyObject_Vectorcall(c->combine, args, 2, NULL);
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

static PyObject *combine(Core *c, PyObject *a, PyObject *b) {
    switch (c->kind) {
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
        return moments(c, a, b);
    default: {
        PyObject *args[2] = {a, b};
        return PyObject_Vectorcall(c->combine, args, 2, NULL);
    }
    }
}

/* -- level queues ------------------------------------------------------- */

#define AT(q, i) ((q)->items[(i) - (q)->base])

static void level_init(Level *q, long long lo) {
    q->items = NULL;
    q->cap = 0;
    q->base = q->lo = q->hi = lo;
}

static void level_discard(Level *q) {
    for (long long i = q->base; i < q->hi; i++) Py_DECREF(AT(q, i));
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
        for (long long i = q->base; i < q->lo; i++) Py_DECREF(AT(q, i));
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

static int wsp_holds(Core *c, PyObject *total, PyObject *cand) {
    PyObject *args[2] = {total, cand};
    PyObject *r = PyObject_Vectorcall(c->wsp, args, 2, NULL);
    if (!r) return -1;
    int t = PyObject_IsTrue(r);
    Py_DECREF(r);
    return t;
}

/* Algorithm 2 (mta.tree.bulk_search) on the forest; *acc is a new reference. */
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

/* -- Python methods ----------------------------------------------------- */

static PyObject *Core_insert(Core *c, PyObject *v) {
    GUARD(c);
    if (insert(c, v) < 0) return fail(c, "insert");
    Py_RETURN_NONE;
}

static PyObject *Core_evict(Core *c, PyObject *unused) {
    GUARD(c);
    if (c->levels[0].lo == c->levels[0].hi) {
        PyErr_SetString(c->empty_error, "evict() on an empty window");
        return NULL;
    }
    if (evict_one(c) < 0) return fail(c, "evict");
    Py_RETURN_NONE;
}

static PyObject *Core_bulk_evict_checked(Core *c, PyObject *arg) {
    GUARD(c);
    long long count = PyLong_AsLongLong(arg);
    if (count == -1 && PyErr_Occurred()) return NULL;
    if (count < 0 || count > c->levels[0].hi - c->levels[0].lo) {
        PyErr_SetString(PyExc_ValueError, "bulk_evict_checked: count out of range");
        return NULL;
    }
    if (bulk_evict(c, count) < 0) return fail(c, "bulk_evict");
    Py_RETURN_NONE;
}

static PyObject *Core_query(Core *c, PyObject *unused) {
    GUARD(c);
    PyObject *r = query(c);
    return r ? r : fail(c, "query");
}

static PyObject *Core_enforce(Core *c, PyObject *unused) {
    GUARD(c);
    long long n = enforce(c);
    return n < 0 ? fail(c, "enforce") : PyLong_FromLongLong(n);
}

static PyObject *Core_push(Core *c, PyObject *v) {
    GUARD(c);
    if (insert(c, v) < 0 || enforce(c) < 0) return fail(c, "push");
    PyObject *r = query(c);
    return r ? r : fail(c, "push");
}

/* slide(values, counts): both lists, the counts checked by the caller. */
static PyObject *Core_slide_checked(Core *c, PyObject *args) {
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
        if (insert(c, PyList_GET_ITEM(values, i)) < 0) goto fail;
        long long k = PyLong_AsLongLong(PyList_GET_ITEM(counts, i));
        if (k == -1 && PyErr_Occurred()) goto fail;
        if (k == 1) {
            if (evict_one(c) < 0) goto fail;
        } else if (k && bulk_evict(c, k) < 0) {
            goto fail;
        }
        PyObject *r = query(c);
        if (!r) goto fail;
        PyList_SET_ITEM(out, i, r);
    }
    return out;
fail:
    Py_DECREF(out);
    return fail(c, "slide");
}

static PyObject *Core_height(Core *c, PyObject *unused) { return PyLong_FromLong(c->nlev); }

static PyObject *Core_head(Core *c, PyObject *unused) {
    Level *q = &c->levels[0];
    if (q->lo == q->hi) { PyErr_SetString(c->empty_error, "head() of an empty window"); return NULL; }
    PyObject *v = AT(q, q->lo);
    Py_INCREF(v);
    return v;
}

static PyObject *Core_local_size(Core *c, PyObject *unused) {
    long long n = 0;
    for (int l = 0; l < c->nlev; l++) n += c->levels[l].hi - c->levels[l].base;
    return PyLong_FromLongLong(n + c->nstack + 2 + c->nlev);
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

static int Core_init(Core *c, PyObject *args, PyObject *kw) {
    static char *names[] = {"combine", "identity", "kind", "wsp", "raise_failed", "empty_error", "compact_after", NULL};
    PyObject *comb, *ident, *wsp, *raise_failed, *empty_error;
    int kind;
    long long compact_after;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOiOOOL", names, &comb, &ident, &kind, &wsp, &raise_failed,
                                     &empty_error, &compact_after))
        return -1;
    if (c->combine) { PyErr_SetString(PyExc_TypeError, "AmortizedCore is initialised once"); return -1; }
    if (kind < KIND_CALL || kind > KIND_MOMENTS) { PyErr_SetString(PyExc_ValueError, "unknown combine kind"); return -1; }
    Py_INCREF(comb); c->combine = comb;
    Py_INCREF(ident); c->identity = ident;
    Py_INCREF(wsp); c->wsp = wsp;
    Py_INCREF(raise_failed); c->raise_failed = raise_failed;
    Py_INCREF(empty_error); c->empty_error = empty_error;
    c->kind = kind;
    c->compact_after = compact_after;
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

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "mta._native", "Compiled Amortized MTA core.", -1, NULL};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "AmortizedCore", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "KIND_CALL", KIND_CALL);
    PyModule_AddIntConstant(m, "KIND_ADD", KIND_ADD);
    PyModule_AddIntConstant(m, "KIND_BUILTIN_MAX", KIND_BUILTIN_MAX);
    PyModule_AddIntConstant(m, "KIND_SELECT_GT", KIND_SELECT_GT);
    PyModule_AddIntConstant(m, "KIND_SELECT_LT", KIND_SELECT_LT);
    PyModule_AddIntConstant(m, "KIND_MOMENTS", KIND_MOMENTS);
    return m;
}
