/* The moments (count, mean, M2) of every sliding window of a float64 array,
 * for the columnar engine's spreads (spark_ops/kernels.py: variance,
 * stddev, var_pop, stddev_pop), as mta._native.window_moments.
 *
 * Row i's window is x[start[i] .. end[i]], both ends non-decreasing in i (a
 * sliding window, count or time).  Two-Stacks (Tangwongsan, Hirzel and
 * Schneider, "Low-latency sliding-window aggregation in worst-case constant
 * time", DEBS 2017, section 2): the newest values are combined into one
 * back aggregate as they arrive; when the window's start passes the front,
 * the back's values still in the window are flipped into suffix aggregates
 * (F[j] = x[j] combined with everything after it up to the flip).  A
 * window is then F[start] combined with the back.  Each value is combined
 * once into the back and once into a flip, each window once: at most three
 * combines per row amortized (one flip may take a whole window), O(n + m)
 * in all, with no Python object per value.
 *
 * The combine is mta.aggregators._moments_combine (Chan, Golub and
 * LeVeque's parallel formula), the same operations in the same order, and
 * a value lifts to (1, x, 0), or (1, x, NaN) when it is infinite or NaN, as
 * spark_ops.kernels.window_moments lifts it: the same stability as the MTA
 * (no sum of squares, no cancellation far from 0).  The build adds
 * -ffp-contract=off so no multiply-add is fused (pyproject.toml). */
#ifndef MTA_NATIVE_MOMENTS_H
#define MTA_NATIVE_MOMENTS_H
#include <Python.h>
#include <math.h>
#include <string.h>

typedef struct { double n, mean, m2; } Moments;

static const Moments MOMENTS_IDENTITY = {0.0, 0.0, 0.0};

static inline Moments moments_lift(double x) {
    Moments m = {1.0, x, isfinite(x) ? 0.0 : NAN};
    return m;
}

/* mta.aggregators._moments_combine on doubles. */
static inline Moments moments_combine(Moments a, Moments b) {
    if (a.n == 0.0) return b;
    if (b.n == 0.0) return a;
    Moments r;
    double n = a.n + b.n;
    double delta = b.mean - a.mean;
    r.n = n;
    r.mean = a.mean + delta * b.n / n;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * b.n / n;
    return r;
}

/* A C-contiguous one-dimensional buffer of 8-byte items of one of the
 * kinds ``kinds`` ('d': float64, 'q': int64) in the machine's byte order;
 * writable if asked.  Its kind, or 0 with TypeError naming ``fn`` and
 * ``what`` (or the exporter's own error, such as NumPy's ValueError for a
 * read-only or non-contiguous array). */
static char native_buffer(PyObject *o, Py_buffer *view, const char *kinds, int writable, const char *fn,
                          const char *what) {
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return 0;
    const char *f = view->format ? view->format : "B";
    while (*f == '@' || *f == '=' || (PY_LITTLE_ENDIAN && *f == '<') || (!PY_LITTLE_ENDIAN && *f == '>'))
        f++;  /* the native byte order, spelled any way, is what C reads */
    char kind = f[0] == 'l' ? 'q' : f[0];
    if (view->ndim == 1 && view->itemsize == 8 && f[0] && !f[1] && (kind == 'd' || kind == 'q') && strchr(kinds, kind))
        return kind;
    PyErr_Format(PyExc_TypeError, "%s: %s must be a contiguous 1-d %s array", fn, what,
                 strchr(kinds, 'd') ? (strchr(kinds, 'q') ? "float64 or int64" : "float64") : "int64");
    PyBuffer_Release(view);
    return 0;
}

/* native_buffer into views[*held], counted in *held when taken: a call
 * takes its buffers in turn and releases what it holds with
 * release_buffers, whichever failed. */
static char take_buffer(PyObject *o, Py_buffer *views, int *held, const char *kinds, int writable, const char *fn,
                        const char *what) {
    char kind = native_buffer(o, &views[*held], kinds, writable, fn, what);
    if (kind) ++*held;
    return kind;
}

/* Row i's window [s, e], as a loop read it, when it lies outside the values. */
typedef struct { Py_ssize_t i; long long s, e; } WindowFault;

/* 0 with ValueError naming ``fn`` and the window ``f`` outside nx values. */
static int window_outside(const char *fn, WindowFault f, Py_ssize_t nx) {
    PyErr_Format(PyExc_ValueError, "%s: window %zd [%lld, %lld] is outside the %zd values", fn, f.i, f.s, f.e, nx);
    return 0;
}

/* Whether every window [start[i], end[i]] of m lies within nx values;
 * else 0 with ValueError naming ``fn`` and the first one outside.  Checked
 * before a kernel runs so that such windows are refused whether or not
 * earlier ones slide; the kernels check each window again as they read it,
 * since another thread may write start and end while the GIL is released. */
