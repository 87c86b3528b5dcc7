/* The engine's compiled loops (rmqstore_cli/store/kernels.py): the commit-log record walk
 * (plain and DLedger), CRC-32 of bodies (by _ccrc.c), a join of byte ranges, the TAGS hash and the
 * index keys of a batch's PROPERTIES; and (_cdump.c) generate --from-jsonl's reader of dump lines.
 *
 * An optional extension (setup.py): when it does not build, kernels.py says so and every
 * caller runs its reference loop (Python/numpy), which gives the same results to the bit;
 * the tests compare the two on fixtures and hostile input.
 *
 * Plain C API and the buffer protocol: numpy arrays, mmaps and bytes are passed as buffers
 * (uint8 for the file's bytes, int64 for positions, lengths and results). Every argument is
 * checked (item sizes, lengths, bounds of every range read or written): a wrong call raises
 * TypeError/ValueError/BufferError, it never reads or writes outside a buffer. The loops run
 * without the GIL (Spark tasks and threads may call them at once).
 *
 * The layout constants are exported (LAYOUT) and kernels.py checks them against formats/
 * (formats/commitlog.py HEAD, formats/sysflag.py, formats/dledger.py, formats/properties.py and
 * store/message.py's property names) before using the module.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_carrow.h"
#include "_ccrc.h"
#include "_cdump.h"
#include "_cencode.h"

/* MessageDecoder: TOTALSIZE at 0, MAGICCODE at 4 (both big-endian int32) */
#define TOTAL_AT 0
#define MAGIC_AT 4
#define PREFIX_SIZE 8
#define MAGIC_V1 0xDAA320A7u /* MessageDecoder.MESSAGE_MAGIC_CODE */
#define MAGIC_V2 0xDAA320ABu /* MessageDecoder.MESSAGE_MAGIC_CODE_V2 */
/* DLedgerEntry header: magic (1) at 0, entry size at 4 */
#define ENTRY_MAGIC 1
#define ENTRY_MAGIC_AT 0
#define ENTRY_SIZE_AT 4

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* ------------------------------------------------------------------ argument checks */

/* Whether a buffer's struct format is one of the single characters in `codes` (native or
 * little-endian order on a little-endian host; a NULL format means unsigned bytes). */
static int format_is(const Py_buffer *v, const char *codes)
{
    const char *f = v->format;
    if (f == NULL)
        return strchr(codes, 'B') != NULL;
    if (*f == '@' || *f == '=')
        f++;
#if PY_LITTLE_ENDIAN
    else if (*f == '<')
        f++;
#endif
    return f[0] != '\0' && f[1] == '\0' && strchr(codes, f[0]) != NULL;
}

/* A contiguous buffer of `itemsize`-byte items of one of `codes`; writable when asked. */
static int get_buffer(PyObject *o, Py_buffer *v, int writable, Py_ssize_t itemsize, const char *codes,
                      const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(o, v, flags) < 0)
        return -1;
    if (v->itemsize != itemsize || !format_is(v, codes) || v->len % itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected a contiguous buffer of %s (item size %zd), got format '%s' "
                     "item size %zd", name, itemsize == 1 ? "uint8" : "int64", itemsize,
                     v->format ? v->format : "B", v->itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

#define GET_BYTES(o, v, name) get_buffer((o), (v), 0, 1, "Bbc", (name))
#define GET_I64(o, v, w, name) get_buffer((o), (v), (w), 8, sizeof(long) == 8 ? "lq" : "q", (name))

/* ------------------------------------------------------------------ the record walk */

/* how far ahead of the walk its bytes are fetched: a few records of a few hundred bytes
 * (4 KiB was no better) */
#define PREFETCH_AHEAD 2048

/* The walk of docs/format/commitlog.md#reading-a-commit-log-file (CommitLog#checkMessageAndReturnSize's first checks), plain
 * (header < 0) or over DLedger entries (DLedgerMmapFileStore#recover: header >= 0 bytes of
 * entry header before each record). Callers checked 0 <= pos, 0 <= limit <= len(a),
 * 0 <= max_n <= len(out), min_total >= 1: every read is below `limit`, `end` only grows. */
static Py_ssize_t walk_loop(const uint8_t *a, int64_t pos, int64_t limit, int64_t max_n, int64_t min_total,
                            int64_t header, int64_t *out, int64_t *end_out)
{
    int64_t n = 0, end = pos, ahead = pos;  /* the bytes up to ahead were asked for */
    while (n < max_n && end <= limit) {
        int64_t r = end;
        if (header >= 0) {
            if (header > limit - end)
                break;
            r = end + header;
        }
        if (limit - r < PREFIX_SIZE)
            break;
        if (header >= 0 && be32(a + end + ENTRY_MAGIC_AT) != ENTRY_MAGIC)
            break;
        int64_t total = (int32_t)be32(a + r + TOTAL_AT);
        uint32_t magic = be32(a + r + MAGIC_AT);
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < min_total || total > limit - r)
            break;
        if (header >= 0 && (int64_t)be32(a + end + ENTRY_SIZE_AT) != total + header)
            break;
        out[n++] = r;
        end = r + total;
        /* the walk reads one header per record, each a cache miss the hardware cannot guess
         * (the next place depends on this TOTALSIZE): every line up to PREFETCH_AHEAD bytes
         * past this record is asked for now, once, inside the buffer (a hint: never a fault;
         * the walk of a 1M-record log took a third of the time, measured); not the lines of
         * a long record's body, which the walk does not read (16 KiB bodies: each line was
         * fetched twice, by these hints and again by the CRC once the batch's tens of MiB had left
         * the cache) */
        if (ahead < end)
            ahead = end;
        for (; ahead < end + PREFETCH_AHEAD && ahead < limit; ahead += 64)
            __builtin_prefetch(a + ahead);
    }
    *end_out = end;
    return (Py_ssize_t)n;
}

