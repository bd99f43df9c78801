/* The codec's decoder and packer in C (optional; stores/codec.py falls back
 * to msgpack and its Python extension hooks without it; the packer is at
 * the end of this file).
 *
 * unpack(payload, hook) decodes one msgpack value exactly as
 * msgpack.unpackb(payload, ext_hook=hook, raw=False, strict_map_key=False)
 * does with stores.codec's hook, for the extensions the codec writes most:
 * a tuple (extension 1) is built here from its array, a set or frozenset
 * (3, 4) likewise; every other extension (big ints, user types) goes to
 * ``hook(code, data, levels)``, ``levels`` the tuples and sets built here
 * around it.  ``unpack(payload, hook, budget, refused)`` raises ``refused``
 * (stores.codec.CorruptValue; ValueError by default) for what the codec
 * refuses outright: tuples and sets nested more than ``budget`` deep (the
 * hook counts its own levels on top of ``levels``), so both decoders take
 * the same depths (stores.codec.MAX_NESTING); lists and maps nested more
 * than MAX_PAYLOAD_DEPTH deep in one payload; msgpack's own extensions
 * (negative codes: -1 is its timestamp), which the codec never writes.  A
 * stored record holds a tuple per element, and msgpack builds every
 * extension through Python code: that per-element cost is what this saves.
 *
 * It refuses a container header at least wherever msgpack does (a length
 * beyond the bytes left), so an error of the hook is never raised for a
 * payload msgpack would refuse before reaching that extension.
 *
 * Anything this decoder does not take as well-formed (a truncated payload,
 * trailing bytes, an extension whose payload is not one array, a key that
 * cannot be hashed, bad UTF-8, nesting past MAX_C_DEPTH) raises ValueError
 * or TypeError; codec.py then decodes the payload again with msgpack, whose
 * own error (or result) it reports, so malformed input is judged by one
 * rule.  An error raised by ``hook`` propagates unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define EXT_TUPLE 1
#define EXT_SET 3
#define EXT_FROZENSET 4

/* How deep lists and maps may nest in one msgpack payload (an extension's
 * payload is one of its own): msgpack's unpacker refuses deeper ones and
 * its packer does not write them, so a deeper payload is corrupt.  Counted
 * here, not left to the recursion limit, which a program may raise past
 * what the C stack holds. */
#define MAX_PAYLOAD_DEPTH 1024

/* How deep this decoder may recurse in a thread, over the payloads of the
 * extensions it builds and the unpack() calls the hook makes for the
 * others: past it, ValueError, and codec.py has msgpack decode the value,
 * one extension's payload at a time. */
#define MAX_C_DEPTH 2048

#if defined(_MSC_VER)
#define THREAD_LOCAL __declspec(thread)
#else
#define THREAD_LOCAL _Thread_local
#endif

static THREAD_LOCAL int c_depth;  /* lists, maps, tuples and sets being built in this thread */

typedef struct {
    const unsigned char *p, *end;
    PyObject *hook;
    int limit;   /* how many tuple and set levels may nest (stores.codec.MAX_NESTING less the hook's) */
    int levels;  /* the levels this decoder built around the current position, which the hook is told */
    PyObject *refused;  /* what the codec refuses outright raises this (stores.codec.CorruptValue) */
    int depth;   /* the lists and maps (and the extension's array) open in this payload */
} Reader;

static PyObject *malformed(const char *what) {
    PyErr_SetString(PyExc_ValueError, what);
    return NULL;
}

static int need(Reader *r, Py_ssize_t n) {
    if (n < 0 || r->end - r->p < n) {
        PyErr_SetString(PyExc_ValueError, "truncated payload");
        return -1;
    }
    return 0;
}

static uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* the next w bytes, big-endian */
static int take(Reader *r, int w, uint64_t *out) {
    if (need(r, w) < 0) return -1;
    *out = be(r->p, w);
    r->p += w;
    return 0;
}

/* a length field of w bytes: what follows must hold that many bytes at
 * least (an item of an array, a byte of a string, half an entry of a map),
 * checked before the cast, where a 32-bit Py_ssize_t would turn it negative */
static int length(Reader *r, int w, Py_ssize_t *n) {
    uint64_t u;
    if (take(r, w, &u) < 0) return -1;
    if (u > (uint64_t)(r->end - r->p)) {
        PyErr_SetString(PyExc_ValueError, "truncated payload");
        return -1;
    }
    *n = (Py_ssize_t)u;
    return 0;
}

