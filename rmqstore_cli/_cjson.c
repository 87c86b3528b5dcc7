/*
 * rmqstore_cli._cjson: dump-commitlog's JSON lines for a block of records in one C loop
 * (the optional compiled twin of the per-record reference, render.message_dict +
 * render.to_json_bytes; rmqstore_cli/jsonblock.py prepares the arguments and renders
 * every record this leaves out by the reference, in its place).
 *
 * A record is written only when the result is certain to equal the reference: its topic
 * and every name and value of its PROPERTIES (MessageDecoder#string2messageProperties:
 * "name\x01value\x02" pairs) hold no byte JSON escapes and are valid UTF-8 with no
 * character a terminal acts on (render._UNSAFE_UTF8), and its PROPERTIES are empty or
 * every pair has a non-empty name and value, no name twice, at most PAIR_CAP pairs, and
 * neither address is an IPv4-mapped IPv6 one (whose text Python's ipaddress changed between
 * versions; every other address is written here, IPv6 as IPv6Address.compressed).
 * Otherwise ok[i] is cleared and the caller takes the reference for it.
 *
 * Every argument is checked (buffer kinds, item sizes, shapes, and each record's
 * positions against the mapped file before it is read); the output buffer's room is
 * checked before each record is written. A bad argument raises ValueError, never reads
 * or writes outside a buffer. The loop runs without the GIL.
 *
 * No layout constant lives here: the caller passes the record fields as numbers and
 * positions (jsonblock.py, from formats/commitlog.py), and the sizes of the port and the
 * physical offset that the offset msgId (MessageDecoder#createMessageId) is made of.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "store/_v6text.h"

#define NUMS 15       /* columns of nums, as jsonblock.NUMS */
#define LOCS 10       /* columns of locs, as jsonblock.LOCS */
#define NLITS 25      /* literal texts between the values */
#define NFOUND 3      /* TAGS, KEYS, UNIQ_KEY */
#define PAIR_CAP 256  /* more PROPERTIES pairs: the reference (keeps the duplicate check linear-ish) */
#define NUM_MAX 20    /* "-9223372036854775808" */
#define HOST_TEXT 41  /* "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]" (IPv4: "255.255.255.255") */

enum { N_PHY, N_TOTAL, N_V2, N_CRC, N_QID, N_FLAG, N_QOFF, N_SYSFLAG, N_BORN_TS, N_BORN_PORT,
       N_STORE_TS, N_STORE_PORT, N_RECONSUME, N_PREPARED, N_BODY_SIZE };
enum { L_BORN_AT, L_BORN_LEN, L_STORE_AT, L_STORE_LEN, L_TOPIC_AT, L_TOPIC_LEN, L_PROPS_AT, L_PROPS_LEN,
       L_BODY_AT, L_PHY_AT };
enum { BODY_NONE, BODY_BASE64, BODY_HEX };
/* render's buffer arguments by position (8 and 9 are body_mode and props_on, numbers) */
enum { A_A, A_NUMS, A_LOCS, A_OK, A_LITS, A_LIT_OFF, A_NAMES, A_NAME_LENS, A_OUT = 10, A_ENDS, NARGS };

/* bytes by what a name or value may hold: 0 printable ASCII JSON leaves alone, 1 the others
 * (controls, '"', '\\', DEL), 2 the lead byte of a UTF-8 character */
static uint8_t CLASS[256];
static const char HEXU[] = "0123456789ABCDEF";
static const char HEXL[] = "0123456789abcdef";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

typedef struct {
    const uint8_t *a;
    int64_t alen, n;
    const int64_t *nums, *locs, *lit_off, *name_lens;
    uint8_t *ok, *out;
    int64_t *ends, *pairs;
    const uint8_t *lits, *names;
    int64_t name_w, out_len, lit_total, body_mode, port_size, phy_size;
    int props_on;
    int64_t bad;      /* the record that stopped the loop, or -1 */
    const char *why;  /* and why */
} Job;

/* ------------------------------------------------------------------ arguments */

static int little_endian(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Take a C-contiguous buffer of ndim dimensions whose items are one of `kinds` (struct
 * letters) of `itemsize` bytes; ValueError naming `what` otherwise. */
static int take(PyObject *obj, Py_buffer *v, int writable, const char *kinds, Py_ssize_t itemsize, int ndim,
                const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags) < 0)
        return -1;
    const char *f = v->format ? v->format : "B";
    if (*f == '@' || *f == '=' || (*f == '<' && little_endian()))
        f++;
    if (v->itemsize != itemsize || f[0] == '\0' || f[1] != '\0' || !strchr(kinds, f[0]) || v->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "_cjson: %s must be a %d-D C-contiguous array of %zd-byte items (%s)",
                     what, ndim, itemsize, kinds);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static int fail(const char *what)
{
    PyErr_Format(PyExc_ValueError, "_cjson: %s", what);
    return -1;
}

/* Offsets into a table of `len` bytes: count+1 non-decreasing values from >= 0 to <= len. */
static int check_offsets(const int64_t *off, int64_t count, int64_t len, const char *what)
{
    if (off[0] < 0)
        return fail(what);
    for (int64_t k = 0; k < count; k++)
        if (off[k + 1] < off[k])
            return fail(what);
    return off[count] <= len ? 0 : fail(what);
}