static PyObject *walk_common(PyObject *ao, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t max_n,
                             Py_ssize_t min_total, Py_ssize_t header, PyObject *oo)
{
    Py_buffer a, out;
    int64_t end;
    Py_ssize_t n;
    if (GET_BYTES(ao, &a, "a") < 0)
        return NULL;
    if (GET_I64(oo, &out, 1, "out") < 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (pos < 0 || limit < 0 || limit > a.len || max_n < 0 || max_n > out.len / 8 || min_total < 1) {
        PyErr_Format(PyExc_ValueError, "walk: need 0 <= pos, 0 <= limit <= len(a) (%zd), "
                     "0 <= max_n <= len(out) (%zd), min_total >= 1; got pos=%zd limit=%zd max_n=%zd "
                     "min_total=%zd", a.len, out.len / 8, pos, limit, max_n, min_total);
        PyBuffer_Release(&a);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    n = walk_loop((const uint8_t *)a.buf, pos, limit, max_n, min_total, header, (int64_t *)out.buf, &end);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&a);
    PyBuffer_Release(&out);
    return Py_BuildValue("nL", n, (long long)end);
}

PyDoc_STRVAR(walk_doc,
"walk(a, pos, limit, max_n, min_total, out) -> (n, end)\n\n"
"Record starts from pos into out (int64): a record starts where MAGICCODE is V1 or V2 and\n"
"min_total <= TOTALSIZE <= limit - start; the next one TOTALSIZE bytes later. At most max_n;\n"
"end is where the walk stopped.");

static PyObject *k_walk(PyObject *self, PyObject *args)
{
    PyObject *ao, *oo;
    Py_ssize_t pos, limit, max_n, min_total;
    if (!PyArg_ParseTuple(args, "OnnnnO:walk", &ao, &pos, &limit, &max_n, &min_total, &oo))
        return NULL;
    return walk_common(ao, pos, limit, max_n, min_total, -1, oo);
}

PyDoc_STRVAR(walk_entries_doc,
"walk_entries(a, pos, limit, max_n, min_total, header, out) -> (n, end)\n\n"
"walk over DLedger entries: at end an entry header of `header` bytes (magic 1, size =\n"
"its record's TOTALSIZE + header), its record right after it; out gets record starts,\n"
"end stays on entry starts.");

static PyObject *k_walk_entries(PyObject *self, PyObject *args)
{
    PyObject *ao, *oo;
    Py_ssize_t pos, limit, max_n, min_total, header;
    if (!PyArg_ParseTuple(args, "OnnnnnO:walk_entries", &ao, &pos, &limit, &max_n, &min_total, &header, &oo))
        return NULL;
    if (header < 0) {
        PyErr_SetString(PyExc_ValueError, "walk_entries: header must be >= 0");
        return NULL;
    }
    return walk_common(ao, pos, limit, max_n, min_total, header, oo);
}

/* ------------------------------------------------------------------ ranges: CRC, join */

/* The buffers of (a, at, ln, out): at and ln the same length, out at least as long (items). */
typedef struct {
    Py_buffer a, at, ln, out;
    Py_ssize_t n;
} Ranges;

static int ranges_get(Ranges *r, PyObject *ao, PyObject *ato, PyObject *lno, PyObject *oo, Py_ssize_t outsize,
                      const char *name)
{
    if (GET_BYTES(ao, &r->a, "a") < 0)
        return -1;
    if (GET_I64(ato, &r->at, 0, "at") < 0)
        goto fail_a;
    if (GET_I64(lno, &r->ln, 0, "ln") < 0)
        goto fail_at;
    if (get_buffer(oo, &r->out, 1, outsize, outsize == 1 ? "Bbc" : (sizeof(long) == 8 ? "lq" : "q"), "out") < 0)
        goto fail_ln;
    r->n = r->at.len / 8;
    if (r->ln.len != r->at.len) {
        PyErr_Format(PyExc_ValueError, "%s: at and ln differ in length (%zd, %zd)", name, r->n, r->ln.len / 8);
        goto fail;
    }
    return 0;
fail:
    PyBuffer_Release(&r->out);
fail_ln:
    PyBuffer_Release(&r->ln);
fail_at:
    PyBuffer_Release(&r->at);
fail_a:
    PyBuffer_Release(&r->a);
    return -1;
}

static void ranges_release(Ranges *r)
{
    PyBuffer_Release(&r->a);
    PyBuffer_Release(&r->at);
    PyBuffer_Release(&r->ln);
    PyBuffer_Release(&r->out);
}

/* Whether [p, p + n) lies in a buffer of `len` bytes. */
static inline int range_ok(int64_t p, int64_t n, int64_t len)
{
    return p >= 0 && n >= 0 && p <= len && n <= len - p;
}

static PyObject *range_error(const char *name, Py_ssize_t i, int64_t p, int64_t n, Py_ssize_t len)
{
    PyErr_Format(PyExc_ValueError, "%s: range %zd (at %lld, length %lld) is outside a buffer of %zd bytes",
                 name, i, (long long)p, (long long)n, len);
    return NULL;
}

PyDoc_STRVAR(small_body_crcs_doc,
"small_body_crcs(a, at, ln, small, out) -> big\n\n"
"crc32(a[at[i]:at[i]+ln[i]]) & 0x7FFFFFFF into out[i] (int64) for the ranges shorter than\n"
"small; returns how many were not (left for zlib; their out[i] is not written).");

static PyObject *k_small_body_crcs(PyObject *self, PyObject *args)
{
    PyObject *ao, *ato, *lno, *oo;
    Py_ssize_t small, big = 0, bad = -1;
    Ranges r;
    if (!PyArg_ParseTuple(args, "OOOnO:small_body_crcs", &ao, &ato, &lno, &small, &oo))
        return NULL;
    if (ranges_get(&r, ao, ato, lno, oo, 8, "small_body_crcs") < 0)
        return NULL;
    if (r.out.len / 8 < r.n) {
        ranges_release(&r);
        return PyErr_Format(PyExc_ValueError, "small_body_crcs: out holds %zd items, need %zd", r.out.len / 8, r.n);
    }
    const uint8_t *a = r.a.buf;
    const int64_t *at = r.at.buf, *ln = r.ln.buf;
    int64_t *out = r.out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < r.n; i++) {
        if (ln[i] >= small) {
            big++;
        } else if (!range_ok(at[i], ln[i], r.a.len)) {
            bad = i;
            break;
        } else {
            out[i] = (int64_t)(rmq_crc32(a + at[i], ln[i]) & 0x7FFFFFFFu);
        }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        range_error("small_body_crcs", bad, at[bad], ln[bad], r.a.len);
        ranges_release(&r);
        return NULL;
    }
    ranges_release(&r);
    return PyLong_FromSsize_t(big);
}

PyDoc_STRVAR(join_ranges_doc,
"join_ranges(a, at, ln, out) -> n\n\n"
"out (uint8) = the bytes a[at[i]:at[i]+ln[i]] one after another; returns how many bytes.");

static PyObject *k_join_ranges(PyObject *self, PyObject *args)
{
    PyObject *ao, *ato, *lno, *oo;
    Py_ssize_t bad = -1;
    int64_t o = 0;
    Ranges r;
    if (!PyArg_ParseTuple(args, "OOOO:join_ranges", &ao, &ato, &lno, &oo))
        return NULL;
    if (ranges_get(&r, ao, ato, lno, oo, 1, "join_ranges") < 0)
        return NULL;
    const uint8_t *a = r.a.buf;
    const int64_t *at = r.at.buf, *ln = r.ln.buf;
    uint8_t *out = r.out.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < r.n; i++) {
        if (!range_ok(at[i], ln[i], r.a.len) || ln[i] > r.out.len - o) {
            bad = i;
            break;
        }
        memcpy(out + o, a + at[i], (size_t)ln[i]);
        o += ln[i];
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        if (range_ok(at[bad], ln[bad], r.a.len))
            PyErr_Format(PyExc_ValueError, "join_ranges: out (%zd bytes) is too short for range %zd", r.out.len, bad);
        else
            range_error("join_ranges", bad, at[bad], ln[bad], r.a.len);
        ranges_release(&r);
        return NULL;
    }
    ranges_release(&r);
    return PyLong_FromLongLong((long long)o);
}

/* ------------------------------------------------------------------ PROPERTIES: TAGS and index keys */

/* MessageDecoder#string2messageProperties' separators, MessageConst's names and KEY_SEPARATOR */
#define NAME_SEP 1
#define PAIR_SEP 2
#define KEY_SEP ' '
#define TAGS_NAME "TAGS\001"
#define KEYS_NAME "KEYS\001"
#define UNIQ_NAME "UNIQ_KEY\001"
/* a row of keys_out: owner, start, end, index hash, flags */
#define KEY_COLS 5
#define KEY_WORD 1 /* flags: a word of KEYS (else the UNIQ_KEY) */
#define KEY_WIDE 2 /* flags: malformed UTF-8 inside (the decoder's replacements: the caller redoes it) */
/* tags_out of a TAGS value of malformed UTF-8: outside int32, the caller redoes it */
#define TAGS_WIDE ((int64_t)1 << 40)

/* The value range [*va, *vb) of a pair [s, e) called `name` (its bytes start with name\x01 and
 * the value is not empty: MessageDecoder#string2messageProperties drops empty values). */
static inline void take_value(const uint8_t *a, int64_t s, int64_t e, const char *name, int64_t L,
                              int64_t *va, int64_t *vb)
{
    if (e - s > L && memcmp(a + s, name, (size_t)L) == 0) {
        *va = s + L;
        *vb = e;
    }
}

/* String#hashCode continued from h over the UTF-16 code units of the UTF-8 text [x, y), as
 * new String(bytes, UTF_8) decodes well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF, no cut characters; what Python's strict decoder takes).
 * *bad set on malformed text: the decoder's replacement rules are the caller's (reference). */
static uint32_t hash_on(const uint8_t *a, int64_t x, int64_t y, uint32_t h, int *bad)
{
    int64_t i = x;
    while (i < y) {
        uint32_t c = a[i];
        if (c < 0x80) {
            h = h * 31u + c;
            i++;
            continue;
        }
        int need;
        uint32_t lo = 0x80, hi = 0xBF;
        if (c < 0xC2 || c > 0xF4) {
            *bad = 1;
            return h;
        } else if (c < 0xE0) {
            need = 1, c &= 0x1F;
        } else if (c < 0xF0) {
            need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF, c &= 0x0F;
        } else {
            need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF, c &= 0x07;
        }
        if (y - i - 1 < need || a[i + 1] < lo || a[i + 1] > hi) {
            *bad = 1;
            return h;
        }
        for (int k = 1; k <= need; k++) {
            if ((a[i + k] & 0xC0) != 0x80) {
                *bad = 1;
                return h;
            }
            c = (c << 6) | (a[i + k] & 0x3Fu);
        }
        i += need + 1;
        if (c >= 0x10000) { /* a surrogate pair */
            c -= 0x10000;
            h = h * 31u + (0xD800u + (c >> 10));
            h = h * 31u + (0xDC00u + (c & 0x3FFu));
        } else {
            h = h * 31u + c;
        }
    }
    return h;
}

