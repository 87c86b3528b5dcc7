/* generate's record join (rmqstore_cli/store/commitlog/blocks.py's encode_join is its twin): a
 * block's records as MessageExtEncoder#encode lays them out, written once into one new bytes
 * object: each record's fixed fields (TOTALSIZE ... BODYLENGTH, packed by numpy from the block's
 * columns, one array per kind of host pair), its BODYCRC (UtilAll#crc32 & 0x7FFFFFFF, computed
 * here), BODY, TOPICLENGTH + TOPIC, PROPERTIESLENGTH and PROPERTIES. Instead of a bytes object a
 * record for the fixed part, a list of five parts a record and a join of them.
 *
 * Part of the _ckernels extension (setup.py). It reads Python objects (the bodies, topics and
 * properties, lists of bytes), so it holds the GIL; every argument is checked first (lengths,
 * indexes, item types), it never reads or writes outside a buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_ccrc.h"
#include "_cencode.h"

/* A list of n bytes objects (the name says which, in the error). */
static int bytes_list(PyObject *o, Py_ssize_t n, const char *name)
{
    if (!PyList_Check(o) || (n >= 0 && PyList_GET_SIZE(o) != n)) {
        PyErr_Format(PyExc_ValueError, "encode_join: %s must be a list of %zd bytes", name, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); i++)
        if (!PyBytes_Check(PyList_GET_ITEM(o, i))) {
            PyErr_Format(PyExc_TypeError, "encode_join: %s[%zd] is not bytes", name, i);
            return -1;
        }
    return 0;
}