/* The shapes and tables that do not depend on a record. */
static int check_shapes(Job *J, Py_buffer *v)
{
    int64_t n = v[1].shape[0];
    if (v[1].shape[1] != NUMS || v[2].shape[0] != n || v[2].shape[1] != LOCS)
        return fail("nums must be (n, 15) and locs (n, 10)");
    if (v[3].shape[0] != n || v[A_ENDS].shape[0] != n)
        return fail("ok and ends must have a row per record");
    if (v[A_LIT_OFF].shape[0] != NLITS + 1)
        return fail("lit_off must have 26 rows");
    if (check_offsets(J->lit_off, NLITS, v[A_LITS].shape[0], "lit_off out of lits") < 0)
        return -1;
    if (v[A_NAMES].shape[0] != NFOUND || v[A_NAME_LENS].shape[0] != NFOUND)
        return fail("names must be (3, width) and name_lens (3,)");
    for (int s = 0; s < NFOUND; s++)
        if (J->name_lens[s] < 1 || J->name_lens[s] > v[A_NAMES].shape[1])
            return fail("name_lens must be within names' width");
    if (J->body_mode < BODY_NONE || J->body_mode > BODY_HEX)
        return fail("body_mode must be 0, 1 or 2");
    if (J->port_size < 0 || J->port_size > 64 || J->phy_size < 0 || J->phy_size > 64)
        return fail("port_size and phy_size must be within 0..64");
    J->n = n;
    J->name_w = v[A_NAMES].shape[1];
    J->lit_total = J->lit_off[NLITS] - J->lit_off[0];
    return 0;
}

/* ------------------------------------------------------------------ checking text */

/* Length of the valid UTF-8 character at a[j] (a non-ASCII lead byte), 0 when it is invalid,
 * truncated or one render._UNSAFE_UTF8 escapes (C1 controls, marks, separators, bidi). */
static int utf8_len(const uint8_t *a, int64_t j, int64_t end)
{
    uint8_t b0 = a[j], b1, b2, b3;
    if (b0 < 0xC2 || b0 > 0xF4)
        return 0;
    if (b0 < 0xE0) {
        if (j + 1 >= end)
            return 0;
        b1 = a[j + 1];
        return (b1 < 0x80 || b1 > 0xBF || (b0 == 0xC2 && b1 <= 0x9F)) ? 0 : 2;
    }
    if (b0 < 0xF0) {
        if (j + 2 >= end)
            return 0;
        b1 = a[j + 1], b2 = a[j + 2];
        uint8_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;  /* no surrogates */
        if (b1 < lo || b1 > hi || b2 < 0x80 || b2 > 0xBF)
            return 0;
        if (b0 == 0xE2 && ((b1 == 0x80 && (b2 == 0x8E || b2 == 0x8F || (b2 >= 0xA8 && b2 <= 0xAE)))
                           || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9)))
            return 0;
        return 3;
    }
    if (j + 3 >= end)
        return 0;
    b1 = a[j + 1], b2 = a[j + 2], b3 = a[j + 3];
    uint8_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (b1 < lo || b1 > hi || b2 < 0x80 || b2 > 0xBF || b3 < 0x80 || b3 > 0xBF)
        return 0;
    return 4;
}

/* Where the text from j ends (at a `stop` byte or at end), or -1 at a byte that needs a
 * JSON escape or is not plain UTF-8. */
static int64_t text_end(const uint8_t *a, int64_t j, int64_t end, uint8_t stop)
{
    while (j < end) {
        uint8_t b = a[j], c = CLASS[b];
        if (c == 0) {
            j++;
        } else if (b == stop) {
            return j;
        } else if (c == 2) {
            int k = utf8_len(a, j, end);
            if (!k)
                return -1;
            j += k;
        } else {
            return -1;
        }
    }
    return j;
}

/* Split PROPERTIES a[pa:pa+pl] into J->pairs (name start, end, value start, end) and fill
 * found with the value ranges of TAGS, KEYS, UNIQ_KEY (-1: absent). Returns the number of
 * pairs, or -1 when the record must take the reference. */
static int64_t split_properties(const Job *J, int64_t pa, int64_t pl, int64_t found[NFOUND][2])
{
    const uint8_t *a = J->a;
    int64_t end = pa + pl, j = pa, n = 0, *pr = J->pairs;
    for (int s = 0; s < NFOUND; s++)
        found[s][0] = found[s][1] = -1;
    while (j < end) {
        int64_t name_end = text_end(a, j, end, 1);
        if (name_end < 0 || name_end == j || name_end == end || n == PAIR_CAP)
            return -1;
        int64_t value_end = text_end(a, name_end + 1, end, 2), len = name_end - j;
        if (value_end < 0 || value_end == name_end + 1)
            return -1;
        for (int64_t p = 0; p < n; p++)  /* a name twice: the parser keeps the last value in the first place */
            if (pr[4 * p + 1] - pr[4 * p] == len && memcmp(a + pr[4 * p], a + j, (size_t)len) == 0)
                return -1;
        pr[4 * n] = j, pr[4 * n + 1] = name_end, pr[4 * n + 2] = name_end + 1, pr[4 * n + 3] = value_end;
        n++;
        for (int s = 0; s < NFOUND; s++)
            if (len == J->name_lens[s] && memcmp(a + j, J->names + s * J->name_w, (size_t)len) == 0)
                found[s][0] = name_end + 1, found[s][1] = value_end;
        j = value_end + 1;  /* past the \x02; a pair must follow unless it was the last byte */
    }
    return n;
}