/* IndexFile#indexKeyHashMethod: abs of the int hashCode, Integer.MIN_VALUE -> 0 */
static inline int64_t index_hash_of(uint32_t h)
{
    int32_t s = (int32_t)h;
    return s == INT32_MIN ? 0 : (s < 0 ? -(int64_t)s : (int64_t)s);
}

/* One key row (written only while below cap; counted always). */
static inline void put_key(int64_t *out, int64_t cap, int64_t *k, int64_t owner, int64_t x, int64_t y,
                           uint32_t prefix, int64_t flags, const uint8_t *a)
{
    int bad = 0;
    uint32_t h = hash_on(a, x, y, prefix, &bad);
    if (*k < cap) {
        int64_t *row = out + *k * KEY_COLS;
        row[0] = owner;
        row[1] = x;
        row[2] = y;
        row[3] = index_hash_of(h);
        row[4] = flags | (bad ? KEY_WIDE : 0);
    }
    (*k)++;
}

typedef struct {
    const uint8_t *a, *indexable;
    const int64_t *moff, *pl, *tid, *prefix;
    int64_t n, len, nprefix, cap;
    int64_t *tags, *keys;
    int64_t bad, why; /* the message a bad argument was met at, and which (1 range, 2 topic id) */
} PropKeys;

/* Message m's tagsCode (TAGS value [ta, tb), none when ta < 0) and, when indexable, its keys
 * (IndexService#buildIndex: the UNIQ_KEY [ua, ub), then each non-empty word of KEYS [ka, kb)
 * split at spaces); 0, or 2 when its topic id has no prefix. */
static int emit_keys(PropKeys *c, int64_t m, int64_t ta, int64_t tb, int64_t ua, int64_t ub, int64_t ka,
                     int64_t kb, int64_t *k)
{
    const uint8_t *a = c->a;
    int bad = 0;
    c->tags[m] = 0;
    if (ta >= 0) {
        uint32_t h = hash_on(a, ta, tb, 0, &bad);
        c->tags[m] = bad ? TAGS_WIDE : (int64_t)(int32_t)h;
    }
    if (!c->indexable[m] || (ua < 0 && ka < 0))
        return 0;
    int64_t t = c->tid[m];
    if (t < 0 || t >= c->nprefix)
        return 2;
    uint32_t pfx = (uint32_t)c->prefix[t];
    if (ua >= 0)
        put_key(c->keys, c->cap, k, m, ua, ub, pfx, 0, a);
    for (int64_t w = ka; ka >= 0 && w < kb;) {
        const uint8_t *q = memchr(a + w, KEY_SEP, (size_t)(kb - w));
        int64_t e = q ? (int64_t)(q - a) : kb;
        if (e > w)
            put_key(c->keys, c->cap, k, m, w, e, pfx, KEY_WORD, a);
        w = e + 1;
    }
    return 0;
}

/* TAGS, UNIQ_KEY and KEYS of one message (the last non-empty pair of each name), its tagsCode
 * and its keys (IndexService#buildIndex: the UNIQ_KEY, then each non-empty word of KEYS). */
static int prop_keys_one(PropKeys *c, int64_t m, int64_t *k)
{
    const uint8_t *a = c->a;
    int64_t s = c->moff[m], end = s + c->pl[m];
    int64_t ta = -1, tb = -1, ua = -1, ub = -1, ka = -1, kb = -1;
    while (s < end) {
        const uint8_t *q = memchr(a + s, PAIR_SEP, (size_t)(end - s));
        int64_t e = q ? (int64_t)(q - a) : end;
        switch (a[s]) {
        case 'T': take_value(a, s, e, TAGS_NAME, 5, &ta, &tb); break;
        case 'K': take_value(a, s, e, KEYS_NAME, 5, &ka, &kb); break;
        case 'U': take_value(a, s, e, UNIQ_NAME, 9, &ua, &ub); break;
        default: break;
        }
        s = e + 1;
    }
    return emit_keys(c, m, ta, tb, ua, ub, ka, kb, k);
}

static int64_t prop_keys_loop(PropKeys *c)
{
    int64_t k = 0;
    for (int64_t m = 0; m < c->n; m++) {
        if (!range_ok(c->moff[m], c->pl[m], c->len)) {
            c->bad = m, c->why = 1;
            break;
        }
        int why = prop_keys_one(c, m, &k);
        if (why) {
            c->bad = m, c->why = why;
            break;
        }
    }
    return k;
}

/* The loop's answer: how many keys, or the error it stopped at (a range outside a, a topic id). */
static PyObject *keys_result(const char *name, const PropKeys *c, int64_t k, Py_ssize_t len)
{
    if (c->why == 1)
        return range_error(name, (Py_ssize_t)c->bad, c->moff[c->bad], c->pl[c->bad], len);
    if (c->why == 2)
        return PyErr_Format(PyExc_ValueError, "%s: message %lld has topic id %lld, outside the %lld prefixes", name,
                            (long long)c->bad, (long long)c->tid[c->bad], (long long)c->nprefix);
    return PyLong_FromLongLong((long long)k);
}

PyDoc_STRVAR(prop_keys_doc,
"prop_keys(a, moff, pl, indexable, tid, prefix, tags_out, keys_out) -> n_keys\n\n"
"For each message m, its PROPERTIES a[moff[m]:moff[m]+pl[m]] (pairs split at \\x02, the\n"
"last non-empty value of a name wins): tags_out[m] = hashCode(TAGS) as a Java int (0 without\n"
"one; 1 << 40 when it is malformed UTF-8); when indexable[m] (uint8/bool), its index keys\n"
"into keys_out (int64 rows of 5: message, start, end, indexKeyHashMethod of prefix[tid[m]]\n"
"continued over the key's UTF-16 units, flags: 1 a KEYS word, 2 malformed UTF-8), the UNIQ_KEY\n"
"then each non-empty word of KEYS split at spaces. Returns how many keys there are; only\n"
"the rows that fit in keys_out are written (call again with a larger one).");

static PyObject *k_prop_keys(PyObject *self, PyObject *args)
{
    PyObject *ao, *mo, *po, *io, *to, *fo, *go, *ko;
    Py_buffer b[8];
    int got = 0;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "OOOOOOOO:prop_keys", &ao, &mo, &po, &io, &to, &fo, &go, &ko))
        return NULL;
    if (GET_BYTES(ao, &b[0], "a") < 0 || (got++, GET_I64(mo, &b[1], 0, "moff") < 0) ||
        (got++, GET_I64(po, &b[2], 0, "pl") < 0) || (got++, get_buffer(io, &b[3], 0, 1, "Bb?", "indexable") < 0) ||
        (got++, GET_I64(to, &b[4], 0, "tid") < 0) || (got++, GET_I64(fo, &b[5], 0, "prefix") < 0) ||
        (got++, GET_I64(go, &b[6], 1, "tags_out") < 0) || (got++, GET_I64(ko, &b[7], 1, "keys_out") < 0))
        goto done;
    got++;
    PropKeys c = {b[0].buf, b[3].buf, b[1].buf, b[2].buf, b[4].buf, b[5].buf, b[1].len / 8, b[0].len,
                  b[5].len / 8, b[7].len / 8 / KEY_COLS, b[6].buf, b[7].buf, -1, 0};
    if (b[2].len / 8 != c.n || b[3].len != c.n || b[4].len / 8 != c.n || b[6].len / 8 != c.n) {
        PyErr_Format(PyExc_ValueError, "prop_keys: moff, pl, indexable, tid and tags_out differ in length "
                     "(%zd, %zd, %zd, %zd, %zd)", b[1].len / 8, b[2].len / 8, b[3].len, b[4].len / 8, b[6].len / 8);
        goto done;
    }
    int64_t k;
    Py_BEGIN_ALLOW_THREADS
    k = prop_keys_loop(&c);
    Py_END_ALLOW_THREADS
    res = keys_result("prop_keys", &c, k, b[0].len);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return res;
}

