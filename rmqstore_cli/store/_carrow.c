/* export's text columns of a block of records as Arrow string buffers (values one after
 * another, int32 offsets), written straight from the mapped commit log: the hosts
 * ("ip:port", MessageDecoder#decode's bornHost/storeHost as DESIGN.md writes them) and the
 * offset msgId (MessageDecoder#createMessageId: upper-case hex of the store address, port and
 * physical offset bytes). Part of the _ckernels extension (setup.py); the pure-Python twins of
 * the same names are in rmqstore_cli/store/records/texts.py, which the tests compare byte for
 * byte on hostile input. No layout constant lives here: the caller passes every position.
 *
 * Every argument is checked (item sizes, lengths, each range against the file and the room
 * left in out before a value is written): a bad one raises ValueError, never reads or writes
 * outside a buffer. The loops run without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_carrow.h"

/* "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:-2147483648" */
#define HOST_MAX (41 + 1 + 11)

static const char HEX_UPPER[] = "0123456789ABCDEF";
static const char HEX_LOWER[] = "0123456789abcdef";

/* A C-contiguous buffer of `itemsize`-byte items (writable when asked); 0, or -1 with the
 * error set and nothing held. */
static int get_buf(PyObject *o, Py_buffer *v, Py_ssize_t itemsize, int writable, const char *fn, const char *what)
{
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (v->itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %s must hold %zd-byte items, not %zd", fn, what, itemsize, v->itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static void release(Py_buffer *v, int held)
{
    for (int k = 0; k < held; k++)
        PyBuffer_Release(&v[k]);
}

/* Take args[0..k) into v as spec says; the count taken (k on success). */
static int take_all(PyObject **o, Py_buffer *v, int k, const Py_ssize_t *size, const int *wr, const char *fn,
                    const char *const *what)
{
    for (int i = 0; i < k; i++)
        if (get_buf(o[i], &v[i], size[i], wr[i], fn, what[i]) < 0)
            return i;
    return k;
}

static int64_t put_dec(uint8_t *out, int64_t o, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[o++] = '-';
    while (n)
        out[o++] = (uint8_t)tmp[--n];
    return o;
}

/* "[v6]" as ipaddress.IPv6Address(p).compressed writes it (RFC 5952): hextets in lower-case
 * hex without leading zeros, the first longest run of two or more zero hextets as "::". */
static int64_t put_v6(uint8_t *out, int64_t o, const uint8_t *p)
{
    int h[8], best = -1, best_len = 1, run = 0;
    for (int k = 0; k < 8; k++) {
        h[k] = p[2 * k] << 8 | p[2 * k + 1];
        run = h[k] ? 0 : run + 1;
        if (run > best_len)
            best_len = run, best = k - run + 1;
    }
    out[o++] = '[';
    for (int k = 0; k < 8; k++) {
        if (k == best) {
            out[o++] = ':';
            if (k == 0)
                out[o++] = ':';
            k += best_len - 1;
            continue;
        }
        int shift = 12;
        while (shift > 0 && !(h[k] >> shift))
            shift -= 4;
        for (; shift >= 0; shift -= 4)
            out[o++] = (uint8_t)HEX_LOWER[(h[k] >> shift) & 15];
        if (k < 7)
            out[o++] = ':';
    }
    out[o++] = ']';
    return o;
}

/* Python's ipaddress writes an IPv4-mapped IPv6 address (::ffff:0:0/96) in one form or
 * another by version: the caller takes the twin's table for such a block. */
static int v4_mapped(const uint8_t *p)
{
    static const uint8_t head[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    return memcmp(p, head, 12) == 0;
}

PyDoc_STRVAR(host_texts_doc,
"host_texts(a, at, size, port, out, offsets) -> int\n\n"
"The text ip:port of every record (a.b.c.d, or [v6] compressed; port in decimal) one after\n"
"another in out (uint8, at least 53 bytes a record), offsets (int32, n + 1) where each\n"
"starts and the last ends: address i is the size[i] (4 or 16) bytes at a[at[i]], port[i]\n"
"its port (at, size, port int64, n each). Returns the bytes written, or -1 (out and offsets\n"
"partly written) when an address is IPv4-mapped IPv6. ValueError on a size other than 4 or\n"
"16, an address outside a, or too small an out.");

static PyObject *k_host_texts(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[6];
    Py_buffer v[6];
    static const Py_ssize_t size[6] = {1, 8, 8, 8, 1, 4};
    static const int wr[6] = {0, 0, 0, 0, 1, 1};
    static const char *const what[6] = {"a", "at", "size", "port", "out", "offsets"};
    if (!PyArg_ParseTuple(args, "OOOOOO:host_texts", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5]))
        return NULL;
    int held = take_all(o, v, 6, size, wr, "host_texts", what);
    if (held < 6) {
        release(v, held);
        return NULL;
    }
    Py_ssize_t n = v[1].len / 8;
    if (v[2].len != v[1].len || v[3].len != v[1].len || v[5].len != (n + 1) * 4) {
        release(v, held);
        return PyErr_Format(PyExc_ValueError, "host_texts: at, size and port must be as long, offsets one more");
    }
    const uint8_t *a = v[0].buf;
    const int64_t *at = v[1].buf, *sz = v[2].buf, *port = v[3].buf;
    uint8_t *out = v[4].buf;
    int32_t *off = v[5].buf;
    int64_t alen = v[0].len, cap = v[4].len, o_ = 0, bad = -1;
    const char *why = NULL;
    Py_BEGIN_ALLOW_THREADS
    off[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((sz[i] != 4 && sz[i] != 16) || at[i] < 0 || at[i] > alen - sz[i]) {
            bad = i, why = "an address neither 4 nor 16 bytes, or outside a";
            break;
        }
        if (cap - o_ < HOST_MAX || o_ + HOST_MAX > INT32_MAX) {
            bad = i, why = "out is too small";
            break;
        }
        const uint8_t *p = a + at[i];
        if (sz[i] == 16) {
            if (v4_mapped(p)) {
                o_ = -1;
                break;
            }
            o_ = put_v6(out, o_, p);
        } else {
            for (int k = 0; k < 4; k++) {
                if (k)
                    out[o_++] = '.';
                o_ = put_dec(out, o_, p[k]);
            }
        }
        out[o_++] = ':';
        o_ = put_dec(out, o_, port[i]);
        off[i + 1] = (int32_t)o_;
    }
    Py_END_ALLOW_THREADS
    release(v, held);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError, "host_texts: record %zd: %s", (Py_ssize_t)bad, why);
    return PyLong_FromLongLong(o_);
}

PyDoc_STRVAR(hex_ranges_doc,
"hex_ranges(a, at, ln, out, offsets) -> int\n\n"
"Upper-case hex of byte ranges, k per value: value i is the hex digits of a[at[j]:at[j]+ln[j]]\n"
"for j = i*k .. i*k+k-1 one after another (at, ln int64, n*k each; k = len(at) / n, n =\n"
"len(offsets) - 1), written into out (uint8, at least 2 * sum(ln) bytes), offsets (int32)\n"
"where each starts and the last ends. Returns the bytes written. ValueError on a range\n"
"outside a or too small an out.");

static PyObject *k_hex_ranges(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[5];
    Py_buffer v[5];
    static const Py_ssize_t size[5] = {1, 8, 8, 1, 4};
    static const int wr[5] = {0, 0, 0, 1, 1};
    static const char *const what[5] = {"a", "at", "ln", "out", "offsets"};
    if (!PyArg_ParseTuple(args, "OOOOO:hex_ranges", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    int held = take_all(o, v, 5, size, wr, "hex_ranges", what);
    if (held < 5) {
        release(v, held);
        return NULL;
    }
    Py_ssize_t n = v[4].len / 4 - 1, m = v[1].len / 8;
    if (n < 0 || v[2].len != v[1].len || (n == 0 ? m != 0 : m % n != 0)) {
        release(v, held);
        return PyErr_Format(PyExc_ValueError, "hex_ranges: at and ln must be as long, k ranges for each value");
    }
    Py_ssize_t k = n ? m / n : 0;
    const uint8_t *a = v[0].buf;
    const int64_t *at = v[1].buf, *ln = v[2].buf;
    uint8_t *out = v[3].buf;
    int32_t *off = v[4].buf;
    int64_t alen = v[0].len, cap = v[3].len, o_ = 0, bad = -1;
    Py_BEGIN_ALLOW_THREADS
    off[0] = 0;
    for (Py_ssize_t i = 0; i < n && bad < 0; i++) {
        for (Py_ssize_t j = i * k; j < i * k + k; j++) {
            if (ln[j] < 0 || at[j] < 0 || at[j] > alen - ln[j] || ln[j] > (cap - o_) / 2 ||
                o_ + 2 * ln[j] > INT32_MAX) {
                bad = j;
                break;
            }
            const uint8_t *p = a + at[j];
            for (int64_t b = 0; b < ln[j]; b++) {
                out[o_++] = (uint8_t)HEX_UPPER[p[b] >> 4];
                out[o_++] = (uint8_t)HEX_UPPER[p[b] & 15];
            }
        }
        off[i + 1] = (int32_t)o_;
    }
    Py_END_ALLOW_THREADS
    release(v, held);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError, "hex_ranges: range %zd: outside a, or out is too small",
                            (Py_ssize_t)bad);
    return PyLong_FromLongLong(o_);
}

PyMethodDef arrow_methods[] = {
    {"host_texts", k_host_texts, METH_VARARGS, host_texts_doc},
    {"hex_ranges", k_hex_ranges, METH_VARARGS, hex_ranges_doc},
    {NULL, NULL, 0, NULL},
};