static int windows_inside(const long long *start, const long long *end, Py_ssize_t m, Py_ssize_t nx,
                          const char *fn) {
    for (Py_ssize_t i = 0; i < m; i++)
        if (start[i] < 0 || end[i] >= nx) return window_outside(fn, (WindowFault){i, start[i], end[i]}, nx);
    return 1;
}

/* Whether the buffers from views[first] on (a kernel's outputs) share no
 * byte with any view before them (its inputs, the other outputs); else 0
 * with ValueError naming ``fn`` and the two.  A kernel writing where it
 * reads would take its own results for windows' bounds or values. */
static int outputs_apart(const Py_buffer *views, const char *const *names, int first, int n, const char *fn) {
    for (int j = first; j < n; j++) {
        const char *a = views[j].buf;
        for (int k = 0; k < j; k++) {
            const char *b = views[k].buf;
            if (views[j].len && views[k].len && a < b + views[k].len && b < a + views[j].len) {
                PyErr_Format(PyExc_ValueError, "%s: %s shares memory with %s", fn, names[j], names[k]);
                return 0;
            }
        }
    }
    return 1;
}

/* Release the first ``held`` of ``views``, the last first. */
static void release_buffers(Py_buffer *views, int held) {
    while (held > 0) PyBuffer_Release(&views[--held]);
}

/* window_moments(x, start, end, mean_out, m2_out) -> bool.  Writes each
 * window's mean and M2 (its count is end - start + 1) and returns True; or
 * returns False, the outputs unusable, when the windows do not slide (an
 * end or a start decreases, or a window is empty).  ValueError for a window
 * outside x, outputs of another length, or outputs sharing memory with x,
 * start, end or each other.  The GIL is released while it runs. */
static PyObject *window_moments(PyObject *self, PyObject *args) {
    PyObject *ox, *os, *oe, *omean, *om2, *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO:window_moments", &ox, &os, &oe, &omean, &om2)) return NULL;
    Py_buffer v[5];
    int held = 0;
    Py_buffer *bx = &v[0], *bs = &v[1], *be = &v[2], *bmean = &v[3], *bm2 = &v[4];
    if (!take_buffer(ox, v, &held, "d", 0, "window_moments", "x")
        || !take_buffer(os, v, &held, "q", 0, "window_moments", "start")
        || !take_buffer(oe, v, &held, "q", 0, "window_moments", "end")
        || !take_buffer(omean, v, &held, "d", 1, "window_moments", "mean_out")
        || !take_buffer(om2, v, &held, "d", 1, "window_moments", "m2_out"))
        goto release;

    Py_ssize_t nx = bx->len / 8, m = bs->len / 8;
    if (be->len / 8 != m || bmean->len / 8 != m || bm2->len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "window_moments: start, end, mean_out and m2_out differ in length");
        goto release;
    }
    const double *x = bx->buf;
    const long long *start = bs->buf, *end = be->buf;
    static const char *const names[] = {"x", "start", "end", "mean_out", "m2_out"};
    if (!windows_inside(start, end, m, nx, "window_moments") || !outputs_apart(v, names, 3, 5, "window_moments"))
        goto release;
    Moments *front = PyMem_RawMalloc((nx ? nx : 1) * sizeof(Moments));
    if (!front) {
        PyErr_NoMemory();
        goto release;
    }
    double *mean_out = bmean->buf, *m2_out = bm2->buf;
    int slides = 1;
    WindowFault fault = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    Moments back = MOMENTS_IDENTITY;
    long long front_end = 0, back_end = 0;  /* the front holds [.., front_end), the back [front_end, back_end) */
    long long last_start = 0, last_end = -1;
    for (Py_ssize_t i = 0; i < m; i++) {
        long long s = start[i], e = end[i];
        if (s < 0 || e >= nx) {
            fault = (WindowFault){i, s, e};
            slides = -1;
            break;
        }
        if (s < last_start || e < last_end || s > e) {
            slides = 0;
            break;
        }
        last_start = s;
        last_end = e;
        for (; back_end <= e; back_end++) back = moments_combine(back, moments_lift(x[back_end]));
        if (s >= front_end) {  /* the front is spent: the back's values from s on become suffix aggregates */
            Moments acc = MOMENTS_IDENTITY;
            for (long long j = back_end - 1; j >= s; j--) front[j] = acc = moments_combine(moments_lift(x[j]), acc);
            front_end = back_end;
            back = MOMENTS_IDENTITY;
        }
        Moments w = moments_combine(front[s], back);
        mean_out[i] = w.mean;
        m2_out[i] = w.m2;
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(front);
    result = slides < 0 ? NULL : PyBool_FromLong(slides);
    if (slides < 0) window_outside("window_moments", fault, nx);
release:
    release_buffers(v, held);
    return result;
}

#endif
