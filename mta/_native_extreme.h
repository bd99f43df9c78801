/* The max or min of every sliding window of a float64 or int64 array, for
 * the columnar engine's max and min (spark_ops/kernels.py:
 * reduce_sliding), as mta._native.window_extreme.
 *
 * Row i's window is x[start[i] .. end[i]], both ends non-decreasing in i (a
 * sliding window, count or time).  A monotonic deque (the "ascending
 * minima" of Lemire, "Streaming maximum-minimum filter using no more than
 * three comparisons per element", 2006): the indices of the values that
 * can still be a window's extreme, their values decreasing (max) or
 * increasing (min) from the head; a new value drops the tail's values it
 * beats, a window's start drops the head's indices before it, and the
 * head is the window's extreme.  Each index enters and leaves once: O(n +
 * m) in all, with no Python object per value.  A NaN is never in the
 * deque: a window holding one is NaN, as NumPy's maximum and minimum make
 * it.  Of equal values (0.0 and -0.0 among them) either may come out: the
 * caller settles which zero (spark_ops.kernels._oldest_zero). */
#ifndef MTA_NATIVE_EXTREME_H
#define MTA_NATIVE_EXTREME_H
#include <Python.h>
#include <math.h>
#include "_native_moments.h"

#define NOT_NAN_INT(v) 0
#define EXTREME_LOOP(NAME, T, IS_NAN)                                                                       \
    static int NAME(const T *x, Py_ssize_t nx, const long long *start, const long long *end, T *out,      \
                    Py_ssize_t m, long long *dq, int is_max, WindowFault *fault) {                          \
        long long head = 0, tail = 0, next = 0, last_nan = -1, last_start = 0, last_end = -1;              \
        for (Py_ssize_t i = 0; i < m; i++) {                                                                \
            long long s = start[i], e = end[i];                                                             \
            if (s < 0 || e >= nx) {                                                                         \
                *fault = (WindowFault){i, s, e};                                                            \
                return -1;                                                                                  \
            }                                                                                               \
            if (s < last_start || e < last_end || s > e) return 0;                                          \
            last_start = s;                                                                                 \
            last_end = e;                                                                                   \
            for (; next <= e; next++) {                                                                     \
                T v = x[next];                                                                              \
                if (IS_NAN(v)) {                                                                            \
                    last_nan = next;                                                                        \
                    continue;                                                                               \
                }                                                                                           \
                if (is_max)                                                                                 \
                    while (tail > head && x[dq[tail - 1]] <= v) tail--;                                     \
                else                                                                                        \
                    while (tail > head && x[dq[tail - 1]] >= v) tail--;                                     \
                dq[tail++] = next;                                                                          \
            }                                                                                               \
            while (tail > head && dq[head] < s) head++;                                                     \
            out[i] = last_nan >= s ? x[last_nan] : x[dq[head]];                                             \
        }                                                                                                   \
        return 1;                                                                                           \
    }

EXTREME_LOOP(extreme_double, double, isnan)
EXTREME_LOOP(extreme_int64, long long, NOT_NAN_INT)

/* window_extreme(x, start, end, out, is_max) -> bool.  Writes each window's
 * max (or min) into out, of x's kind, and returns True; or returns False,
 * out unusable, when the windows do not slide (an end or a start
 * decreases, or a window is empty).  ValueError for a window outside x, an
 * out of another length, or an out sharing memory with x, start or end.
 * The GIL is released while it runs. */
static PyObject *window_extreme(PyObject *self, PyObject *args) {
    PyObject *ox, *os, *oe, *oout, *result = NULL;
    int is_max;
    if (!PyArg_ParseTuple(args, "OOOOp:window_extreme", &ox, &os, &oe, &oout, &is_max)) return NULL;
    Py_buffer v[4];
    int held = 0;
    Py_buffer *bx = &v[0], *bs = &v[1], *be = &v[2], *bo = &v[3];
    char kind = take_buffer(ox, v, &held, "dq", 0, "window_extreme", "x");
    if (!kind || !take_buffer(os, v, &held, "q", 0, "window_extreme", "start")
        || !take_buffer(oe, v, &held, "q", 0, "window_extreme", "end")
        || !take_buffer(oout, v, &held, kind == 'd' ? "d" : "q", 1, "window_extreme", "out"))
        goto release;

    Py_ssize_t nx = bx->len / 8, m = bs->len / 8;
    if (be->len / 8 != m || bo->len / 8 != m) {
        PyErr_SetString(PyExc_ValueError, "window_extreme: start, end and out differ in length");
        goto release;
    }
    const long long *start = bs->buf, *end = be->buf;
    static const char *const names[] = {"x", "start", "end", "out"};
    if (!windows_inside(start, end, m, nx, "window_extreme") || !outputs_apart(v, names, 3, 4, "window_extreme"))
        goto release;
    long long *dq = PyMem_RawMalloc((nx ? nx : 1) * sizeof(long long));
    if (!dq) {
        PyErr_NoMemory();
        goto release;
    }
    int slides;
    WindowFault fault = {0, 0, 0};
    Py_BEGIN_ALLOW_THREADS
    slides = kind == 'd' ? extreme_double(bx->buf, nx, start, end, bo->buf, m, dq, is_max, &fault)
                         : extreme_int64(bx->buf, nx, start, end, bo->buf, m, dq, is_max, &fault);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(dq);
    result = slides < 0 ? NULL : PyBool_FromLong(slides);
    if (slides < 0) window_outside("window_extreme", fault, nx);
release:
    release_buffers(v, held);
    return result;
}

#endif
