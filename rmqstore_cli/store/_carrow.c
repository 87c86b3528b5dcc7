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
#include "_v6text.h"

/* "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:-2147483648" */
#define HOST_MAX (41 + 1 + 11)

static const char HEX_UPPER[] = "0123456789ABCDEF";

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

/* ------------------------------------------------------------------ PROPERTIES */

/* Python's strict UTF-8: no overlong form, no surrogate, nothing past U+10FFFF. */
static int utf8_valid(const uint8_t *p, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int k;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            k = 1;
        else if (c >= 0xE0 && c <= 0xEF)
            k = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4)
            k = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else
            return 0;
        if (n - i <= k || p[i + 1] < lo || p[i + 1] > hi)
            return 0;
        for (int j = 2; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return 0;
        i += k + 1;
    }
    return 1;
}

typedef struct {
    const uint8_t *a;
    int64_t alen, n, cap_p, cap_w, np_, nw;
    const int64_t *at, *ln;
    uint8_t *plain;
    int64_t *pairs, *words, *tags, *uniq, *prow, *wrow;
    const uint8_t *names[3];  /* TAGS, KEYS, UNIQ_KEY */
    Py_ssize_t name_len[3];
    uint8_t name_sep, pair_sep, key_sep;
} Split;

/* Record i's kept pairs (string2messageProperties: parts between pair separators, cut at the
 * first name separator, both sides non-empty) appended to prow; 0 when the record is not
 * plain (a NUL, not UTF-8, a name twice, more than PROPS_CAP pairs): nothing kept then. */