/* ------------------------------------------------------------------ PROPERTIES: the pair scan */

/* the lists: positions of \x01, spaces, bytes >= 0x80; then per pair its start, message,
 * end and first \x01 at or after its start (their count is cnt[SCAN_PAIRS]) */
enum { SCAN_ONES, SCAN_SPACES, SCAN_HIGH, SCAN_PAIRS, SCAN_OWNERS, SCAN_ENDS, SCAN_FIRST1, SCAN_LISTS };

typedef struct {
    const uint8_t *a;
    const int64_t *moff, *pl;
    int64_t n, len, none;
    int64_t *list[SCAN_LISTS];
    int64_t cap[SCAN_LISTS], cnt[SCAN_LISTS];
    int64_t pend, bad; /* the first pair still without its first \x01; a message out of range */
} Scan;

static inline void scan_put(Scan *c, int which, int64_t pos)
{
    if (c->cnt[which] < c->cap[which])
        c->list[which][c->cnt[which]] = pos;
    c->cnt[which]++;
}

static inline void pair_open(Scan *c, int64_t start, int64_t owner)
{
    int64_t j = c->cnt[SCAN_PAIRS]++;
    if (j < c->cap[SCAN_PAIRS])
        c->list[SCAN_PAIRS][j] = start, c->list[SCAN_OWNERS][j] = owner;
}

static inline void pair_close(Scan *c, int64_t end)
{
    int64_t j = c->cnt[SCAN_PAIRS] - 1;
    if (j < c->cap[SCAN_PAIRS])
        c->list[SCAN_ENDS][j] = end;
}

/* Every pair opened since the last \x01 gets this one as its first. */
static inline void pairs_first1(Scan *c, int64_t at)
{
    for (int64_t j = c->pend; j < c->cnt[SCAN_PAIRS] && j < c->cap[SCAN_PAIRS]; j++)
        c->list[SCAN_FIRST1][j] = at;
    c->pend = c->cnt[SCAN_PAIRS];
}

/* What one byte of a message [., e) at q means: a \x01, a \x02 (a pair ends, one starts
 * unless it is the last byte), a space, a byte >= 0x80; the rest nothing. */
static inline void scan_byte(Scan *c, int64_t m, int64_t q, int64_t e)
{
    uint8_t b = c->a[q];
    if (b == NAME_SEP) {
        scan_put(c, SCAN_ONES, q);
        pairs_first1(c, q);
    } else if (b == PAIR_SEP) {
        pair_close(c, q);
        if (q + 1 < e)
            pair_open(c, q + 1, m);
    } else if (b == KEY_SEP) {
        scan_put(c, SCAN_SPACES, q);
    } else if (b >= 0x80) {
        scan_put(c, SCAN_HIGH, q);
    }
}

#define ONES8 0x0101010101010101ull
#define HIGH8 0x8080808080808080ull

/* The high bit of each of 8 bytes (little-endian word) that matters: >= 0x80, a space, below
 * 3. Exact, per byte (no carry crosses a byte: each sum stays below 0x100). */
static inline uint64_t word_special(uint64_t w)
{
    uint64_t low7 = ~HIGH8;
    uint64_t below3 = ~((w & low7) + ONES8 * (0x80 - (PAIR_SEP + 1))) & ~w;
    uint64_t x = w ^ (ONES8 * KEY_SEP);
    uint64_t space = ~(((x & low7) + low7) | x);
    return (w | below3 | space) & HIGH8;
}

/* One message's bytes [s, e): its pairs (split at \x02, none after a final one) and the
 * positions of \x01, spaces and bytes >= 0x80; eight bytes at a time, visiting only those. */
static void scan_message(Scan *c, int64_t m, int64_t s, int64_t e)
{
    const uint8_t *a = c->a;
    int64_t q = s;
    pair_open(c, s, m);
    while (e - q >= 8) {
        uint64_t w;
        memcpy(&w, a + q, 8);
#if !PY_LITTLE_ENDIAN
        w = __builtin_bswap64(w); /* byte k of the message at bits 8k.. */
#endif
        for (uint64_t bits = word_special(w); bits; bits &= bits - 1)
            scan_byte(c, m, q + (__builtin_ctzll(bits) >> 3), e);
        q += 8;
    }
    for (; q < e; q++)
        scan_byte(c, m, q, e);
    if (a[e - 1] != PAIR_SEP)
        pair_close(c, e);
}

static void scan_loop(Scan *c)
{
    for (int64_t m = 0; m < c->n; m++) {
        if (!range_ok(c->moff[m], c->pl[m], c->len)) {
            c->bad = m;
            return;
        }
        if (c->pl[m])
            scan_message(c, m, c->moff[m], c->moff[m] + c->pl[m]);
    }
    /* the pairs left without a \x01 after them: `none` */
    for (int64_t j = c->pend; j < c->cnt[SCAN_PAIRS] && j < c->cap[SCAN_PAIRS]; j++)
        c->list[SCAN_FIRST1][j] = c->none;
}

PyDoc_STRVAR(prop_scan_doc,
"prop_scan(a, moff, pl, none, ones, spaces, high, starts, owners, ends, first1)\n"
"    -> (n_ones, n_spaces, n_high, n_pairs)\n\n"
"The PROPERTIES of messages a[moff[m]:moff[m]+pl[m]] (one after another, as joined): the\n"
"positions of every \\x01, space and byte >= 0x80 into ones, spaces and high, and of every\n"
"pair (split at \\x02; none after a final \\x02) its start, message, end and first \\x01 at\n"
"or after its start (in a later message too; else `none`), all int64.\n"
"Returns how many of each there are; only what fits is written (call again with larger ones).");

static PyObject *k_prop_scan(PyObject *self, PyObject *args)
{
    PyObject *ao, *mo, *po, *lo[SCAN_LISTS];
    Py_ssize_t none;
    Py_buffer b[3 + SCAN_LISTS];
    int got = 0;
    PyObject *res = NULL;
    if (!PyArg_ParseTuple(args, "OOOnOOOOOOO:prop_scan", &ao, &mo, &po, &none, &lo[0], &lo[1], &lo[2], &lo[3],
                          &lo[4], &lo[5], &lo[6]))
        return NULL;
    static const char *names[SCAN_LISTS] = {"ones", "spaces", "high", "starts", "owners", "ends", "first1"};
    if (GET_BYTES(ao, &b[0], "a") < 0 || (got++, GET_I64(mo, &b[1], 0, "moff") < 0) ||
        (got++, GET_I64(po, &b[2], 0, "pl") < 0))
        goto done;
    for (got++; got < 3 + SCAN_LISTS; got++)
        if (GET_I64(lo[got - 3], &b[got], 1, names[got - 3]) < 0)
            goto done;
    Scan c = {b[0].buf, b[1].buf, b[2].buf, b[1].len / 8, b[0].len, none, {NULL}, {0}, {0}, 0, -1};
    for (int i = 0; i < SCAN_LISTS; i++) {
        c.list[i] = b[3 + i].buf;
        c.cap[i] = b[3 + i].len / 8;
        if (i > SCAN_PAIRS && c.cap[i] < c.cap[SCAN_PAIRS]) /* the pairs' room: the least of the four */
            c.cap[SCAN_PAIRS] = c.cap[i];
    }
    if (b[2].len != b[1].len) {
        PyErr_Format(PyExc_ValueError, "prop_scan: moff and pl differ in length (%zd, %zd)", b[1].len / 8,
                     b[2].len / 8);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    scan_loop(&c);
    Py_END_ALLOW_THREADS
    if (c.bad >= 0)
        range_error("prop_scan", (Py_ssize_t)c.bad, c.moff[c.bad], c.pl[c.bad], b[0].len);
    else
        res = Py_BuildValue("LLLL", (long long)c.cnt[0], (long long)c.cnt[1], (long long)c.cnt[2],
                            (long long)c.cnt[3]);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return res;
}

/* ------------------------------------------------------------------ a batch's record columns */

/* MessageDecoder#decode's fixed head (big-endian): BODYCRC, QUEUEID, QUEUEOFFSET,
 * PHYSICALOFFSET, SYSFLAG; after it BORNHOST (8 or 20 bytes by SYSFLAG), STORETIMESTAMP (8),
 * STOREHOST (8 or 20), RECONSUMETIMES (4), PREPAREDTRANSACTIONOFFSET (8), BODYLENGTH (4),
 * BODY, TOPICLENGTH (1 byte V1, 2 bytes V2), TOPIC, PROPERTIESLENGTH (2), PROPERTIES. */
#define HEAD_SIZE 48
#define BODY_CRC_AT 8
#define QUEUE_ID_AT 12
#define QUEUE_OFFSET_AT 20
#define PHYSICAL_OFFSET_AT 28
#define SYS_FLAG_AT 36
#define BORN_V6_FLAG 16  /* MessageSysFlag.BORNHOST_V6_FLAG */
#define STORE_V6_FLAG 32 /* MessageSysFlag.STOREHOSTADDRESS_V6_FLAG */
#define HOST_V4 8
#define HOST_V6 20
#define STORE_TS_AT 0      /* after BORNHOST */
#define AFTER_BORN_HOST 8 /* STORETIMESTAMP */
#define BODY_LENGTH_AT 12 /* after STOREHOST */
#define PROPS_LENGTH_SIZE 2
#define FIXED_SIZE 74 /* CommitLog#calMsgLength's constant part */

/* the columns of record_cols' out, each n items long, one after another */
enum { RC_TOTAL, RC_SYS_FLAG, RC_BODY_CRC, RC_QUEUE_ID, RC_QUEUE_OFFSET, RC_PHYSICAL_OFFSET, RC_STORE_TS,
       RC_BODY_AT, RC_BODY_LEN, RC_TOPIC_LEN_SIZE, RC_TOPIC_LEN_AT, RC_TOPIC_LEN, RC_TOPIC_AT, RC_PROPS_LEN_AT,
       RC_PROPS_LEN, RC_PROPS_AT, RC_EXPECTED, RC_CRC, RC_COLS };
static const char *rc_names[RC_COLS] = {
    "total", "sys_flag", "body_crc", "queue_id", "queue_offset", "physical_offset", "store_timestamp",
    "body_at", "body_len", "topic_len_size", "topic_len_at", "topic_len", "topic_at", "props_len_at",
    "props_len", "props_at", "expected", "crc"};

static inline int64_t be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)be32(p) << 32) | (uint64_t)be32(p + 4));
}