static PyObject *value(Reader *r);

/* a container opens: within MAX_PAYLOAD_DEPTH in its payload and
 * MAX_C_DEPTH in the thread, or -1 with the error set */
static int open_container(Reader *r) {
    if (r->depth >= MAX_PAYLOAD_DEPTH) {
        PyErr_Format(r->refused, "a stored value nests lists and maps more than %d deep", MAX_PAYLOAD_DEPTH);
        return -1;
    }
    if (c_depth >= MAX_C_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "a value nested too deep for the C decoder");
        return -1;
    }
    r->depth++;
    c_depth++;
    return 0;
}

static PyObject *close_container(Reader *r, PyObject *v) {
    r->depth--;
    c_depth--;
    return v;
}

/* n items into a new list, or a new tuple (as_tuple): built in place, and
 * untracked by the cyclic GC when every item is an atomic value or an
 * untracked tuple, as CPython untracks such a tuple at the first collection
 * it survives (not one holding a dict, even an untracked one: a dict is
 * tracked again once a tracked value is put in it, the tuple would not be);
 * decoding a window's record or level group builds thousands, which the
 * young collections would otherwise walk first */
static PyObject *items_of(Reader *r, Py_ssize_t n, int as_tuple) {
    if (n > r->end - r->p) return malformed("truncated payload");  /* each item takes a byte at least */
    PyObject *out = as_tuple ? PyTuple_New(n) : PyList_New(n);
    if (!out) return NULL;
    int untracked = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = value(r);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        if (as_tuple) {
            untracked &= !PyObject_IS_GC(v) || (PyTuple_CheckExact(v) && !PyObject_GC_IsTracked(v));
            PyTuple_SET_ITEM(out, i, v);
        } else {
            PyList_SET_ITEM(out, i, v);
        }
    }
    if (as_tuple && untracked && PyObject_GC_IsTracked(out)) PyObject_GC_UnTrack(out);
    return out;
}

static PyObject *items(Reader *r, Py_ssize_t n, int as_tuple) {
    if (open_container(r) < 0) return NULL;
    return close_container(r, items_of(r, n, as_tuple));
}