/* ------------------------------------------------------------------ writing */

/* Copy n bytes: most pieces of a line are a few bytes long, where a call to memcpy costs more
 * than the copy, so short ones are two overlapping fixed-size moves (inlined; each stays
 * inside [src, src+n) and [out+o, out+o+n)). */
static inline int64_t put(uint8_t *out, int64_t o, const void *src, int64_t n)
{
    const uint8_t *s = src;
    uint8_t *d = out + o;
    if (n >= 16 && n <= 32) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8 && n < 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n > 32) {
        memcpy(d, s, (size_t)n);
    } else {
        for (int64_t k = 0; k < n; k++)
            d[k] = s[k];
    }
    return o + n;
}

static inline int64_t put_lit(const Job *J, int64_t o, int k)
{
    return put(J->out, o, J->lits + J->lit_off[k], J->lit_off[k + 1] - J->lit_off[k]);
}

static char DIGITS2[200];  /* "00".."99" */

/* v < 10^8 as exactly `nd` digits ending at out[end] (exclusive), two per 32-bit division. */
static inline void put_digits(uint8_t *out, int64_t end, uint32_t v, int nd)
{
    while (nd >= 2) {
        uint32_t r = v % 100;
        v /= 100;
        end -= 2;
        memcpy(out + end, DIGITS2 + 2 * r, 2);
        nd -= 2;
    }
    if (nd)
        out[end - 1] = (uint8_t)('0' + v);
}

/* How many digits v < 10^8 has (at least 1). */
static inline int ndigits(uint32_t v)
{
    return v < 10000 ? (v < 100 ? 1 + (v >= 10) : 3 + (v >= 1000))
                     : (v < 1000000 ? 5 + (v >= 100000) : 7 + (v >= 10000000));
}

/* Decimal text of an int64 (Java's Long.toString): cut into chunks of 8 digits, each
 * written with 32-bit divisions (a 64-bit division costs several times more). */
static inline int64_t put_int(uint8_t *out, int64_t o, int64_t v)
{
    if ((uint64_t)v < 10) {  /* most of a record's counters and flags */
        out[o] = (uint8_t)('0' + v);
        return o + 1;
    }
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (v < 0)
        out[o++] = '-';
    if (u < 100000000u) {
        int nd = ndigits((uint32_t)u);
        put_digits(out, o + nd, (uint32_t)u, nd);
        return o + nd;
    }
    uint32_t lo = (uint32_t)(u % 100000000u);
    u /= 100000000u;
    if (u < 100000000u) {
        int nd = ndigits((uint32_t)u);
        put_digits(out, o + nd, (uint32_t)u, nd);
        o += nd;
    } else {
        uint32_t top = (uint32_t)(u / 100000000u), mid = (uint32_t)(u % 100000000u);  /* top < 10^4 */
        int nd = ndigits(top);
        put_digits(out, o + nd, top, nd);
        put_digits(out, o + nd + 8, mid, 8);
        o += nd + 8;
    }
    put_digits(out, o + 8, lo, 8);
    return o + 8;
}

static int64_t put_hex(uint8_t *out, int64_t o, const uint8_t *src, int64_t n, const char *digits)
{
    for (int64_t k = 0; k < n; k++) {
        out[o++] = (uint8_t)digits[src[k] >> 4];
        out[o++] = (uint8_t)digits[src[k] & 15];
    }
    return o;
}

static int64_t put_base64(uint8_t *out, int64_t o, const uint8_t *s, int64_t n)
{
    int64_t k = 0;
    for (; k + 3 <= n; k += 3) {
        uint32_t v = (uint32_t)s[k] << 16 | (uint32_t)s[k + 1] << 8 | s[k + 2];
        out[o] = B64[v >> 18], out[o + 1] = B64[(v >> 12) & 63], out[o + 2] = B64[(v >> 6) & 63];
        out[o + 3] = B64[v & 63];
        o += 4;
    }
    if (n - k) {
        uint32_t v = (uint32_t)s[k] << 16 | (n - k == 2 ? (uint32_t)s[k + 1] << 8 : 0);
        out[o] = B64[v >> 18], out[o + 1] = B64[(v >> 12) & 63];
        out[o + 2] = n - k == 2 ? B64[(v >> 6) & 63] : '=';
        out[o + 3] = '=';
        o += 4;
    }
    return o;
}

/* The IPv6 address at p is IPv4-mapped (::ffff:0:0/96), which Python's ipaddress writes in
 * one form or another by version: such a record takes the reference. */