/* One record at p of a buffer of len bytes into column row i of out (n items a column);
 * 0, or -1 when a field it must read lies outside the buffer (every read is checked first). */
static int record_one(const uint8_t *a, int64_t len, int64_t p, int64_t i, int64_t n, int64_t small,
                      int64_t *out, int64_t *big)
{
    if (p < 0 || p > len || len - p < HEAD_SIZE)
        return -1;
    const uint8_t *h = a + p;
    int64_t sysf = (int32_t)be32(h + SYS_FLAG_AT);
    int64_t bhl = (sysf & BORN_V6_FLAG) ? HOST_V6 : HOST_V4, shl = (sysf & STORE_V6_FLAG) ? HOST_V6 : HOST_V4;
    int64_t store_ts_at = p + HEAD_SIZE + bhl + STORE_TS_AT;
    int64_t body_len_at = p + HEAD_SIZE + bhl + AFTER_BORN_HOST + shl + BODY_LENGTH_AT;
    if (len - body_len_at < 4)
        return -1;
    int64_t body_len = (int32_t)be32(a + body_len_at), body_at = body_len_at + 4;
    int64_t bl = body_len > 0 ? body_len : 0;
    int v2 = be32(h + MAGIC_AT) == MAGIC_V2;
    int64_t tls = v2 ? 2 : 1, topic_len_at = body_at + bl;
    if (topic_len_at > len || len - topic_len_at < tls)
        return -1;
    int64_t tl = v2 ? (int64_t)(int16_t)(((uint16_t)a[topic_len_at] << 8) | a[topic_len_at + 1])
                    : (int64_t)(int8_t)a[topic_len_at];
    int64_t topic_at = topic_len_at + tls, props_len_at = topic_at + (tl > 0 ? tl : 0);
    if (props_len_at > len || len - props_len_at < PROPS_LENGTH_SIZE)
        return -1;
    int64_t pl = (int16_t)(((uint16_t)a[props_len_at] << 8) | a[props_len_at + 1]);
    out[RC_TOTAL * n + i] = (int32_t)be32(h + TOTAL_AT);
    out[RC_SYS_FLAG * n + i] = sysf;
    out[RC_BODY_CRC * n + i] = (int32_t)be32(h + BODY_CRC_AT);
    out[RC_QUEUE_ID * n + i] = (int32_t)be32(h + QUEUE_ID_AT);
    out[RC_QUEUE_OFFSET * n + i] = be64(h + QUEUE_OFFSET_AT);
    out[RC_PHYSICAL_OFFSET * n + i] = be64(h + PHYSICAL_OFFSET_AT);
    out[RC_STORE_TS * n + i] = be64(a + store_ts_at);
    out[RC_BODY_AT * n + i] = body_at;
    out[RC_BODY_LEN * n + i] = body_len;
    out[RC_TOPIC_LEN_SIZE * n + i] = tls;
    out[RC_TOPIC_LEN_AT * n + i] = topic_len_at;
    out[RC_TOPIC_LEN * n + i] = tl;
    out[RC_TOPIC_AT * n + i] = topic_at;
    out[RC_PROPS_LEN_AT * n + i] = props_len_at;
    out[RC_PROPS_LEN * n + i] = pl;
    out[RC_PROPS_AT * n + i] = props_len_at + PROPS_LENGTH_SIZE;
    out[RC_EXPECTED * n + i] = FIXED_SIZE + bhl + shl + tls + bl + (tl > 0 ? tl : 0) + (pl > 0 ? pl : 0);
    /* the body [body_at, topic_len_at) lies inside the buffer: TOPICLENGTH after it was read */
    if (small > 0 && bl < small)
        out[RC_CRC * n + i] = (int64_t)(rmq_crc32(a + body_at, bl) & 0x7FFFFFFFu);
    else {
        out[RC_CRC * n + i] = -1;
        *big += small > 0;
    }
    return 0;
}

PyDoc_STRVAR(record_cols_doc,
"record_cols(a, pos, small, out) -> big\n\n"
"The fields verify reads of the records at pos (int64) of the buffer a, one pass: out (int64,\n"
"RC_COLS columns of len(pos) items one after another, named by REC_COLS) gets TOTALSIZE,\n"
"SYSFLAG, BODYCRC, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, STORETIMESTAMP, where BODY starts and\n"
"BODYLENGTH, TOPICLENGTH's size, position and value, TOPIC's start, PROPERTIESLENGTH's position\n"
"and value, PROPERTIES' start, CommitLog#calMsgLength, and with small > 0 the CRC-32 of each\n"
"body shorter than small & 0x7FFFFFFF (-1 for the longer ones: returns how many, left for\n"
"zlib). Returns -1 (out partly written) when a field of some record lies outside a.");

static PyObject *k_record_cols(PyObject *self, PyObject *args)
{
    PyObject *ao, *po, *oo;
    Py_ssize_t small;
    Py_buffer a, pos, out;
    if (!PyArg_ParseTuple(args, "OOnO:record_cols", &ao, &po, &small, &oo))
        return NULL;
    if (GET_BYTES(ao, &a, "a") < 0)
        return NULL;
    if (GET_I64(po, &pos, 0, "pos") < 0) {
        PyBuffer_Release(&a);
        return NULL;
    }
    if (GET_I64(oo, &out, 1, "out") < 0) {
        PyBuffer_Release(&a);
        PyBuffer_Release(&pos);
        return NULL;
    }
    int64_t n = pos.len / 8, big = 0, bad = 0;
    if (out.len / 8 != n * RC_COLS) {
        PyErr_Format(PyExc_ValueError, "record_cols: out holds %zd items, need %lld (%d columns of %lld)",
                     out.len / 8, (long long)(n * RC_COLS), RC_COLS, (long long)n);
        bad = 1;
    } else {
        const uint8_t *b = a.buf;
        const int64_t *p = pos.buf;
        int64_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n; i++)
            if (record_one(b, a.len, p[i], i, n, small, o, &big) < 0) {
                big = -1;
                break;
            }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&a);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&out);
    return bad ? NULL : PyLong_FromLongLong((long long)big);
}