static PyObject *map_of(Reader *r, Py_ssize_t n) {
    if (n > (r->end - r->p) / 2) return malformed("truncated payload");  /* an entry takes two bytes at least */
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = value(r);
        if (!k) goto fail;
        PyObject *v = value(r);
        if (!v) {
            Py_DECREF(k);
            goto fail;
        }
        int bad = PyDict_SetItem(d, k, v);  /* a repeated key keeps its last value, as msgpack does */
        Py_DECREF(k);
        Py_DECREF(v);
        if (bad) goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *map(Reader *r, Py_ssize_t n) {
    if (open_container(r) < 0) return NULL;
    return close_container(r, map_of(r, n));
}

/* the items of the one array an extension's payload [p, p + n) holds, as a
 * list or a tuple */
static PyObject *ext_items(Reader *r, const unsigned char *p, Py_ssize_t n, int as_tuple) {
    Reader in = {p, p + n, r->hook, r->limit, r->levels, r->refused, 0};
    if (n < 1) return malformed("empty extension payload");
    unsigned char b = *in.p++;
    Py_ssize_t count;
    if ((b & 0xf0) == 0x90) {
        count = b & 0x0f;
    } else if (b == 0xdc || b == 0xdd) {
        if (length(&in, b == 0xdc ? 2 : 4, &count) < 0) return NULL;
    } else {
        return malformed("extension payload is not an array");
    }
    PyObject *list = items(&in, count, as_tuple);
    if (list && in.p != in.end) {
        Py_DECREF(list);
        return malformed("extra data in an extension payload");
    }
    return list;
}

static PyObject *ext(Reader *r, int code, Py_ssize_t n) {
    if (need(r, n) < 0) return NULL;
    const unsigned char *p = r->p;
    r->p += n;
    if (code == EXT_TUPLE || code == EXT_SET || code == EXT_FROZENSET) {
        if (r->levels >= r->limit) {
            PyErr_SetString(r->refused, "a stored value nests tuples, sets or registered types deeper than the codec's "
                            "limit");
            return NULL;
        }
        r->levels++;
        PyObject *list = ext_items(r, p, n, code == EXT_TUPLE);
        r->levels--;
        if (!list || code == EXT_TUPLE) return list;
        PyObject *out = code == EXT_SET ? PySet_New(list) : PyFrozenSet_New(list);
        Py_DECREF(list);
        return out;
    }
    if (code < 0) {  /* msgpack would build a timestamp (-1) itself, past the hook */
        PyErr_Format(r->refused, "extension code %d is msgpack's own%s, which the codec never writes", code,
                     code == -1 ? " (a timestamp)" : "");
        return NULL;
    }
    return PyObject_CallFunction(r->hook, "iy#i", code, (const char *)p, n, r->levels);
}

static PyObject *sized(Reader *r, int w, int kind) {
    /* kind 0: str, 1: bin, 2: array, 3: map */
    Py_ssize_t n;
    if (length(r, w, &n) < 0) return NULL;
    if (kind == 2) return items(r, n, 0);
    if (kind == 3) return map(r, n);
    if (need(r, n) < 0) return NULL;
    const char *s = (const char *)r->p;
    r->p += n;
    return kind == 0 ? PyUnicode_DecodeUTF8(s, n, "strict") : PyBytes_FromStringAndSize(s, n);
}

static PyObject *value_of(Reader *r) {
    if (need(r, 1) < 0) return NULL;
    unsigned char b = *r->p++;
    if (b <= 0x7f) return PyLong_FromLong(b);
    if (b >= 0xe0) return PyLong_FromLong((long)(signed char)b);
    if ((b & 0xf0) == 0x80) return map(r, b & 0x0f);
    if ((b & 0xf0) == 0x90) return items(r, b & 0x0f, 0);
    if ((b & 0xe0) == 0xa0) {
        Py_ssize_t n = b & 0x1f;
        if (need(r, n) < 0) return NULL;
        const char *s = (const char *)r->p;
        r->p += n;
        return PyUnicode_DecodeUTF8(s, n, "strict");
    }
    switch (b) {
    case 0xc0: Py_RETURN_NONE;
    case 0xc2: Py_RETURN_FALSE;
    case 0xc3: Py_RETURN_TRUE;
    case 0xc4: return sized(r, 1, 1);
    case 0xc5: return sized(r, 2, 1);
    case 0xc6: return sized(r, 4, 1);
    case 0xc7: case 0xc8: case 0xc9: {
        Py_ssize_t n;
        if (length(r, b == 0xc7 ? 1 : b == 0xc8 ? 2 : 4, &n) < 0 || need(r, 1) < 0) return NULL;
        int code = (signed char)*r->p++;
        return ext(r, code, n);
    }
    case 0xca: {
        uint64_t u;
        if (take(r, 4, &u) < 0) return NULL;
        uint32_t bits = (uint32_t)u;
        float f;
        memcpy(&f, &bits, 4);
        return PyFloat_FromDouble((double)f);
    }
    case 0xcb: {
        uint64_t u;
        if (take(r, 8, &u) < 0) return NULL;
        double d;
        memcpy(&d, &u, 8);
        return PyFloat_FromDouble(d);
    }
    case 0xcc: case 0xcd: case 0xce: case 0xcf: {
        uint64_t u;
        if (take(r, 1 << (b - 0xcc), &u) < 0) return NULL;
        return PyLong_FromUnsignedLongLong(u);
    }
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
        int w = 1 << (b - 0xd0);
        uint64_t u;
        if (take(r, w, &u) < 0) return NULL;
        int64_t v = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u;
        return PyLong_FromLongLong(v);
    }
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8: {
        if (need(r, 1) < 0) return NULL;
        int code = (signed char)*r->p++;
        return ext(r, code, (Py_ssize_t)1 << (b - 0xd4));
    }
    case 0xd9: return sized(r, 1, 0);
    case 0xda: return sized(r, 2, 0);
    case 0xdb: return sized(r, 4, 0);
    case 0xdc: return sized(r, 2, 2);
    case 0xdd: return sized(r, 4, 2);
    case 0xde: return sized(r, 2, 3);
    case 0xdf: return sized(r, 4, 3);
    }
    return malformed("byte 0xc1 is not msgpack");
}

static PyObject *value(Reader *r) {
    if (Py_EnterRecursiveCall(" decoding a stored value")) return NULL;
    PyObject *v = value_of(r);
    Py_LeaveRecursiveCall();
    return v;
}