static int v4_mapped(const uint8_t *p)
{
    static const uint8_t head[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    return memcmp(p, head, 12) == 0;
}

/* An address: the `len` (4 or 16) bytes at a[at], "a.b.c.d" or "[v6]". */
static int64_t put_host(const Job *J, int64_t o, int64_t at, int64_t len)
{
    if (len != 4)
        return put_v6(J->out, o, J->a + at);
    for (int k = 0; k < 4; k++) {
        if (k)
            J->out[o++] = '.';
        o = put_int(J->out, o, J->a[at + k]);
    }
    return o;
}

static int64_t put_quoted_or_null(const Job *J, int64_t o, const int64_t r[2])
{
    if (r[0] < 0)
        return put(J->out, o, "null", 4);
    J->out[o++] = '"';
    o = put(J->out, o, J->a + r[0], r[1] - r[0]);
    J->out[o++] = '"';
    return o;
}

/* ["k1","k2"]: KEYS split at spaces, empty words dropped (render.split_keys). */
static int64_t put_keys(const Job *J, int64_t o, const int64_t r[2])
{
    uint8_t *out = J->out;
    int first = 1;
    out[o++] = '[';
    for (int64_t j = r[0]; r[0] >= 0 && j < r[1]; j++) {
        int64_t w = j;
        while (j < r[1] && J->a[j] != ' ')
            j++;
        if (j > w) {
            if (!first)
                out[o++] = ',';
            out[o++] = '"';
            o = put(out, o, J->a + w, j - w);
            out[o++] = '"';
            first = 0;
        }
    }
    out[o++] = ']';
    return o;
}

/* "properties":{...},"properties_string":"..." between their literals (15, 16, 17). */
static int64_t put_properties(const Job *J, int64_t o, int64_t np, int64_t end)
{
    const int64_t *pr = J->pairs;
    uint8_t *out = J->out;
    o = put_lit(J, o, 15);
    for (int64_t p = 0; p < np; p++) {
        o = put(out, o, p ? ",\"" : "\"", p ? 2 : 1);
        o = put(out, o, J->a + pr[4 * p], pr[4 * p + 1] - pr[4 * p]);
        o = put(out, o, "\":\"", 3);
        o = put(out, o, J->a + pr[4 * p + 2], pr[4 * p + 3] - pr[4 * p + 2]);
        out[o++] = '"';
    }
    o = put_lit(J, o, 16);
    for (int64_t p = 0; p < np; p++) {
        o = put(out, o, J->a + pr[4 * p], pr[4 * p + 1] - pr[4 * p]);
        o = put(out, o, "\\u0001", 6);
        o = put(out, o, J->a + pr[4 * p + 2], pr[4 * p + 3] - pr[4 * p + 2]);
        if (pr[4 * p + 3] < end)
            o = put(out, o, "\\u0002", 6);
    }
    return o;
}

/* ------------------------------------------------------------------ one record */

static int within(const Job *J, int64_t at, int64_t len)
{
    return at >= 0 && len >= 0 && at <= J->alen && len <= J->alen - at;
}

/* Every byte the record's line reads lies in the file, and each address is 4 or 16 bytes. */
static int record_in_bounds(const Job *J, const int64_t *nu, const int64_t *lo)
{
    for (int w = 0; w < 2; w++)
        if ((lo[2 * w + 1] != 4 && lo[2 * w + 1] != 16) || !within(J, lo[2 * w], lo[2 * w + 1]))
            return 0;
    return within(J, lo[L_TOPIC_AT], lo[L_TOPIC_LEN]) && within(J, lo[L_PROPS_AT], lo[L_PROPS_LEN])
        && within(J, lo[L_BODY_AT], nu[N_BODY_SIZE]) && within(J, lo[L_PHY_AT], J->phy_size)
        && lo[L_STORE_LEN] >= 0 && lo[L_STORE_LEN] <= J->alen
        && within(J, lo[L_STORE_AT], lo[L_STORE_LEN] + J->port_size);
}

/* The most bytes the record's line can take (see each writer). */
static int64_t line_bound(const Job *J, const int64_t *nu, const int64_t *lo)
{
    int64_t b = J->lit_total + 16 * (NUM_MAX + 1) + 64 + lo[L_TOPIC_LEN] + 16 * lo[L_PROPS_LEN] + 2 * HOST_TEXT;
    b += 2 * (lo[L_STORE_LEN] + J->port_size + J->phy_size);
    if (J->body_mode == BODY_BASE64)
        b += (nu[N_BODY_SIZE] + 2) / 3 * 4;
    else if (J->body_mode == BODY_HEX)
        b += 2 * nu[N_BODY_SIZE];
    return b;
}

static int64_t put_record(const Job *J, int64_t o, const int64_t *nu, const int64_t *lo, int64_t np,
                          int64_t found[NFOUND][2])
{
    uint8_t *out = J->out;
    o = put_lit(J, o, 0);
    o = put_int(out, o, nu[N_PHY]);
    o = put_lit(J, o, 1);
    o = put_int(out, o, nu[N_TOTAL]);
    o = put_lit(J, o, 2);
    o = put(out, o, nu[N_V2] ? "v2" : "v1", 2);
    for (int k = N_CRC; k <= N_BORN_TS; k++) {  /* body_crc .. born_timestamp */
        o = put_lit(J, o, k);
        o = put_int(out, o, nu[k]);
    }
    o = put_lit(J, o, 9);
    o = put_host(J, o, lo[L_BORN_AT], lo[L_BORN_LEN]);
    out[o++] = ':';
    o = put_int(out, o, nu[N_BORN_PORT]);
    o = put_lit(J, o, 10);
    o = put_int(out, o, nu[N_STORE_TS]);
    o = put_lit(J, o, 11);
    o = put_host(J, o, lo[L_STORE_AT], lo[L_STORE_LEN]);
    out[o++] = ':';
    o = put_int(out, o, nu[N_STORE_PORT]);
    for (int k = 12; k <= 13; k++) {  /* reconsume_times, prepared_transaction_offset */
        o = put_lit(J, o, k);
        o = put_int(out, o, nu[k]);
    }
    o = put_lit(J, o, 14);
    o = put(out, o, J->a + lo[L_TOPIC_AT], lo[L_TOPIC_LEN]);
    if (J->props_on)
        o = put_properties(J, o, np, lo[L_PROPS_AT] + lo[L_PROPS_LEN]);
    o = put_lit(J, o, 17);
    o = put_quoted_or_null(J, o, found[0]);
    o = put_lit(J, o, 18);
    o = put_keys(J, o, found[1]);
    o = put_lit(J, o, 19);
    o = put_quoted_or_null(J, o, found[2]);
    o = put_lit(J, o, 20);  /* msgId: the store address and port, then the physical offset */
    o = put_hex(out, o, J->a + lo[L_STORE_AT], lo[L_STORE_LEN] + J->port_size, HEXU);
    o = put_hex(out, o, J->a + lo[L_PHY_AT], J->phy_size, HEXU);
    o = put_lit(J, o, 21);
    o = put_int(out, o, nu[N_BODY_SIZE]);
    if (J->body_mode != BODY_NONE) {
        o = put_lit(J, o, 22);
        if (J->body_mode == BODY_BASE64)
            o = put_base64(out, o, J->a + lo[L_BODY_AT], nu[N_BODY_SIZE]);
        else
            o = put_hex(out, o, J->a + lo[L_BODY_AT], nu[N_BODY_SIZE], HEXL);
        o = put_lit(J, o, 23);
    }
    return put_lit(J, o, 24);
}

/* Whether an address of the record is an IPv4-mapped IPv6 one (see v4_mapped). */
static int mapped_host(const Job *J, const int64_t *lo)
{
    return (lo[L_BORN_LEN] == 16 && v4_mapped(J->a + lo[L_BORN_AT]))
        || (lo[L_STORE_LEN] == 16 && v4_mapped(J->a + lo[L_STORE_AT]));
}

/* Every record's line; returns the bytes written, or -1 with J->bad and J->why set. */
static int64_t render_all(Job *J)
{
    int64_t o = 0, found[NFOUND][2];
    for (int64_t i = 0; i < J->n; i++) {
        const int64_t *nu = J->nums + NUMS * i, *lo = J->locs + LOCS * i;
        int64_t np = -1;
        if (J->ok[i]) {
            if (!record_in_bounds(J, nu, lo)) {
                J->bad = i, J->why = "a position outside the file or an address neither 4 nor 16 bytes";
                return -1;
            }
            int64_t ta = lo[L_TOPIC_AT], te = ta + lo[L_TOPIC_LEN];
            if (!mapped_host(J, lo) && text_end(J->a, ta, te, 0) == te)
                np = split_properties(J, lo[L_PROPS_AT], lo[L_PROPS_LEN], found);
        }
        if (np < 0) {
            J->ok[i] = 0;
            J->ends[i] = o;
            continue;
        }
        if (line_bound(J, nu, lo) > J->out_len - o) {
            J->bad = i, J->why = "the out buffer is too small";
            return -1;
        }
        o = put_record(J, o, nu, lo, np, found);
        J->ends[i] = o;
    }
    return o;
}

/* ------------------------------------------------------------------ columns */

/* Where columns() reads each field of a record (MessageDecoder#decode's layout): offsets
 * and sizes from formats/commitlog.py, passed by the caller (jsonblock.LAYOUT) in this order;
 * a size is 1, 2, 4 or 8 (a signed big-endian int). Offsets of HEAD fields are from the
 * record's start, STORETIMESTAMP's from after BORNHOST, the tail's from after STOREHOST. */
enum { Y_HEAD_SIZE, Y_PHY_AT, Y_PHY_SIZE, Y_TOTAL_AT, Y_TOTAL_SIZE, Y_MAGIC_AT, Y_MAGIC_SIZE, Y_MAGIC_V2,
       Y_CRC_AT, Y_CRC_SIZE, Y_QID_AT, Y_QID_SIZE, Y_FLAG_AT, Y_FLAG_SIZE, Y_QOFF_AT, Y_QOFF_SIZE,
       Y_SYSFLAG_AT, Y_SYSFLAG_SIZE, Y_BORN_TS_AT, Y_BORN_TS_SIZE, Y_BORN_V6, Y_STORE_V6, Y_ADDR_V4, Y_ADDR_V6,
       Y_PORT_AT, Y_PORT_SIZE, Y_STORE_TS_AT, Y_STORE_TS_SIZE, Y_AFTER_BORN, Y_RECONSUME_AT, Y_RECONSUME_SIZE,
       Y_PREPARED_AT, Y_PREPARED_SIZE, Y_BODY_LEN_AT, Y_BODY_LEN_SIZE, Y_TOPIC_LEN_V1, Y_TOPIC_LEN_V2,
       Y_PROPS_LEN_SIZE, LAYOUT_N };
/* the slots that are sizes of a signed field */
static const int SIZE_SLOTS[] = {Y_PHY_SIZE, Y_TOTAL_SIZE, Y_MAGIC_SIZE, Y_CRC_SIZE, Y_QID_SIZE, Y_FLAG_SIZE,
                                 Y_QOFF_SIZE, Y_SYSFLAG_SIZE, Y_BORN_TS_SIZE, Y_PORT_SIZE, Y_STORE_TS_SIZE,
                                 Y_RECONSUME_SIZE, Y_PREPARED_SIZE, Y_BODY_LEN_SIZE, Y_TOPIC_LEN_V1,
                                 Y_TOPIC_LEN_V2, Y_PROPS_LEN_SIZE};

/* The signed big-endian int of s bytes (1, 2, 4 or 8) at p. */
static inline int64_t be_int(const uint8_t *p, int64_t s)
{
    uint64_t v = 0;
    switch (s) {
    case 8:
        memcpy(&v, p, 8);
        return (int64_t)__builtin_bswap64(v);
    case 4: {
        uint32_t w;
        memcpy(&w, p, 4);
        return (int32_t)__builtin_bswap32(w);
    }
    case 2:
        return (int16_t)(uint16_t)((unsigned)p[0] << 8 | p[1]);
    default:
        return (int8_t)p[0];
    }
}

/* The magic, read unsigned (a V1/V2 test only). */
static inline uint64_t be_uint(const uint8_t *p, int64_t s)
{
    uint64_t v = 0;
    for (int64_t k = 0; k < s; k++)
        v = v << 8 | p[k];
    return v;
}

/* Field `size` bytes at `at` lies in a[0:alen]. */
#define IN(at, size) ((at) >= 0 && (at) <= alen - (size))

/* nums and locs (render's rows) of the record at p; 0, or -1 when a field lies outside a. */
static int columns_one(const int64_t *Y, const uint8_t *a, int64_t alen, int64_t p, int64_t *nu, int64_t *lo)
{
    if (!IN(p, Y[Y_HEAD_SIZE]))
        return -1;
    const uint8_t *h = a + p;
    int64_t sysf = be_int(h + Y[Y_SYSFLAG_AT], Y[Y_SYSFLAG_SIZE]);
    int64_t born_addr = (sysf & Y[Y_BORN_V6]) ? Y[Y_ADDR_V6] : Y[Y_ADDR_V4];
    int64_t store_addr = (sysf & Y[Y_STORE_V6]) ? Y[Y_ADDR_V6] : Y[Y_ADDR_V4];
    int64_t born_at = p + Y[Y_HEAD_SIZE], born_port_at = born_at + born_addr + Y[Y_PORT_AT];
    int64_t after_born = born_at + born_addr + Y[Y_PORT_SIZE];
    int64_t store_at = after_born + Y[Y_AFTER_BORN], store_port_at = store_at + store_addr + Y[Y_PORT_AT];
    int64_t tail = store_at + store_addr + Y[Y_PORT_SIZE];
    int64_t body_len_at = tail + Y[Y_BODY_LEN_AT];
    if (!IN(born_port_at, Y[Y_PORT_SIZE]) || !IN(after_born + Y[Y_STORE_TS_AT], Y[Y_STORE_TS_SIZE])
        || !IN(store_port_at, Y[Y_PORT_SIZE]) || !IN(tail + Y[Y_RECONSUME_AT], Y[Y_RECONSUME_SIZE])
        || !IN(tail + Y[Y_PREPARED_AT], Y[Y_PREPARED_SIZE]) || !IN(body_len_at, Y[Y_BODY_LEN_SIZE]))
        return -1;
    int64_t body_len = be_int(a + body_len_at, Y[Y_BODY_LEN_SIZE]);
    int64_t body_at = body_len_at + Y[Y_BODY_LEN_SIZE];
    int v2 = be_uint(h + Y[Y_MAGIC_AT], Y[Y_MAGIC_SIZE]) == (uint64_t)Y[Y_MAGIC_V2];
    int64_t tls = v2 ? Y[Y_TOPIC_LEN_V2] : Y[Y_TOPIC_LEN_V1];
    int64_t topic_len_at = body_at + (body_len > 0 ? body_len : 0);
    if (!IN(topic_len_at, tls))
        return -1;
    int64_t topic_len = be_int(a + topic_len_at, tls), topic_at = topic_len_at + tls;
    int64_t props_len_at = topic_at + (topic_len > 0 ? topic_len : 0);
    if (!IN(props_len_at, Y[Y_PROPS_LEN_SIZE]))
        return -1;
    nu[N_PHY] = be_int(h + Y[Y_PHY_AT], Y[Y_PHY_SIZE]);
    nu[N_TOTAL] = be_int(h + Y[Y_TOTAL_AT], Y[Y_TOTAL_SIZE]);
    nu[N_V2] = v2;
    nu[N_CRC] = be_int(h + Y[Y_CRC_AT], Y[Y_CRC_SIZE]);
    nu[N_QID] = be_int(h + Y[Y_QID_AT], Y[Y_QID_SIZE]);
    nu[N_FLAG] = be_int(h + Y[Y_FLAG_AT], Y[Y_FLAG_SIZE]);
    nu[N_QOFF] = be_int(h + Y[Y_QOFF_AT], Y[Y_QOFF_SIZE]);
    nu[N_SYSFLAG] = sysf;
    nu[N_BORN_TS] = be_int(h + Y[Y_BORN_TS_AT], Y[Y_BORN_TS_SIZE]);
    nu[N_BORN_PORT] = be_int(a + born_port_at, Y[Y_PORT_SIZE]);
    nu[N_STORE_TS] = be_int(a + after_born + Y[Y_STORE_TS_AT], Y[Y_STORE_TS_SIZE]);
    nu[N_STORE_PORT] = be_int(a + store_port_at, Y[Y_PORT_SIZE]);
    nu[N_RECONSUME] = be_int(a + tail + Y[Y_RECONSUME_AT], Y[Y_RECONSUME_SIZE]);
    nu[N_PREPARED] = be_int(a + tail + Y[Y_PREPARED_AT], Y[Y_PREPARED_SIZE]);
    nu[N_BODY_SIZE] = body_len;
    lo[L_BORN_AT] = born_at, lo[L_BORN_LEN] = born_addr;
    lo[L_STORE_AT] = store_at, lo[L_STORE_LEN] = store_addr;
    lo[L_TOPIC_AT] = topic_at, lo[L_TOPIC_LEN] = topic_len;
    lo[L_PROPS_AT] = props_len_at + Y[Y_PROPS_LEN_SIZE];
    lo[L_PROPS_LEN] = be_int(a + props_len_at, Y[Y_PROPS_LEN_SIZE]);
    lo[L_BODY_AT] = body_at, lo[L_PHY_AT] = p + Y[Y_PHY_AT];
    return 0;
}
#undef IN

static int check_layout(const int64_t *Y)
{
    for (int k = 0; k < LAYOUT_N; k++)  /* small offsets, sizes and flags; the magic is any 32 bits */
        if (Y[k] < 0 || Y[k] > (k == Y_MAGIC_V2 ? (int64_t)UINT32_MAX : 4096))
            return fail("columns: a layout value out of range");
    for (size_t k = 0; k < sizeof SIZE_SLOTS / sizeof SIZE_SLOTS[0]; k++) {
        int64_t s = Y[SIZE_SLOTS[k]];
        if (s != 1 && s != 2 && s != 4 && s != 8)
            return fail("columns: a field size must be 1, 2, 4 or 8");
    }
    return 0;
}

PyDoc_STRVAR(columns_doc,
"columns(a, pos, layout, nums, locs) -> None\n\n"
"render's nums (n, 15) and locs (n, 10) of the records starting at pos (int64, n) of the\n"
"mapped file a, read from their bytes by layout (jsonblock.LAYOUT: where each field lies,\n"
"from formats/commitlog.py): the one pass that replaces a column gather per field. Raises\n"
"ValueError when a field of some record lies outside a. Runs without the GIL.");

static PyObject *columns(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[5];
    Py_buffer v[5];
    if (!PyArg_ParseTuple(args, "OOOOO:columns", &o[0], &o[1], &o[2], &o[3], &o[4]))
        return NULL;
    static const struct { int writable; const char *kinds; Py_ssize_t size; int ndim; const char *what; } spec[5] = {
        {0, "B", 1, 1, "a"}, {0, "lq", 8, 1, "pos"}, {0, "lq", 8, 1, "layout"}, {1, "lq", 8, 2, "nums"},
        {1, "lq", 8, 2, "locs"}};
    int held = 0;
    for (; held < 5; held++)
        if (take(o[held], &v[held], spec[held].writable, spec[held].kinds, spec[held].size, spec[held].ndim,
                 spec[held].what) < 0)
            break;
    int64_t bad = -2;
    if (held == 5) {
        int64_t n = v[1].shape[0];
        if (v[2].shape[0] != LAYOUT_N)
            fail("columns: layout has the wrong length");
        else if (v[3].shape[0] != n || v[3].shape[1] != NUMS || v[4].shape[0] != n || v[4].shape[1] != LOCS)
            fail("columns: nums must be (n, 15) and locs (n, 10)");
        else if (check_layout(v[2].buf) == 0) {
            const int64_t *Y = v[2].buf, *pos = v[1].buf;
            const uint8_t *a = v[0].buf;
            int64_t alen = v[0].len, *nums = v[3].buf, *locs = v[4].buf;
            bad = -1;
            Py_BEGIN_ALLOW_THREADS
            for (int64_t i = 0; i < n; i++)
                if (columns_one(Y, a, alen, pos[i], nums + NUMS * i, locs + LOCS * i) < 0) {
                    bad = i;
                    break;
                }
            Py_END_ALLOW_THREADS
            if (bad >= 0)
                PyErr_Format(PyExc_ValueError, "_cjson.columns: record %lld: a field outside the file",
                             (long long)bad);
        }
    }
    for (int k = 0; k < held; k++)
        PyBuffer_Release(&v[k]);
    if (bad != -1)
        return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ the module */

PyDoc_STRVAR(render_doc,
"render(a, nums, locs, ok, lits, lit_off, names, name_lens, body_mode, props_on, out, ends,\n"
"       port_size, phy_size) -> int\n\n"
"Write the JSON line of every record whose ok is set into out; ends[i] is where record i's\n"
"line ends (the previous end for one left out). Records whose topic or PROPERTIES need the\n"
"reference get ok[i] = False. Returns the bytes written. nums (n, 15) and locs (n, 10) are\n"
"int64, a row per record; see rmqstore_cli/jsonblock.py.");

static PyObject *render(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *o[NARGS];
    Py_buffer v[NARGS];
    Job J;
    memset(&J, 0, sizeof J);
    if (!PyArg_ParseTuple(args, "OOOOOOOOLpOOLL:render", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &J.body_mode, &J.props_on, &o[A_OUT], &o[A_ENDS], &J.port_size, &J.phy_size))
        return NULL;
    static const struct { int writable; const char *kinds; Py_ssize_t size; int ndim; const char *what; } spec[NARGS] = {
        {0, "B", 1, 1, "a"}, {0, "lq", 8, 2, "nums"}, {0, "lq", 8, 2, "locs"}, {1, "?B", 1, 1, "ok"},
        {0, "B", 1, 1, "lits"}, {0, "lq", 8, 1, "lit_off"}, {0, "B", 1, 2, "names"}, {0, "lq", 8, 1, "name_lens"},
        {0, 0, 0, 0, 0}, {0, 0, 0, 0, 0}, {1, "B", 1, 1, "out"}, {1, "lq", 8, 1, "ends"}};
    int held = 0, failed = 0;
    for (; held < NARGS && !failed; held++)
        if (spec[held].kinds && take(o[held], &v[held], spec[held].writable, spec[held].kinds, spec[held].size,
                                     spec[held].ndim, spec[held].what) < 0)
            failed = 1;
    if (failed)
        held--;  /* the one that failed was released by take */
    int64_t size = -1;
    if (!failed) {
        J.a = v[A_A].buf, J.alen = v[A_A].len, J.nums = v[A_NUMS].buf, J.locs = v[A_LOCS].buf, J.ok = v[A_OK].buf;
        J.lits = v[A_LITS].buf, J.lit_off = v[A_LIT_OFF].buf, J.names = v[A_NAMES].buf;
        J.name_lens = v[A_NAME_LENS].buf, J.out = v[A_OUT].buf, J.out_len = v[A_OUT].len, J.ends = v[A_ENDS].buf;
        J.bad = -1;
        if (check_shapes(&J, v) == 0) {
            J.pairs = PyMem_RawMalloc(sizeof(int64_t) * 4 * PAIR_CAP);
            if (!J.pairs) {
                PyErr_NoMemory();
            } else {
                Py_BEGIN_ALLOW_THREADS
                size = render_all(&J);
                Py_END_ALLOW_THREADS
                PyMem_RawFree(J.pairs);
                if (size < 0)
                    PyErr_Format(PyExc_ValueError, "_cjson.render: record %lld: %s", (long long)J.bad, J.why);
            }
        }
    }
    for (int k = 0; k < held; k++)
        if (spec[k].kinds)
            PyBuffer_Release(&v[k]);
    return size < 0 ? NULL : PyLong_FromLongLong(size);
}

static PyMethodDef methods[] = {
    {"render", render, METH_VARARGS, render_doc},
    {"columns", columns, METH_VARARGS, columns_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cjson",
    "dump-commitlog's JSON lines in C (the optional twin of render.message_dict + to_json_bytes).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cjson(void)
{
    for (int d = 0; d < 100; d++)
        DIGITS2[2 * d] = (char)('0' + d / 10), DIGITS2[2 * d + 1] = (char)('0' + d % 10);
    for (int b = 0; b < 256; b++)
        CLASS[b] = b >= 0x80 ? 2 : (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') ? 0 : 1;
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddIntConstant(m, "BODY_NONE", BODY_NONE) < 0
              || PyModule_AddIntConstant(m, "BODY_BASE64", BODY_BASE64) < 0
              || PyModule_AddIntConstant(m, "BODY_HEX", BODY_HEX) < 0
              || PyModule_AddIntConstant(m, "PAIR_CAP", PAIR_CAP) < 0
              || PyModule_AddIntConstant(m, "LAYOUT_N", LAYOUT_N) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