/* ------------------------------------------------------------------ topic ids */

/* FNV-1a of a topic's bytes: the slot table's hash (any hash would do; equal bytes, equal hash) */
static inline uint64_t topic_hash(const uint8_t *p, int64_t n)
{
    uint64_t h = 0xCBF29CE484222325ull ^ (uint64_t)n;
    for (int64_t k = 0; k < n; k++)
        h = (h ^ p[k]) * 0x100000001B3ull;
    return h ^ (h >> 29);
}

/* The id of topic bytes [p, p + n) among the names in the slot table (open addressing, a
 * power-of-two size: mask), or -1. */
static inline int64_t topic_find(const uint8_t *names, const int64_t *noff, int64_t nnames, const int64_t *slots,
                                 uint64_t mask, const uint8_t *p, int64_t n)
{
    uint64_t s = topic_hash(p, n) & mask;
    for (uint64_t probes = 0; probes <= mask; probes++, s = (s + 1) & mask) {
        int64_t id = slots[s];
        if (id < 0 || id >= nnames) /* empty (or not this loop's: never read past noff) */
            return -1;
        if (noff[id + 1] - noff[id] == n && memcmp(names + noff[id], p, (size_t)n) == 0)
            return id;
    }
    return -1;
}

PyDoc_STRVAR(topic_ids_doc,
"topic_ids(a, ta, tl, names, noff, slots, out) -> unknown\n\n"
"out[i] (int64) = the id of the topic a[ta[i]:ta[i]+tl[i]] among the registered names (id k:\n"
"names[noff[k]:noff[k+1]], distinct), -1 when not registered (or tl[i] < 0, or the range is\n"
"outside a); returns how many -1. slots (int64): this loop's hash table, its own cache kept\n"
"by the caller: slots[0] = how many names it holds, the rest (a power of two, more than twice\n"
"the names) -1 at first; names added since are put in first.");

typedef struct {
    const uint8_t *a, *names;
    const int64_t *ta, *tl, *noff;
    int64_t *slots, *out;
    int64_t n, len, nlen, nnames, bad;
} Topics;

/* Names [slots[0], nnames) into the table; 0, or -1 when a name's range is outside names
 * (every name checked: a look-up reads any of them) or the table has no free slot. */
static int topics_fill(Topics *c, int64_t *table, uint64_t mask)
{
    for (int64_t k = 0; k < c->nnames; k++)
        if (c->noff[k] < 0 || c->noff[k + 1] < c->noff[k] || c->noff[k + 1] > c->nlen) {
            c->bad = k;
            return -1;
        }
    for (int64_t k = c->slots[0]; k < c->nnames; k++) {
        uint64_t s = topic_hash(c->names + c->noff[k], c->noff[k + 1] - c->noff[k]) & mask, probes = 0;
        while (table[s] >= 0 && table[s] < c->nnames && probes++ <= mask)
            s = (s + 1) & mask;
        if (probes > mask) {
            c->bad = k;
            return -1;
        }
        table[s] = k;
        c->slots[0] = k + 1;
    }
    return 0;
}

static int64_t topics_loop(Topics *c, const int64_t *table, uint64_t mask)
{
    int64_t unknown = 0;
    for (int64_t i = 0; i < c->n; i++) {
        int64_t t = -1;
        if (c->tl[i] >= 0 && range_ok(c->ta[i], c->tl[i], c->len))
            t = topic_find(c->names, c->noff, c->nnames, table, mask, c->a + c->ta[i], c->tl[i]);
        c->out[i] = t;
        unknown += t < 0;
    }
    return unknown;
}