/* A contiguous int64 buffer (numpy int64 array). */
static int i64_buffer(PyObject *o, Py_buffer *v, const char *name)
{
    if (PyObject_GetBuffer(o, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (v->itemsize != 8 || !(f[0] == 'q' || (f[0] == 'l' && sizeof(long) == 8)) || f[1] != '\0') {
        PyErr_Format(PyExc_TypeError, "encode_join: %s must be a contiguous int64 array", name);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

#define MAX_GROUPS 8

typedef struct {
    Py_ssize_t n, groups;
    Py_buffer grp, pidx, gsize, fixed[MAX_GROUPS];
    int got; /* how many of grp, pidx, gsize are held */
    int nfixed;
} Args;

static void args_release(Args *a)
{
    Py_buffer *held[3] = {&a->grp, &a->pidx, &a->gsize};
    for (int i = 0; i < a->got; i++)
        PyBuffer_Release(held[i]);
    for (int i = 0; i < a->nfixed; i++)
        PyBuffer_Release(&a->fixed[i]);
}

/* The bytes the records take, every index and size checked; -1 with an error set. */
static int64_t planned_size(Args *a, PyObject *bodies, PyObject *parts, PyObject *props, Py_ssize_t crc_at,
                            Py_ssize_t plen_size)
{
    const int64_t *grp = a->grp.buf, *pidx = a->pidx.buf, *gsize = a->gsize.buf;
    int64_t rows[MAX_GROUPS] = {0}, total = 0, plen_max = ((int64_t)1 << (8 * plen_size - 1)) - 1;
    Py_ssize_t nparts = PyList_GET_SIZE(parts);
    for (Py_ssize_t g = 0; g < a->groups; g++)
        if (gsize[g] < crc_at + 4) {
            PyErr_Format(PyExc_ValueError, "encode_join: group %zd's rows (%lld bytes) end before BODYCRC", g,
                         (long long)gsize[g]);
            return -1;
        }
    for (Py_ssize_t i = 0; i < a->n; i++) {
        int64_t g = grp[i], p = pidx[i];
        Py_ssize_t pl = PyBytes_GET_SIZE(PyList_GET_ITEM(props, i));
        if (g < 0 || g >= a->groups || p < 0 || p >= nparts || pl > plen_max) {
            PyErr_Format(PyExc_ValueError, "encode_join: record %zd: group %lld, topic part %lld or properties "
                         "length %zd out of range", i, (long long)g, (long long)p, pl);
            return -1;
        }
        rows[g]++;
        total += gsize[g] + PyBytes_GET_SIZE(PyList_GET_ITEM(bodies, i)) +
                 PyBytes_GET_SIZE(PyList_GET_ITEM(parts, p)) + plen_size + pl;
    }
    for (Py_ssize_t g = 0; g < a->groups; g++)
        if (a->fixed[g].len != rows[g] * gsize[g]) {
            PyErr_Format(PyExc_ValueError, "encode_join: group %zd holds %zd bytes, its %lld records need %lld", g,
                         a->fixed[g].len, (long long)rows[g], (long long)(rows[g] * gsize[g]));
            return -1;
        }
    return total;
}

static void put_be(uint8_t *p, uint64_t v, Py_ssize_t size)
{
    for (Py_ssize_t k = size - 1; k >= 0; k--, v >>= 8)
        p[k] = (uint8_t)v;
}

/* The records one after another into o (planned_size bytes). */
static void join_records(const Args *a, PyObject *bodies, PyObject *parts, PyObject *props, Py_ssize_t crc_at,
                         Py_ssize_t plen_size, uint8_t *o)
{
    const int64_t *grp = a->grp.buf, *pidx = a->pidx.buf, *gsize = a->gsize.buf;
    const uint8_t *next[MAX_GROUPS];
    for (Py_ssize_t g = 0; g < a->groups; g++)
        next[g] = a->fixed[g].buf;
    for (Py_ssize_t i = 0; i < a->n; i++) {
        int64_t g = grp[i], fs = gsize[g];
        PyObject *b = PyList_GET_ITEM(bodies, i), *t = PyList_GET_ITEM(parts, pidx[i]),
                 *q = PyList_GET_ITEM(props, i);
        Py_ssize_t bl = PyBytes_GET_SIZE(b), tl = PyBytes_GET_SIZE(t), ql = PyBytes_GET_SIZE(q);
        memcpy(o, next[g], fs);
        next[g] += fs;
        put_be(o + crc_at, rmq_crc32((const uint8_t *)PyBytes_AS_STRING(b), bl) & 0x7FFFFFFFu, 4);
        o += fs;
        memcpy(o, PyBytes_AS_STRING(b), bl);
        o += bl;
        memcpy(o, PyBytes_AS_STRING(t), tl);
        o += tl;
        put_be(o, (uint64_t)ql, plen_size);
        o += plen_size;
        memcpy(o, PyBytes_AS_STRING(q), ql);
        o += ql;
    }
}

PyDoc_STRVAR(encode_join_doc,
"encode_join(fixed, gsize, grp, bodies, parts, pidx, props, crc_at, plen_size) -> bytes\n\n"
"Records one after another: record i is the next row of fixed[grp[i]] (rows of gsize[g]\n"
"bytes, taken in order) with crc32(bodies[i]) & 0x7FFFFFFF big-endian at crc_at, then\n"
"bodies[i], parts[pidx[i]], len(props[i]) in plen_size big-endian bytes and props[i].\n"
"grp, pidx, gsize: int64 arrays; bodies, parts, props: lists of bytes.");

static PyObject *k_encode_join(PyObject *self, PyObject *args)
{
    PyObject *fixed, *gso, *grpo, *bodies, *parts, *pidxo, *props, *res = NULL;
    Py_ssize_t crc_at, plen_size;
    Args a = {0};
    if (!PyArg_ParseTuple(args, "OOOOOOOnn:encode_join", &fixed, &gso, &grpo, &bodies, &parts, &pidxo, &props,
                          &crc_at, &plen_size))
        return NULL;
    if (!PyList_Check(fixed) && !PyTuple_Check(fixed))
        return PyErr_Format(PyExc_TypeError, "encode_join: fixed must be a list of buffers");
    if (crc_at < 0 || (plen_size != 1 && plen_size != 2 && plen_size != 4))
        return PyErr_Format(PyExc_ValueError, "encode_join: crc_at %zd or plen_size %zd out of range", crc_at,
                            plen_size);
    a.groups = PySequence_Fast_GET_SIZE(fixed);
    if (a.groups > MAX_GROUPS)
        return PyErr_Format(PyExc_ValueError, "encode_join: at most %d groups, got %zd", MAX_GROUPS, a.groups);
    if (i64_buffer(grpo, &a.grp, "grp") < 0)
        goto done;
    a.got = 1;
    if (i64_buffer(pidxo, &a.pidx, "pidx") < 0)
        goto done;
    a.got = 2;
    if (i64_buffer(gso, &a.gsize, "gsize") < 0)
        goto done;
    a.got = 3;
    a.n = a.grp.len / 8;
    if (a.pidx.len != a.grp.len || a.gsize.len / 8 != a.groups) {
        PyErr_Format(PyExc_ValueError, "encode_join: grp and pidx differ in length, or gsize is not one a group");
        goto done;
    }
    for (; a.nfixed < a.groups; a.nfixed++)
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(fixed, a.nfixed), &a.fixed[a.nfixed], PyBUF_C_CONTIGUOUS) < 0)
            goto done;
    if (bytes_list(bodies, a.n, "bodies") < 0 || bytes_list(props, a.n, "props") < 0 ||
        bytes_list(parts, -1, "parts") < 0)
        goto done;
    int64_t total = planned_size(&a, bodies, parts, props, crc_at, plen_size);
    if (total < 0)
        goto done;
    res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (res != NULL)
        join_records(&a, bodies, parts, props, crc_at, plen_size, (uint8_t *)PyBytes_AS_STRING(res));
done:
    args_release(&a);
    return res;
}

PyMethodDef encode_methods[] = {
    {"encode_join", k_encode_join, METH_VARARGS, encode_join_doc},
    {NULL, NULL, 0, NULL},
};