#define PROPS_CAP 256
static int keep_pair(Split *S, const uint8_t *p, int64_t base, int64_t first, int64_t s, int64_t k, int64_t end)
{
    if (k < 0 || k <= s || k >= end - 1)
        return 1;  /* no name or no value: dropped, as the broker's parser drops it */
    int64_t nl = k - s, *row = S->prow + 4 * S->np_;
    if (S->np_ - first >= PROPS_CAP || S->np_ >= S->cap_p)
        return 0;
    for (int64_t q = first; q < S->np_; q++)
        if (S->prow[4 * q + 1] == nl && S->a[S->prow[4 * q]] == p[s] && memcmp(S->a + S->prow[4 * q], p + s, (size_t)nl) == 0)
            return 0;
    row[0] = base + s, row[1] = nl, row[2] = base + k + 1, row[3] = end - k - 1;
    S->np_++;
    return 1;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* Whether the 8 bytes of x hold the byte b (b * ONES in bw). */
#define HAS(x, bw) ((((x) ^ (bw)) - ONES) & ~((x) ^ (bw)) & HIGHS)

/* One byte of a record's PROPERTIES at j that may matter: 0 when it makes the record not
 * plain (a NUL, a name kept twice, no room), else 1 (s, k: the part's start and first name
 * separator; wide: a non-ASCII byte seen). */
static inline int split_byte(Split *S, const uint8_t *p, int64_t base, int64_t first, int64_t j, int64_t *s,
                             int64_t *k, int *wide)
{
    uint8_t c = p[j];
    if (c == 0)
        return 0;
    if (c >= 0x80)
        *wide = 1;
    else if (c == S->pair_sep) {
        if (!keep_pair(S, p, base, first, *s, *k, j))
            return 0;
        *s = j + 1, *k = -1;
    } else if (c == S->name_sep && *k < 0)
        *k = j;
    return 1;
}

static int split_pairs(Split *S, const uint8_t *p, int64_t base, int64_t ln, int64_t *count)
{
    int64_t first = S->np_, s = 0, k = -1, j = 0;
    int wide = 0;
    const uint64_t nw = S->name_sep * ONES, pw = S->pair_sep * ONES;
    for (; j + 8 <= ln; j += 8) {  /* eight bytes at a time: only those that may be special one by one */
        uint64_t x;
        memcpy(&x, p + j, 8);
        uint64_t m = (x & HIGHS) | HAS(x, 0) | HAS(x, nw) | HAS(x, pw);  /* a superset of them */
        for (; m; m &= m - 1)
            if (!split_byte(S, p, base, first, j + (__builtin_ctzll(m) >> 3), &s, &k, &wide))
                return 0;
    }
    for (; j < ln; j++)
        if (!split_byte(S, p, base, first, j, &s, &k, &wide))
            return 0;
    if (!keep_pair(S, p, base, first, s, k, ln) || (wide && !utf8_valid(p, ln)))
        return 0;
    *count = S->np_ - first;
    return 1;
}

/* The pair named names[w] among record i's pairs (from prow[first]), or -1. */
static int64_t find_pair(const Split *S, int64_t first, int64_t count, int w)
{
    const uint8_t *name = S->names[w];
    int64_t len = S->name_len[w];
    for (int64_t q = first; q < first + count; q++) {
        const uint8_t *at = S->a + S->prow[4 * q];
        if (S->prow[4 * q + 1] == len && (len == 0 || at[0] == name[0]) && memcmp(at, name, (size_t)len) == 0)
            return q;
    }
    return -1;
}

/* Record i's KEYS words (the value at, vl, cut at the key separator, empty words dropped)
 * appended to wrow; 0 when wrow is full. */
static int split_words(Split *S, int64_t at, int64_t vl)
{
    const uint8_t *v = S->a + at;
    int64_t w = 0;
    while (w < vl) {
        const uint8_t *sp = memchr(v + w, S->key_sep, (size_t)(vl - w));
        int64_t e = sp ? sp - v : vl;
        if (e > w) {
            if (S->nw >= S->cap_w)
                return 0;
            S->wrow[2 * S->nw] = at + w, S->wrow[2 * S->nw + 1] = e - w;
            S->nw++;
        }
        w = e + 1;
    }
    return 1;
}

/* Record i: plain[i] kept only when its pairs are (and prow and wrow have room: else it is
 * left out, rows rolled back); its pairs, TAGS, UNIQ_KEY and KEYS words. */
static void split_one(Split *S, int64_t i)
{
    int64_t first = S->np_, count = 0, firstw = S->nw;
    S->tags[2 * i] = S->uniq[2 * i] = -1, S->tags[2 * i + 1] = S->uniq[2 * i + 1] = 0;
    S->pairs[i] = S->words[i] = 0;
    if (!S->plain[i])
        return;
    int ok = split_pairs(S, S->a + S->at[i], S->at[i], S->ln[i], &count);
    int64_t q = ok ? find_pair(S, first, count, 1) : -1;
    if (ok && q >= 0)
        ok = split_words(S, S->prow[4 * q + 2], S->prow[4 * q + 3]);
    if (!ok) {
        S->np_ = first, S->nw = firstw, S->plain[i] = 0;
        return;
    }
    S->pairs[i] = count, S->words[i] = S->nw - firstw;
    q = find_pair(S, first, count, 0);
    if (q >= 0)
        S->tags[2 * i] = S->prow[4 * q + 2], S->tags[2 * i + 1] = S->prow[4 * q + 3];
    q = find_pair(S, first, count, 2);
    if (q >= 0)
        S->uniq[2 * i] = S->prow[4 * q + 2], S->uniq[2 * i + 1] = S->prow[4 * q + 3];
}

PyDoc_STRVAR(prop_split_doc,
"prop_split(a, at, ln, seps, names, plain, pairs, words, tags, uniq, prow, wrow) -> (P, W)\n\n"
"The PROPERTIES of n records (the ln[i] bytes at a[at[i]], int64) cut as\n"
"MessageDecoder#string2messageProperties cuts them, for the records whose plain[i] (uint8, in\n"
"and out) is set and stays set: no NUL, valid UTF-8, no name twice, at most 256 pairs. seps:\n"
"the name, pair and KEYS separator bytes; names: (TAGS, KEYS, UNIQ_KEY). Out (int64): pairs[i]\n"
"and words[i] the counts of record i's pairs (rows of prow: name at, name length, value at,\n"
"value length) and KEYS words (rows of wrow: at, length; empty words dropped); tags[i] and\n"
"uniq[i] (at, length) of those values, (-1, 0) for none. A record left out (or one whose rows\n"
"do not fit in prow or wrow) gets no rows. Returns the rows written. ValueError on a range\n"
"outside a.");

static PyObject *k_prop_split(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[12];
    Py_buffer v[12];
    static const Py_ssize_t size[12] = {1, 8, 8, 1, 0, 1, 8, 8, 8, 8, 8, 8};
    static const int wr[12] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1};
    static const char *const what[12] = {"a", "at", "ln", "seps", "names", "plain", "pairs", "words",
                                         "tags", "uniq", "prow", "wrow"};
    if (!PyArg_ParseTuple(args, "OOOOO!OOOOOOO:prop_split", &o[0], &o[1], &o[2], &o[3], &PyTuple_Type, &o[4], &o[5],
                          &o[6], &o[7], &o[8], &o[9], &o[10], &o[11]))
        return NULL;
    if (PyTuple_GET_SIZE(o[4]) != 3)
        return PyErr_Format(PyExc_ValueError, "prop_split: names must be (TAGS, KEYS, UNIQ_KEY)");
    Split S;
    memset(&S, 0, sizeof S);
    for (int w = 0; w < 3; w++) {
        PyObject *b = PyTuple_GET_ITEM(o[4], w);
        if (!PyBytes_Check(b))
            return PyErr_Format(PyExc_TypeError, "prop_split: names must be bytes");
        S.names[w] = (const uint8_t *)PyBytes_AS_STRING(b), S.name_len[w] = PyBytes_GET_SIZE(b);
    }
    int held = 0;
    for (int k = 0; k < 12; k++) {
        if (k == 4)
            continue;
        if (get_buf(o[k], &v[held], size[k], wr[k], "prop_split", what[k]) < 0) {
            release(v, held);
            return NULL;
        }
        held++;
    }
    /* v: a at ln seps plain pairs words tags uniq prow wrow */
    Py_ssize_t n = v[1].len / 8;
    if (v[2].len != v[1].len || v[3].len != 3 || v[4].len != n || v[5].len != n * 8 || v[6].len != n * 8 ||
        v[7].len != n * 16 || v[8].len != n * 16 || v[9].len % 32 || v[10].len % 16) {
        release(v, held);
        return PyErr_Format(PyExc_ValueError, "prop_split: at, ln, plain, pairs, words (n), tags and uniq (n, 2), "
                                              "prow (k, 4), wrow (k, 2) and three separators");
    }
    const uint8_t *seps = v[3].buf;
    S.a = v[0].buf, S.alen = v[0].len, S.n = n, S.at = v[1].buf, S.ln = v[2].buf;
    S.name_sep = seps[0], S.pair_sep = seps[1], S.key_sep = seps[2];
    S.plain = v[4].buf, S.pairs = v[5].buf, S.words = v[6].buf, S.tags = v[7].buf, S.uniq = v[8].buf;
    S.prow = v[9].buf, S.cap_p = v[9].len / 32, S.wrow = v[10].buf, S.cap_w = v[10].len / 16;
    int64_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (S.ln[i] < 0 || S.at[i] < 0 || S.at[i] > S.alen - S.ln[i]) {
            bad = i;
            break;
        }
        split_one(&S, i);
    }
    Py_END_ALLOW_THREADS
    release(v, held);
    if (bad >= 0)
        return PyErr_Format(PyExc_ValueError, "prop_split: record %zd: PROPERTIES outside a", (Py_ssize_t)bad);
    return Py_BuildValue("(LL)", (long long)S.np_, (long long)S.nw);
}

PyMethodDef arrow_methods[] = {
    {"host_texts", k_host_texts, METH_VARARGS, host_texts_doc},
    {"hex_ranges", k_hex_ranges, METH_VARARGS, hex_ranges_doc},
    {"prop_split", k_prop_split, METH_VARARGS, prop_split_doc},
    {NULL, NULL, 0, NULL},
};