static PyObject *k_topic_ids(PyObject *self, PyObject *args)
{
    PyObject *o[7];
    Py_buffer b[7];
    int got = 0;
    PyObject *res = NULL;
    static const char *names[7] = {"a", "ta", "tl", "names", "noff", "slots", "out"};
    if (!PyArg_ParseTuple(args, "OOOOOOO:topic_ids", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    for (; got < 7; got++) {
        int bytes = got == 0 || got == 3, w = got == 5 || got == 6;
        if ((bytes ? get_buffer(o[got], &b[got], 0, 1, "Bbc", names[got])
                   : GET_I64(o[got], &b[got], w, names[got])) < 0)
            goto done;
    }
    Topics c = {b[0].buf, b[3].buf, b[1].buf, b[2].buf, b[4].buf, b[5].buf, b[6].buf,
                b[1].len / 8, b[0].len, b[3].len, b[4].len / 8 - 1, -1};
    int64_t size = b[5].len / 8 - 1, count = size >= 0 ? c.slots[0] : -1;
    if (b[2].len != b[1].len || b[6].len != b[1].len || c.nnames < 0) {
        PyErr_SetString(PyExc_ValueError, "topic_ids: ta, tl and out differ in length, or noff is empty");
        goto done;
    }
    if (size < 1 || (size & (size - 1)) || size <= 2 * c.nnames || count < 0 || count > c.nnames) {
        PyErr_Format(PyExc_ValueError, "topic_ids: slots must hold a count (0..%lld, got %lld) and a power of two "
                     "above twice the names (%lld), got %lld", (long long)c.nnames, (long long)count,
                     (long long)c.nnames, (long long)size);
        goto done;
    }
    int64_t *table = c.slots + 1, unknown = 0;
    uint64_t mask = (uint64_t)size - 1;
    int filled;
    Py_BEGIN_ALLOW_THREADS
    filled = topics_fill(&c, table, mask);
    if (filled == 0)
        unknown = topics_loop(&c, table, mask);
    Py_END_ALLOW_THREADS
    if (filled < 0)
        PyErr_Format(PyExc_ValueError, "topic_ids: name %lld lies outside names (%zd bytes) or slots is full",
                     (long long)c.bad, b[3].len);
    else
        res = PyLong_FromLongLong((long long)unknown);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return res;
}

/* ------------------------------------------------------------------ PROPERTIES: verify's one pass */

#define PF_MALFORMED 1 /* a pair not name\x01value with both non-empty (the parser drops it) */
#define PF_HIGH 2      /* a byte >= 0x80 */
#define PF_BAD_UTF8 4  /* not well-formed UTF-8 (new String(bytes, UTF_8) would replace) */

typedef struct {
    PropKeys k;
    const uint8_t *names;
    const int64_t *noff;
    int64_t nnames;
    int64_t *flags, *vals;
} PropFused;

/* Whether a[x:y] holds a byte >= 0x80, eight bytes at a time. */
static int has_high(const uint8_t *a, int64_t x, int64_t y)
{
    uint64_t acc = 0;
    for (; y - x >= 8; x += 8) {
        uint64_t w;
        memcpy(&w, a + x, 8);
        acc |= w;
    }
    for (; x < y; x++)
        acc |= a[x];
    return (acc & HIGH8) != 0;
}

/* Message m: its pairs once (PF_MALFORMED, the named values, TAGS/UNIQ_KEY/KEYS), its bytes
 * (PF_HIGH, PF_BAD_UTF8), then its tagsCode and keys (emit_keys); a malformed key's hash 0. */
static int prop_fused_one(PropFused *c, int64_t m, int64_t *k)
{
    const uint8_t *a = c->k.a;
    int64_t n = c->k.n, s = c->k.moff[m], end = s + c->k.pl[m], flags = 0, k0 = *k;
    int64_t ta = -1, tb = -1, ua = -1, ub = -1, ka = -1, kb = -1;
    for (int64_t j = 0; j < c->nnames; j++)
        c->vals[2 * j * n + m] = c->vals[(2 * j + 1) * n + m] = -1;
    while (s < end) {
        const uint8_t *q = memchr(a + s, PAIR_SEP, (size_t)(end - s));
        int64_t e = q ? (int64_t)(q - a) : end;
        const uint8_t *one = e > s ? memchr(a + s, NAME_SEP, (size_t)(e - s)) : NULL;
        if (one == NULL || one == a + s || one == a + e - 1)
            flags |= PF_MALFORMED;
        switch (a[s]) {
        case 'T': take_value(a, s, e, TAGS_NAME, 5, &ta, &tb); break;
        case 'K': take_value(a, s, e, KEYS_NAME, 5, &ka, &kb); break;
        case 'U': take_value(a, s, e, UNIQ_NAME, 9, &ua, &ub); break;
        default: break;
        }
        for (int64_t j = 0; j < c->nnames; j++)
            if (c->noff[j + 1] == c->noff[j] || a[s] == c->names[c->noff[j]]) /* the first byte, then the rest */
                take_value(a, s, e, (const char *)c->names + c->noff[j], c->noff[j + 1] - c->noff[j],
                           &c->vals[2 * j * n + m], &c->vals[(2 * j + 1) * n + m]);
        s = e + 1;
    }
    if (has_high(a, c->k.moff[m], end)) {
        int bad = 0;
        hash_on(a, c->k.moff[m], end, 0, &bad);
        flags |= PF_HIGH | (bad ? PF_BAD_UTF8 : 0);
    }
    c->flags[m] = flags;
    int why = emit_keys(&c->k, m, ta, tb, ua, ub, ka, kb, k);
    for (int64_t r = k0; r < *k && r < c->k.cap; r++)
        if (c->k.keys[r * KEY_COLS + 4] & KEY_WIDE)
            c->k.keys[r * KEY_COLS + 3] = 0;
    return why;
}

static int64_t prop_fused_loop(PropFused *c)
{
    int64_t k = 0;
    for (int64_t m = 0; m < c->k.n; m++) {
        if (!range_ok(c->k.moff[m], c->k.pl[m], c->k.len)) {
            c->k.bad = m, c->k.why = 1;
            break;
        }
        int why = prop_fused_one(c, m, &k);
        if (why) {
            c->k.bad = m, c->k.why = why;
            break;
        }
    }
    return k;
}

PyDoc_STRVAR(prop_fused_doc,
"prop_fused(a, moff, pl, indexable, tid, prefix, names, noff, flags_out, tags_out, vals_out,\n"
"           keys_out) -> n_keys\n\n"
"prop_keys and what verify reads of each message's PROPERTIES a[moff[m]:moff[m]+pl[m]], one\n"
"pass: flags_out[m] = 1 when a pair (split at \\x02, none after a final one) is not\n"
"name\\x01value with both non-empty, | 2 when a byte is >= 0x80, | 4 when it is not\n"
"well-formed UTF-8; for each name j (names[noff[j]:noff[j+1]], ending with \\x01) the value\n"
"range of its last non-empty pair, vals_out[2j*n+m] to vals_out[(2j+1)*n+m] (-1, -1 without\n"
"one); tags_out and keys_out as prop_keys, a key of malformed UTF-8 with hash 0.");

static PyObject *k_prop_fused(PyObject *self, PyObject *args)
{
    PyObject *o[12];
    Py_buffer b[12];
    int got = 0;
    PyObject *res = NULL;
    static const char *nm[12] = {"a", "moff", "pl", "indexable", "tid", "prefix", "names", "noff",
                                 "flags_out", "tags_out", "vals_out", "keys_out"};
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOO:prop_fused", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7],
                          &o[8], &o[9], &o[10], &o[11]))
        return NULL;
    for (; got < 12; got++) {
        int r = got == 0 || got == 6 ? GET_BYTES(o[got], &b[got], nm[got])
                : got == 3           ? get_buffer(o[got], &b[got], 0, 1, "Bb?", nm[got])
                                     : GET_I64(o[got], &b[got], got >= 8, nm[got]);
        if (r < 0)
            goto done;
    }
    int64_t n = b[1].len / 8, nn = b[7].len / 8 - 1;
    PropFused c = {{b[0].buf, b[3].buf, b[1].buf, b[2].buf, b[4].buf, b[5].buf, n, b[0].len, b[5].len / 8,
                    b[11].len / 8 / KEY_COLS, b[9].buf, b[11].buf, -1, 0},
                   b[6].buf, b[7].buf, nn, b[8].buf, b[10].buf};
    if (b[2].len / 8 != n || b[3].len != n || b[4].len / 8 != n || b[8].len / 8 != n || b[9].len / 8 != n ||
        nn < 0 || b[10].len / 8 != 2 * nn * n) {
        PyErr_SetString(PyExc_ValueError, "prop_fused: moff, pl, indexable, tid, flags_out and tags_out must have "
                        "one item a message, noff at least one, vals_out two a name and message");
        goto done;
    }
    for (int64_t j = 0; j < nn; j++)
        if (c.noff[j] < 0 || c.noff[j + 1] < c.noff[j] || c.noff[j + 1] > b[6].len) {
            PyErr_Format(PyExc_ValueError, "prop_fused: name %lld lies outside names (%zd bytes)", (long long)j,
                         b[6].len);
            goto done;
        }
    int64_t k;
    Py_BEGIN_ALLOW_THREADS
    k = prop_fused_loop(&c);
    Py_END_ALLOW_THREADS
    res = keys_result("prop_fused", &c.k, k, b[0].len);
done:
    for (int i = 0; i < got; i++)
        PyBuffer_Release(&b[i]);
    return res;
}

/* ------------------------------------------------------------------ index entries of a block of keys */

/* IndexFile#putKey's entry: keyHash (4), phyOffset (8), timeDiff (4), prevIndex (4), big-endian */
enum { IE_SIZE = 20, IE_HASH_AT = 0, IE_PHY_AT = 4, IE_DIFF_AT = 12, IE_PREV_AT = 16 };

static inline void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

typedef struct {
    const int64_t *hash, *phy, *diff;
    int64_t k, n0, slot_num;
    uint8_t *out;
    int64_t *slots, *heads, *tails;
} IndexBlock;

/* The block's key positions ordered by slot, stable (so by position within a slot): an LSD
 * radix sort of at most 16 bits a digit into idx (tmp: as long). Costs O(k) whatever the
 * slot count: no table of slot_num entries is made or touched. */
static void sort_by_slot(const int64_t *sl, int64_t k, int64_t slot_num, uint32_t *idx, uint32_t *tmp,
                         int64_t *count)
{
    int bits = 0;
    while (bits < 63 && ((int64_t)1 << bits) < slot_num)
        bits++;
    int passes = bits ? (bits + 15) / 16 : 0, width = passes ? (bits + passes - 1) / passes : 0;
    int64_t buckets = (int64_t)1 << width;
    for (int64_t i = 0; i < k; i++)
        idx[i] = (uint32_t)i;
    for (int p = 0; p < passes; p++) {
        int shift = p * width;
        memset(count, 0, (size_t)buckets * sizeof(int64_t));
        for (int64_t i = 0; i < k; i++)
            count[(sl[i] >> shift) & (buckets - 1)]++;
        for (int64_t d = 0, at = 0; d < buckets; d++) {
            int64_t c = count[d];
            count[d] = at, at += c;
        }
        for (int64_t i = 0; i < k; i++) {
            uint32_t x = idx[i];
            tmp[count[(sl[x] >> shift) & (buckets - 1)]++] = x;
        }
        uint32_t *t = idx;
        idx = tmp, tmp = t;
        if (p == passes - 1 && passes % 2)
            memcpy(tmp, idx, (size_t)k * sizeof(uint32_t)); /* the result in the caller's idx */
    }
}

/* Entries n0.. of a block, each chained to the previous entry of its slot in the block (0 for
 * the first), into out; the slots used, ascending, with their first and last entry. Returns
 * how many slots, or -1 when the scratch memory could not be had. */
static int64_t index_block(IndexBlock *c)
{
    int64_t k = c->k, used = 0;
    int64_t *sl = malloc((size_t)(k ? k : 1) * sizeof(int64_t));
    uint32_t *idx = malloc((size_t)(k ? k : 1) * sizeof(uint32_t));
    uint32_t *tmp = malloc((size_t)(k ? k : 1) * sizeof(uint32_t));
    int64_t *count = malloc(((size_t)1 << 16) * sizeof(int64_t));
    if (sl == NULL || idx == NULL || tmp == NULL || count == NULL) {
        free(sl), free(idx), free(tmp), free(count);
        return -1;
    }
    for (int64_t i = 0; i < k; i++) {
        int64_t s = c->hash[i] % c->slot_num;
        sl[i] = s + (s < 0 ? c->slot_num : 0);
    }
    sort_by_slot(sl, k, c->slot_num, idx, tmp, count);
    uint32_t *prev = tmp; /* prevIndex per position, from the walk in slot order */
    for (int64_t j = 0; j < k; j++) {
        uint32_t i = idx[j];
        if (j == 0 || sl[idx[j - 1]] != sl[i]) {
            prev[i] = 0;
            c->slots[used] = sl[i];
            c->heads[used++] = c->n0 + i;
        } else {
            prev[i] = (uint32_t)(c->n0 + idx[j - 1]);
        }
        c->tails[used - 1] = c->n0 + i;
    }
    for (int64_t i = 0; i < k; i++) {
        uint8_t *e = c->out + i * IE_SIZE;
        put_be32(e + IE_HASH_AT, (uint32_t)c->hash[i]);
        put_be32(e + IE_PHY_AT, (uint32_t)((uint64_t)c->phy[i] >> 32));
        put_be32(e + IE_PHY_AT + 4, (uint32_t)c->phy[i]);
        put_be32(e + IE_DIFF_AT, (uint32_t)c->diff[i]);
        put_be32(e + IE_PREV_AT, prev[i]);
    }
    free(sl), free(idx), free(tmp), free(count);
    return used;
}