static PyObject *unpack(PyObject *self, PyObject *args) {
    Py_buffer buf;
    PyObject *hook;
    int budget = INT_MAX;
    PyObject *refused = PyExc_ValueError;
    if (!PyArg_ParseTuple(args, "y*O|iO:unpack", &buf, &hook, &budget, &refused)) return NULL;
    if (!PyExceptionClass_Check(refused)) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_TypeError, "unpack: refused must be an exception class");
        return NULL;
    }
    Reader r = {buf.buf, (const unsigned char *)buf.buf + buf.len, hook, budget, 0, refused, 0};
    PyObject *v = value(&r);
    if (v && r.p != r.end) {
        Py_CLEAR(v);
        malformed("extra data after the value");
    }
    PyBuffer_Release(&buf);
    return v;
    (void)self;
}

/* -- packing ------------------------------------------------------------
 *
 * pack(value, budget) gives the bytes stores.codec's msgpack path gives
 * value (msgpack.Packer(use_bin_type=True, strict_types=True,
 * use_single_float=False) with the codec's default hook: tuples, sets and
 * frozensets as extensions 1, 3 and 4 holding the array of their items),
 * for values made of the exact types None, bool, int (64 bits), float, str,
 * bytes, bytearray, list, tuple, dict, set and frozenset, extensions nested
 * at most budget deep.  For anything else (a big int, a registered or
 * unknown type, a subclass, a string that is not valid UTF-8, deeper
 * nesting, sizes past 2**32 - 1) it returns None, and the msgpack path
 * packs the value, or refuses it with its own error: one rule for what is
 * encodable and how. */

#define MAX_CONTAINER_DEPTH 500  /* below msgpack's own nesting limit (511) */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
} Writer;

/* 1: packed; 0: not this packer's (the caller returns None); -1: error */
static int pack_value(Writer *w, PyObject *o, int budget, int containers);

static int grow(Writer *w, Py_ssize_t n) {
    if (w->len + n <= w->cap) return 0;
    Py_ssize_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n) cap *= 2;
    char *b = PyMem_Realloc(w->buf, cap);
    if (!b) { PyErr_NoMemory(); return -1; }
    w->buf = b;
    w->cap = cap;
    return 0;
}

static int put(Writer *w, const void *p, Py_ssize_t n) {
    if (grow(w, n) < 0) return -1;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return 0;
}

