/* The engine's compiled loops (rmqstore_cli/store/kernels.py): the commit-log record walk
 * (plain and DLedger), CRC-32 of small bodies, a join of byte ranges.
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
 * (formats/commitlog.py HEAD, formats/sysflag.py, formats/dledger.py) before using the module.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static uint32_t crc_table[8][256];

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

/* The walk of STORE-FORMAT §7.1 (CommitLog#checkMessageAndReturnSize's first checks), plain
 * (header < 0) or over DLedger entries (DLedgerMmapFileStore#recover: header >= 0 bytes of
 * entry header before each record). Callers checked 0 <= pos, 0 <= limit <= len(a),
 * 0 <= max_n <= len(out), min_total >= 1: every read is below `limit`, `end` only grows. */
static Py_ssize_t walk_loop(const uint8_t *a, int64_t pos, int64_t limit, int64_t max_n, int64_t min_total,
                            int64_t header, int64_t *out, int64_t *end_out)
{
    int64_t n = 0, end = pos;
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

/* Slicing-by-8 CRC-32 of the reflected polynomial 0xEDB88320: zlib's crc32 (UtilAll#crc32). */
static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ ((c & 1) ? 0xEDB88320u : 0);
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xFF];
}

static uint32_t crc32_bytes(const uint8_t *p, int64_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; p += 8, n -= 8) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF]
            ^ crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]]
            ^ crc_table[0][p[7]];
    }
    for (; n > 0; p++, n--)
        c = crc_table[0][(c ^ *p) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

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
            out[i] = (int64_t)(crc32_bytes(a + at[i], ln[i]) & 0x7FFFFFFFu);
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

/* ------------------------------------------------------------------ the module */

static PyMethodDef methods[] = {
    {"walk", k_walk, METH_VARARGS, walk_doc},
    {"walk_entries", k_walk_entries, METH_VARARGS, walk_entries_doc},
    {"small_body_crcs", k_small_body_crcs, METH_VARARGS, small_body_crcs_doc},
    {"join_ranges", k_join_ranges, METH_VARARGS, join_ranges_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rmqstore_cli.store._ckernels",
    "The engine's compiled loops (see rmqstore_cli/store/kernels.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__ckernels(void)
{
    crc_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *layout = Py_BuildValue("{s:i,s:i,s:i,s:k,s:k,s:i,s:i,s:i}", "total_at", TOTAL_AT,
                                     "magic_at", MAGIC_AT, "prefix_size", PREFIX_SIZE,
                                     "magic_v1", (unsigned long)MAGIC_V1, "magic_v2", (unsigned long)MAGIC_V2,
                                     "entry_magic", ENTRY_MAGIC, "entry_magic_at", ENTRY_MAGIC_AT,
                                     "entry_size_at", ENTRY_SIZE_AT);
    if (layout == NULL || PyModule_AddObject(m, "LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