PyDoc_STRVAR(index_entries_doc,
"index_entries(hashes, phy, diff, n0, slot_num, out, slots, heads, tails) -> used\n\n"
"The index entries n0, n0 + 1, ... of a block of keys (int64 hashes, offsets, time diffs) as\n"
"IndexFile#putKey lays them out (20 big-endian bytes each) into out (uint8), each entry's\n"
"prevIndex the previous entry of its slot (hash mod slot_num) in the block, 0 for the\n"
"first; into slots, heads and tails (int64, as long as hashes) the slots used in ascending\n"
"order with their first and last entry. Returns how many slots are used.");

static PyObject *k_index_entries(PyObject *self, PyObject *args)
{
    PyObject *o[9];
    Py_buffer b[9];
    Py_ssize_t n0, slot_num;
    int got = 0;
    PyObject *res = NULL;
    static const char *nm[9] = {"hashes", "phy", "diff", "", "", "out", "slots", "heads", "tails"};
    if (!PyArg_ParseTuple(args, "OOOnnOOOO:index_entries", &o[0], &o[1], &o[2], &n0, &slot_num, &o[5], &o[6],
                          &o[7], &o[8]))
        return NULL;
    for (int i = 0; i < 9; i++) {
        if (i == 3 || i == 4)
            continue;
        if ((i == 5 ? get_buffer(o[i], &b[i], 1, 1, "Bbc", nm[i]) : GET_I64(o[i], &b[i], i > 5, nm[i])) < 0)
            goto done;
        got |= 1 << i;
    }
    int64_t k = b[0].len / 8;
    if (b[1].len != b[0].len || b[2].len != b[0].len || b[5].len != k * IE_SIZE || b[6].len != b[0].len ||
        b[7].len != b[0].len || b[8].len != b[0].len || n0 < 0 || slot_num < 1 || k >= INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "index_entries: hashes, phy, diff, slots, heads and tails must be as long "
                     "(out %d bytes an entry), n0 >= 0, slot_num >= 1; got %lld keys, n0=%zd, slot_num=%zd",
                     IE_SIZE, (long long)k, n0, slot_num);
        goto done;
    }
    IndexBlock c = {b[0].buf, b[1].buf, b[2].buf, k, n0, slot_num, b[5].buf, b[6].buf, b[7].buf, b[8].buf};
    int64_t used;
    Py_BEGIN_ALLOW_THREADS
    used = index_block(&c);
    Py_END_ALLOW_THREADS
    res = used < 0 ? PyErr_NoMemory() : PyLong_FromLongLong((long long)used);
done:
    for (int i = 0; i < 9; i++)
        if (got & (1 << i))
            PyBuffer_Release(&b[i]);
    return res;
}

/* ------------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"walk", k_walk, METH_VARARGS, walk_doc},
    {"walk_entries", k_walk_entries, METH_VARARGS, walk_entries_doc},
    {"small_body_crcs", k_small_body_crcs, METH_VARARGS, small_body_crcs_doc},
    {"join_ranges", k_join_ranges, METH_VARARGS, join_ranges_doc},
    {"prop_keys", k_prop_keys, METH_VARARGS, prop_keys_doc},
    {"prop_scan", k_prop_scan, METH_VARARGS, prop_scan_doc},
    {"record_cols", k_record_cols, METH_VARARGS, record_cols_doc},
    {"topic_ids", k_topic_ids, METH_VARARGS, topic_ids_doc},
    {"prop_fused", k_prop_fused, METH_VARARGS, prop_fused_doc},
    {"index_entries", k_index_entries, METH_VARARGS, index_entries_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqstore_cli.store._ckernels",
    "The engine's compiled loops (see rmqstore_cli/store/kernels.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__ckernels(void)
{
    rmq_crc_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddFunctions(m, dump_methods) < 0 || PyModule_AddFunctions(m, arrow_methods) < 0 ||
        PyModule_AddFunctions(m, encode_methods) < 0 || PyModule_AddObject(m, "DUMP_COLS", dump_cols_names()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *layout = Py_BuildValue("{s:i,s:i,s:i,s:k,s:k,s:i,s:i,s:i,s:i,s:i,s:i,s:y,s:y,s:y}", "total_at", TOTAL_AT,
                                     "magic_at", MAGIC_AT, "prefix_size", PREFIX_SIZE,
                                     "magic_v1", (unsigned long)MAGIC_V1, "magic_v2", (unsigned long)MAGIC_V2,
                                     "entry_magic", ENTRY_MAGIC, "entry_magic_at", ENTRY_MAGIC_AT,
                                     "entry_size_at", ENTRY_SIZE_AT, "name_sep", NAME_SEP, "pair_sep", PAIR_SEP,
                                     "key_sep", KEY_SEP, "tags", TAGS_NAME, "keys", KEYS_NAME, "uniq_key", UNIQ_NAME);
    PyObject *cols = PyTuple_New(RC_COLS);
    for (int i = 0; cols != NULL && i < RC_COLS; i++)
        PyTuple_SET_ITEM(cols, i, PyUnicode_FromString(rc_names[i]));
    PyObject *rec = Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "head_size", HEAD_SIZE,
                                  "body_crc_at", BODY_CRC_AT, "queue_id_at", QUEUE_ID_AT, "queue_offset_at",
                                  QUEUE_OFFSET_AT, "physical_offset_at", PHYSICAL_OFFSET_AT, "sys_flag_at",
                                  SYS_FLAG_AT, "born_v6_flag", BORN_V6_FLAG, "store_v6_flag", STORE_V6_FLAG,
                                  "host_v4", HOST_V4, "host_v6", HOST_V6, "store_ts_at", STORE_TS_AT, "after_born_host", AFTER_BORN_HOST,
                                  "body_length_at", BODY_LENGTH_AT, "props_length_size", PROPS_LENGTH_SIZE,
                                  "fixed_size", FIXED_SIZE);
    if (layout != NULL && rec != NULL && PyDict_Update(layout, rec) < 0)
        Py_CLEAR(layout);
    Py_XDECREF(rec);
    if (cols == NULL || PyModule_AddObject(m, "REC_COLS", cols) < 0) {
        Py_XDECREF(cols);
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    if (layout == NULL || PyModule_AddObject(m, "LAYOUT", layout) < 0 ||
        PyModule_AddIntConstant(m, "KEY_COLS", KEY_COLS) < 0 || PyModule_AddIntConstant(m, "KEY_WORD", KEY_WORD) < 0 ||
        PyModule_AddIntConstant(m, "KEY_WIDE", KEY_WIDE) < 0 || PyModule_AddIntConstant(m, "CLMUL", rmq_crc_clmul()) < 0 ||  PyModule_AddIntConstant(m, "TAGS_WIDE", TAGS_WIDE) < 0 ||
        PyModule_AddIntConstant(m, "PF_MALFORMED", PF_MALFORMED) < 0 || PyModule_AddIntConstant(m, "PF_HIGH", PF_HIGH) < 0 ||
        PyModule_AddIntConstant(m, "PF_BAD_UTF8", PF_BAD_UTF8) < 0 ||
        PyModule_AddObject(m, "INDEX_ENTRY", Py_BuildValue("(iiiii)", IE_SIZE, IE_HASH_AT, IE_PHY_AT, IE_DIFF_AT,
                                                              IE_PREV_AT)) < 0) {
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