/* the first byte, then v big-endian in n bytes */
static int put_be(Writer *w, unsigned char first, uint64_t v, int n) {
    unsigned char b[9];
    b[0] = first;
    for (int i = 0; i < n; i++) b[1 + i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    return put(w, b, 1 + n);
}

/* a header of a sized type: small (the fix form, below fix_limit), or
 * code8/16/32 (code8 0 when there is no 8-bit form) */
static int put_size(Writer *w, uint64_t n, unsigned char fix, uint64_t fix_limit, unsigned char code8,
                    unsigned char code16, unsigned char code32) {
    if (n < fix_limit) { unsigned char b = (unsigned char)(fix | n); return put(w, &b, 1); }
    if (code8 && n < 256) return put_be(w, code8, n, 1);
    if (n < 65536) return put_be(w, code16, n, 2);
    return put_be(w, code32, n, 4);
}

static int pack_int(Writer *w, PyObject *o) {
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow < 0) return 0;  /* a big int: an extension of the msgpack path */
    uint64_t u;
    if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(o);
        if (u == (uint64_t)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else if (v >= 0) {
        u = (uint64_t)v;
    } else {  /* msgpack's smallest signed form */
        if (v >= -32) { unsigned char b = (unsigned char)(signed char)v; return put(w, &b, 1) < 0 ? -1 : 1; }
        if (v >= -128) return put_be(w, 0xd0, (uint64_t)v, 1) < 0 ? -1 : 1;
        if (v >= -32768) return put_be(w, 0xd1, (uint64_t)v, 2) < 0 ? -1 : 1;
        if (v >= -2147483648LL) return put_be(w, 0xd2, (uint64_t)v, 4) < 0 ? -1 : 1;
        return put_be(w, 0xd3, (uint64_t)v, 8) < 0 ? -1 : 1;
    }
    int r;
    if (u < 128) { unsigned char b = (unsigned char)u; r = put(w, &b, 1); }
    else if (u < 256) r = put_be(w, 0xcc, u, 1);
    else if (u < 65536) r = put_be(w, 0xcd, u, 2);
    else if (u < 4294967296ULL) r = put_be(w, 0xce, u, 4);
    else r = put_be(w, 0xcf, u, 8);
    return r < 0 ? -1 : 1;
}

/* an extension holding the array of the items of iterable o (n of them):
 * the array is packed after room for the largest header, which is then
 * written in its msgpack form and the array moved up to it */
static int pack_ext_items(Writer *w, int code, PyObject *o, Py_ssize_t n, int budget, int containers) {
    if (budget < 1) return 0;
    Py_ssize_t at = w->len;
    if (grow(w, 6) < 0) return -1;
    w->len += 6;
    if (put_size(w, (uint64_t)n, 0x90, 16, 0, 0xdc, 0xdd) < 0) return -1;
    PyObject *it = PyObject_GetIter(o);
    if (!it) return -1;
    PyObject *item;
    Py_ssize_t count = 0;
    while ((item = PyIter_Next(it))) {
        int r = pack_value(w, item, budget - 1, containers + 1);
        Py_DECREF(item);
        count++;
        if (r <= 0) { Py_DECREF(it); return r; }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return -1;
    if (count != n) return 0;  /* changed while packed: the msgpack path decides */
    Py_ssize_t len = w->len - at - 6;
    if (len > 0xffffffffLL) return 0;
    unsigned char head[6];
    int h;
    switch (len) {
    case 1: head[0] = 0xd4; h = 1; break;
    case 2: head[0] = 0xd5; h = 1; break;
    case 4: head[0] = 0xd6; h = 1; break;
    case 8: head[0] = 0xd7; h = 1; break;
    case 16: head[0] = 0xd8; h = 1; break;
    default:
        if (len < 256) { head[0] = 0xc7; head[1] = (unsigned char)len; h = 2; }
        else if (len < 65536) { head[0] = 0xc8; head[1] = (unsigned char)(len >> 8); head[2] = (unsigned char)len; h = 3; }
        else {
            head[0] = 0xc9;
            for (int i = 0; i < 4; i++) head[1 + i] = (unsigned char)(len >> (8 * (3 - i)));
            h = 5;
        }
    }
    head[h++] = (unsigned char)code;
    memcpy(w->buf + at, head, h);
    memmove(w->buf + at + h, w->buf + at + 6, len);
    w->len = at + h + len;
    return 1;
}

static int pack_value(Writer *w, PyObject *o, int budget, int containers) {
    if (containers > MAX_CONTAINER_DEPTH) return 0;
    PyTypeObject *t = Py_TYPE(o);
    unsigned char b;
    if (o == Py_None) { b = 0xc0; return put(w, &b, 1) < 0 ? -1 : 1; }
    if (o == Py_True) { b = 0xc3; return put(w, &b, 1) < 0 ? -1 : 1; }
    if (o == Py_False) { b = 0xc2; return put(w, &b, 1) < 0 ? -1 : 1; }
    if (t == &PyLong_Type) return pack_int(w, o);
    if (t == &PyFloat_Type) {
        double d = PyFloat_AS_DOUBLE(o);
        uint64_t u;
        memcpy(&u, &d, 8);
        return put_be(w, 0xcb, u, 8) < 0 ? -1 : 1;
    }
    if (t == &PyUnicode_Type) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(o, &n);
        if (!s) { PyErr_Clear(); return 0; }  /* lone surrogates: msgpack's error */
        if ((uint64_t)n > 0xffffffffULL) return 0;
        if (put_size(w, (uint64_t)n, 0xa0, 32, 0xd9, 0xda, 0xdb) < 0 || put(w, s, n) < 0) return -1;
        return 1;
    }
    if (t == &PyBytes_Type || t == &PyByteArray_Type) {
        Py_ssize_t n = t == &PyBytes_Type ? PyBytes_GET_SIZE(o) : PyByteArray_GET_SIZE(o);
        const char *s = t == &PyBytes_Type ? PyBytes_AS_STRING(o) : PyByteArray_AS_STRING(o);
        if ((uint64_t)n > 0xffffffffULL) return 0;
        if (put_size(w, (uint64_t)n, 0, 0, 0xc4, 0xc5, 0xc6) < 0 || put(w, s, n) < 0) return -1;
        return 1;
    }
    if (t == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(o);
        if ((uint64_t)n > 0xffffffffULL) return 0;
        if (put_size(w, (uint64_t)n, 0x90, 16, 0, 0xdc, 0xdd) < 0) return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) {
            PyObject *item = PyList_GET_ITEM(o, i);
            Py_INCREF(item);
            int r = pack_value(w, item, budget, containers + 1);
            Py_DECREF(item);
            if (r <= 0) return r;
        }
        return PyList_GET_SIZE(o) == n ? 1 : 0;
    }
    if (t == &PyDict_Type) {
        Py_ssize_t n = PyDict_GET_SIZE(o), pos = 0, seen = 0;
        if ((uint64_t)n > 0xffffffffULL) return 0;
        if (put_size(w, (uint64_t)n, 0x80, 16, 0, 0xde, 0xdf) < 0) return -1;
        PyObject *k, *v;
        while (PyDict_Next(o, &pos, &k, &v)) {
            Py_INCREF(k);
            Py_INCREF(v);
            int r = pack_value(w, k, budget, containers + 1);
            if (r > 0) r = pack_value(w, v, budget, containers + 1);
            Py_DECREF(k);
            Py_DECREF(v);
            if (r <= 0) return r;
            seen++;
        }
        return seen == n && PyDict_GET_SIZE(o) == n ? 1 : 0;
    }
    if (t == &PyTuple_Type) return pack_ext_items(w, EXT_TUPLE, o, PyTuple_GET_SIZE(o), budget, containers);
    if (t == &PySet_Type) return pack_ext_items(w, EXT_SET, o, PySet_GET_SIZE(o), budget, containers);
    if (t == &PyFrozenSet_Type) return pack_ext_items(w, EXT_FROZENSET, o, PySet_GET_SIZE(o), budget, containers);
    return 0;
}

