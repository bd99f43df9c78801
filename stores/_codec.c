/* The codec's decoder in C (optional; stores/codec.py falls back to msgpack
 * and its Python extension hook without it).
 *
 * unpack(payload, hook) decodes one msgpack value exactly as
 * msgpack.unpackb(payload, ext_hook=hook, raw=False, strict_map_key=False)
 * does with stores.codec's hook, for the extensions the codec writes most:
 * a tuple (extension 1) is built here from its array, a set or frozenset
 * (3, 4) likewise; every other extension (big ints, user types) goes to
 * ``hook(code, data)``.  A stored record holds a tuple per element, and
 * msgpack builds every extension through Python code: that per-element
 * cost is what this saves.
 *
 * It refuses a container header at least wherever msgpack does (a length
 * beyond the bytes left), so an error of the hook is never raised for a
 * payload msgpack would refuse before reaching that extension.
 *
 * Anything this decoder does not take as well-formed (a truncated payload,
 * trailing bytes, an extension whose payload is not one array, a code the
 * codec never writes, a key that cannot be hashed, bad UTF-8) raises
 * ValueError or TypeError; codec.py then decodes the payload again with
 * msgpack, whose own error (or result) it reports, so malformed input is
 * judged by one rule.  An error raised by ``hook`` propagates unchanged.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define EXT_TUPLE 1
#define EXT_SET 3
#define EXT_FROZENSET 4

typedef struct {
    const unsigned char *p, *end;
    PyObject *hook;
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

/* n items into a new list */
static PyObject *items(Reader *r, Py_ssize_t n) {
    if (n > r->end - r->p) return malformed("truncated payload");  /* each item takes a byte at least */
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = value(r);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, v);
    }
    return list;
}

static PyObject *map(Reader *r, Py_ssize_t n) {
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

/* the items of the one array an extension's payload [p, p + n) holds */
static PyObject *ext_items(Reader *r, const unsigned char *p, Py_ssize_t n) {
    Reader in = {p, p + n, r->hook};
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
    PyObject *list = items(&in, count);
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
        PyObject *list = ext_items(r, p, n);
        if (!list) return NULL;
        PyObject *out = code == EXT_TUPLE ? PyList_AsTuple(list)
                        : code == EXT_SET ? PySet_New(list) : PyFrozenSet_New(list);
        Py_DECREF(list);
        return out;
    }
    if (code < 0) return malformed("extension code the codec does not write");  /* msgpack's own (timestamps) */
    return PyObject_CallFunction(r->hook, "iy#", code, (const char *)p, n);
}

static PyObject *sized(Reader *r, int w, int kind) {
    /* kind 0: str, 1: bin, 2: array, 3: map */
    Py_ssize_t n;
    if (length(r, w, &n) < 0) return NULL;
    if (kind == 2) return items(r, n);
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
    if ((b & 0xf0) == 0x90) return items(r, b & 0x0f);
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
    if (!PyArg_ParseTuple(args, "y*O:unpack", &buf, &hook)) return NULL;
    Reader r = {buf.buf, (const unsigned char *)buf.buf + buf.len, hook};
    PyObject *v = value(&r);
    if (v && r.p != r.end) {
        Py_CLEAR(v);
        malformed("extra data after the value");
    }
    PyBuffer_Release(&buf);
    return v;
    (void)self;
}

static PyMethodDef methods[] = {
    {"unpack", unpack, METH_VARARGS, "unpack(payload, hook): one msgpack value, tuples and sets built here."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "stores._codec", "The codec's decoder in C.", -1, methods,
                                     NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__codec(void) { return PyModule_Create(&module); }