static PyObject *pack(PyObject *self, PyObject *args) {
    PyObject *o;
    int budget;
    if (!PyArg_ParseTuple(args, "Oi:pack", &o, &budget)) return NULL;
    if (budget < 0) Py_RETURN_NONE;  /* nested past the limit already */
    Writer w = {NULL, 0, 0};
    int r = pack_value(&w, o, budget, 0);
    PyObject *out = r > 0 ? PyBytes_FromStringAndSize(w.buf ? w.buf : "", w.len) : NULL;
    PyMem_Free(w.buf);
    if (r == 0) Py_RETURN_NONE;
    return out;
    (void)self;
}

/* Whether o is now untracked by the cyclic GC: an atomic value, or a list,
   dict, tuple, set or frozenset (exact types) whose items all are, untracked
   bottom-up (CPython untracks such tuples and dicts itself; a dict is tracked
   again when a tracked value is put in it, a list or set never is).  A set's
   iterator is allocated, which may run a collection and so Python code (a
   finalizer) that changes a container being walked: each item is held while
   it is walked, sizes are read afresh, and a set changed meanwhile counts as
   not untracked. */
static int untracked(PyObject *o, int depth) {
    if (!PyObject_GC_IsTracked(o)) return 1;
    if (depth > MAX_CONTAINER_DEPTH) return 0;
    PyTypeObject *t = Py_TYPE(o);
    int all = 1;
    if (t == &PyTuple_Type) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++) all &= untracked(PyTuple_GET_ITEM(o, i), depth + 1);
    } else if (t == &PyList_Type) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++) {
            PyObject *item = PyList_GET_ITEM(o, i);
            Py_INCREF(item);
            all &= untracked(item, depth + 1);
            Py_DECREF(item);
        }
    } else if (t == &PyDict_Type) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(o, &pos, &k, &v)) {
            Py_INCREF(k);
            Py_INCREF(v);
            all &= untracked(k, depth + 1) & untracked(v, depth + 1);
            Py_DECREF(k);
            Py_DECREF(v);
        }
    } else if (t == &PySet_Type || t == &PyFrozenSet_Type) {
        PyObject *it = PyObject_GetIter(o), *item;
        if (it == NULL) { PyErr_Clear(); return 0; }
        while ((item = PyIter_Next(it)) != NULL) {
            all &= untracked(item, depth + 1);
            Py_DECREF(item);
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) { PyErr_Clear(); return 0; }  /* changed while walked */
    } else {
        return 0;
    }
    if (all) PyObject_GC_UnTrack(o);
    return all;
}

static PyObject *untrack(PyObject *self, PyObject *o) {
    return PyBool_FromLong(untracked(o, 0));
    (void)self;
}

static PyMethodDef methods[] = {
    {"unpack", unpack, METH_VARARGS, "unpack(payload, hook): one msgpack value, tuples and sets built here."},
    {"pack", pack, METH_VARARGS, "pack(value, budget): msgpack bytes as the codec packs value, or None."},
    {"untrack", untrack, METH_O, "untrack(value): untrack its lists, dicts, tuples and sets of untracked items; whether value is."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "stores._codec", "The codec's decoder and packer in C.", -1, methods,
                                     NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__codec(void) { return PyModule_Create(&module); }
