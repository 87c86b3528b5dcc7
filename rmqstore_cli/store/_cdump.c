/* generate --from-jsonl's reader (rmqstore_cli/store/write/replay_cols.py is its twin): the lines
 * of a dump-commitlog --format jsonl --body base64 file as the columns of a block of sends, in one
 * pass per line, instead of an orjson dict and a dozen Python look-ups per record.
 *
 * Part of the _ckernels extension (setup.py). It takes only what it is certain to read as the
 * twin does (orjson's parse, then replay.py's int(), host, base64 and UTF-8 rules): a strict
 * JSON object per line, valid UTF-8, no NaN, integers of at most 18 digits and no fractions or
 * exponents anywhere, the needed keys written without escapes and each at most once, a body in
 * canonical base64 without escapes, properties_string present. On anything else it returns None
 * and the caller runs the twin, which either reads the block as it is or says which line is wrong.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_cdump.h"

/* the int64 columns of out, each n items long, one after another (DUMP_COLS names them) */
enum { DC_TID, DC_QUEUE_ID, DC_FLAG, DC_SYS_FLAG, DC_BORN_TS, DC_STORE_TS, DC_BORN_HOST, DC_BORN_PORT,
       DC_STORE_HOST, DC_STORE_PORT, DC_RECONSUME, DC_PREPARED, DC_V2, DC_QUEUE_OFFSET, DC_PHYSICAL_OFFSET, DC_COLS };
static const char *dc_names[DC_COLS] = {
    "tid", "queue_id", "flag", "sys_flag", "born_timestamp", "store_timestamp", "born_host", "born_port",
    "store_host", "store_port", "reconsume_times", "prepared_transaction_offset", "v2", "queue_offset",
    "physical_offset"};
#define MAX_PORT_DIGITS 9

/* the keys read (the rest are skipped, after checking them) */
enum { K_TOPIC, K_QUEUE_ID, K_STORE_TS, K_BORN_TS, K_BORN_HOST, K_STORE_HOST, K_FLAG, K_SYS_FLAG, K_RECONSUME,
       K_PREPARED, K_MAGIC, K_QUEUE_OFFSET, K_PHYSICAL_OFFSET, K_BODY, K_BODY_ENCODING, K_BODY_BASE64,
       K_BODY_SIZE, K_PROPS_STRING, K_PROPS_BASE64, K_N };
static const char *key_names[K_N] = {
    "topic", "queue_id", "store_timestamp", "born_timestamp", "born_host", "store_host", "flag", "sys_flag",
    "reconsume_times", "prepared_transaction_offset", "magic", "queue_offset", "physical_offset", "body",
    "body_encoding", "body_base64", "body_size", "properties_string", "properties_base64"};

#define MAX_DEPTH 64
#define MAX_DIGITS 18

/* a value's kind and where it lies in the line */
enum { V_STRING, V_INT, V_NULL, V_OTHER };
typedef struct {
    int kind, escaped;
    const uint8_t *s, *e; /* a string's contents (between the quotes) */
    int64_t i;            /* an int's value */
} Val;

typedef struct {
    const uint8_t *p, *e;
} Cur;

static inline void skip_ws(Cur *c)
{
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static inline int hex4(const uint8_t *p, uint32_t *v)
{
    uint32_t x = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t ch = p[k];
        x <<= 4;
        if (ch >= '0' && ch <= '9')
            x |= ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            x |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            x |= ch - 'A' + 10;
        else
            return -1;
    }
    *v = x;
    return 0;
}

/* The length of the UTF-8 sequence at p (strict: no overlongs, surrogates or code points past
 * U+10FFFF, as orjson reads), or 0. */
static int utf8_len(const uint8_t *p, const uint8_t *e)
{
    uint8_t b = p[0];
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        lo = b == 0xE0 ? 0xA0 : 0x80;
        hi = b == 0xED ? 0x9F : 0xBF;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        lo = b == 0xF0 ? 0x90 : 0x80;
        hi = b == 0xF4 ? 0x8F : 0xBF;
    } else
        return 0;
    if (e - p < n || p[1] < lo || p[1] > hi)
        return 0;
    for (int k = 2; k < n; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull
/* Whether a word of eight bytes holds a byte a string must look at: '"', '\\', < 0x20 or >= 0x80. */
static inline uint64_t word_special(uint64_t w)
{
    uint64_t q = w ^ (ONES * '"'), bs = w ^ (ONES * '\\');
    return ((q - ONES) & ~q & HIGHS) | ((bs - ONES) & ~bs & HIGHS) | ((w - ONES * 0x20) & ~w & HIGHS) | (w & HIGHS);
}

/* A string at the cursor (its opening quote): its contents and whether they hold escapes; -1
 * for anything orjson refuses or this reader does not take (a lone surrogate escape). */
static int scan_string(Cur *c, Val *v)
{
    const uint8_t *p = c->p + 1, *e = c->e;
    v->kind = V_STRING;
    v->escaped = 0;
    v->s = p;
    while (p < e) {
        while (e - p >= 8) { /* eight plain bytes at a time: no quote, backslash, control or high byte */
            uint64_t w;
            memcpy(&w, p, 8);
            if (word_special(w))
                break;
            p += 8;
        }
        if (p >= e)
            break;
        uint8_t b = *p;
        if (b == '"') {
            v->e = p;
            c->p = p + 1;
            return 0;
        }
        if (b < 0x20)
            return -1;
        if (b < 0x80) {
            if (b == '\\') {
                v->escaped = 1;
                if (e - p < 2)
                    return -1;
                uint8_t x = p[1];
                if (x == 'u') {
                    uint32_t u, lo;
                    if (e - p < 6 || hex4(p + 2, &u) < 0)
                        return -1;
                    p += 6;
                    if (u >= 0xDC00 && u <= 0xDFFF)
                        return -1;
                    if (u >= 0xD800 && u <= 0xDBFF) {
                        if (e - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) < 0 || lo < 0xDC00 ||
                            lo > 0xDFFF)
                            return -1;
                        p += 6;
                    }
                    continue;
                }
                if (!strchr("\"\\/bfnrt", x) || x == 0)
                    return -1;
                p += 2;
                continue;
            }
            p++;
            continue;
        }
        int n = utf8_len(p, e);
        if (!n)
            return -1;
        p += n;
    }
    return -1;
}

/* A number at the cursor: only -?(0|[1-9][0-9]*) of at most MAX_DIGITS digits is taken. */
static int scan_number(Cur *c, Val *v)
{
    const uint8_t *p = c->p, *e = c->e;
    int neg = 0;
    if (p < e && *p == '-') {
        neg = 1;
        p++;
    }
    const uint8_t *d = p;
    uint64_t x = 0; /* unsigned: a run of digits too long to take wraps (defined), then is refused */
    while (p < e && *p >= '0' && *p <= '9')
        x = x * 10 + (uint64_t)(*p++ - '0');
    if (p == d || p - d > MAX_DIGITS || (*d == '0' && p - d > 1))
        return -1;
    if (p < e && (*p == '.' || *p == 'e' || *p == 'E'))
        return -1;
    v->kind = V_INT;
    v->i = neg ? -(int64_t)x : (int64_t)x; /* at most MAX_DIGITS digits: in range */
    c->p = p;
    return 0;
}

static int scan_value(Cur *c, Val *v, int depth);

/* An object or array at the cursor, checked and skipped. */
static int skip_container(Cur *c, int depth)
{
    uint8_t close = *c->p == '{' ? '}' : ']';
    int obj = close == '}';
    Val v;
    if (depth >= MAX_DEPTH)
        return -1;
    c->p++;
    skip_ws(c);
    if (c->p < c->e && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        if (obj) {
            if (c->p >= c->e || *c->p != '"' || scan_string(c, &v) < 0)
                return -1;
            skip_ws(c);
            if (c->p >= c->e || *c->p != ':')
                return -1;
            c->p++;
            skip_ws(c);
        }
        if (scan_value(c, &v, depth + 1) < 0)
            return -1;
        skip_ws(c);
        if (c->p >= c->e)
            return -1;
        if (*c->p == ',') {
            c->p++;
            skip_ws(c);
            continue;
        }
        if (*c->p != close)
            return -1;
        c->p++;
        return 0;
    }
}

static int literal(Cur *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->e - c->p) < n || memcmp(c->p, word, n))
        return -1;
    c->p += n;
    return 0;
}

static int scan_value(Cur *c, Val *v, int depth)
{
    if (c->p >= c->e)
        return -1;
    switch (*c->p) {
    case '"':
        return scan_string(c, v);
    case '{':
    case '[':
        v->kind = V_OTHER;
        return skip_container(c, depth);
    case 't':
        v->kind = V_OTHER;
        return literal(c, "true");
    case 'f':
        v->kind = V_OTHER;
        return literal(c, "false");
    case 'n':
        v->kind = V_NULL;
        return literal(c, "null");
    default:
        return scan_number(c, v);
    }
}

/* Which read key a raw key is (no escapes), or -1. */
static int key_of(const Val *k)
{
    size_t n = (size_t)(k->e - k->s);
    if (k->escaped)
        return -2;
    static size_t lens[K_N];
    if (!lens[0])
        for (int i = 0; i < K_N; i++)
            lens[i] = strlen(key_names[i]);
    for (int i = 0; i < K_N; i++)
        if (lens[i] == n && key_names[i][0] == k->s[0] && !memcmp(key_names[i], k->s, n))
            return i;
    return -1;
}

/* A line's top-level object: the read keys' values in got (kind -1: absent). */
static int scan_line(const uint8_t *s, Py_ssize_t len, Val *got)
{
    Cur c = {s, s + len};
    Val k;
    for (int i = 0; i < K_N; i++)
        got[i].kind = -1;
    skip_ws(&c);
    if (c.p >= c.e || *c.p != '{')
        return -1;
    c.p++;
    skip_ws(&c);
    if (c.p < c.e && *c.p == '}')
        return -1; /* no required key */
    for (;;) {
        if (c.p >= c.e || *c.p != '"' || scan_string(&c, &k) < 0)
            return -1;
        int which = key_of(&k);
        if (which == -2)
            return -1; /* an escaped key might be a read one */
        skip_ws(&c);
        if (c.p >= c.e || *c.p != ':')
            return -1;
        c.p++;
        skip_ws(&c);
        Val v;
        if (which >= 0 && got[which].kind != -1)
            return -1; /* a read key twice (orjson keeps the last): left to the twin */
        if (scan_value(&c, which >= 0 ? &got[which] : &v, 1) < 0)
            return -1;
        skip_ws(&c);
        if (c.p >= c.e)
            return -1;
        if (*c.p == '}') {
            c.p++;
            break;
        }
        if (*c.p != ',')
            return -1;
        c.p++;
        skip_ws(&c);
    }
    skip_ws(&c);
    return c.p == c.e ? 0 : -1;
}

/* The decoded contents of a string (escapes resolved to UTF-8) into buf (at least e - s bytes:
 * an escape never grows); the length. */
static Py_ssize_t unescape(const Val *v, uint8_t *buf)
{
    const uint8_t *p = v->s;
    uint8_t *o = buf;
    while (p < v->e) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        uint8_t x = p[1];
        if (x != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            *o++ = (uint8_t)to[strchr(from, x) - from];
            p += 2;
            continue;
        }
        uint32_t u, lo;
        hex4(p + 2, &u);
        p += 6;
        if (u >= 0xD800 && u <= 0xDBFF) {
            hex4(p + 2, &lo);
            p += 6;
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (u < 0x80)
            *o++ = (uint8_t)u;
        else if (u < 0x800) {
            *o++ = (uint8_t)(0xC0 | (u >> 6));
            *o++ = (uint8_t)(0x80 | (u & 0x3F));
        } else if (u < 0x10000) {
            *o++ = (uint8_t)(0xE0 | (u >> 12));
            *o++ = (uint8_t)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (uint8_t)(0x80 | (u & 0x3F));
        } else {
            *o++ = (uint8_t)(0xF0 | (u >> 18));
            *o++ = (uint8_t)(0x80 | ((u >> 12) & 0x3F));
            *o++ = (uint8_t)(0x80 | ((u >> 6) & 0x3F));
            *o++ = (uint8_t)(0x80 | (u & 0x3F));
        }
    }
    return o - buf;
}

/* A string value as bytes (escapes resolved). */
static PyObject *string_bytes(const Val *v)
{
    Py_ssize_t n = v->e - v->s;
    if (!v->escaped)
        return PyBytes_FromStringAndSize((const char *)v->s, n);
    PyObject *b = PyBytes_FromStringAndSize(NULL, n);
    if (b != NULL)
        _PyBytes_Resize(&b, unescape(v, (uint8_t *)PyBytes_AS_STRING(b)));
    return b;
}

/* The id in `ids` (a dict from the str to its number, `names` the strs in order) of the UTF-8
 * text [p, p + n). */
static int64_t intern_text(const char *p, Py_ssize_t n, PyObject *ids, PyObject *names)
{
    PyObject *s = PyUnicode_DecodeUTF8(p, n, NULL);
    if (s == NULL)
        return -1;
    PyObject *got = PyDict_GetItemWithError(ids, s);
    int64_t id = -1;
    if (got != NULL)
        id = PyLong_AsLongLong(got);
    else if (!PyErr_Occurred()) {
        PyObject *num = PyLong_FromSsize_t(PyList_GET_SIZE(names));
        if (num != NULL && PyDict_SetItem(ids, s, num) == 0 && PyList_Append(names, s) == 0)
            id = PyList_GET_SIZE(names) - 1;
        Py_XDECREF(num);
    }
    Py_DECREF(s);
    return id;
}

/* A string value's id (intern_text). */
static int64_t intern(const Val *v, PyObject *ids, PyObject *names)
{
    PyObject *b = string_bytes(v);
    if (b == NULL)
        return -1;
    int64_t id = intern_text(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), ids, names);
    Py_DECREF(b);
    return id;
}

/* message.py's split_host of a host text without escapes: "[addr]:port" (the first "]:") or
 * "addr:port" (the last ':'), the port only ASCII digits; -1 for any other text (the twin's). */
static int split_host(const Val *v, const uint8_t **addr, Py_ssize_t *addr_len, int64_t *port)
{
    const uint8_t *s = v->s, *e = v->e, *a = s, *k = NULL;
    if (v->escaped || s == e)
        return -1;
    if (*s == '[') {
        a = s + 1;
        for (const uint8_t *q = a; q + 1 < e; q++)
            if (q[0] == ']' && q[1] == ':') {
                k = q;
                break;
            }
        if (k == NULL)
            return -1;
        *addr_len = k - a;
        k += 2;
    } else {
        for (const uint8_t *q = e - 1; q >= s; q--)
            if (*q == ':') {
                k = q;
                break;
            }
        if (k == NULL)
            return -1;
        *addr_len = k - a;
        k += 1;
    }
    if (k == e || e - k > MAX_PORT_DIGITS)
        return -1;
    int64_t x = 0;
    for (; k < e; k++) {
        if (*k < '0' || *k > '9')
            return -1;
        x = x * 10 + (*k - '0');
    }
    *addr = a;
    *port = x;
    return 0;
}

/* A host's address text id and port into the columns; 0 done, 1 a text left to the twin, -1 a
 * Python error. */
static int host_cols(const Val *v, PyObject *ids, PyObject *names, int64_t *id, int64_t *port)
{
    const uint8_t *a;
    Py_ssize_t n;
    if (split_host(v, &a, &n, port) < 0)
        return 1;
    *id = intern_text((const char *)a, n, ids, names);
    return *id < 0 ? -1 : 0;
}

static const int8_t *b64_table(void)
{
    static int8_t t[256];
    static int ready;
    if (!ready) {
        const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        memset(t, -1, sizeof t);
        for (int i = 0; i < 64; i++)
            t[(uint8_t)a[i]] = (int8_t)i;
        ready = 1;
    }
    return t;
}

/* A body in canonical base64 (what base64.b64decode(validate=True) takes, a whole number of
 * quanta, at most two '=' at the end) as bytes; Py_None when it is not one. */
static PyObject *body_bytes(const Val *v)
{
    const uint8_t *s = v->s;
    Py_ssize_t n = v->e - s;
    if (v->escaped || n % 4)
        Py_RETURN_NONE;
    int pad = n && s[n - 1] == '=' ? (s[n - 2] == '=' ? 2 : 1) : 0;
    const int8_t *t = b64_table();
    PyObject *b = PyBytes_FromStringAndSize(NULL, n / 4 * 3 - pad);
    if (b == NULL)
        return NULL;
    uint8_t *o = (uint8_t *)PyBytes_AS_STRING(b);
    Py_ssize_t m = n - pad, i = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (; i < m; i++) {
        int8_t x = t[s[i]];
        if (x < 0) {
            Py_DECREF(b);
            Py_RETURN_NONE;
        }
        acc = (acc << 6) | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (uint8_t)(acc >> bits);
        }
    }
    return b;
}

static int is_raw(const Val *v, const char *text)
{
    return v->kind == V_STRING && !v->escaped && (size_t)(v->e - v->s) == strlen(text) &&
           !memcmp(v->s, text, v->e - v->s);
}

/* Whether the values of a line are ones the columns take as the twin reads them. */
static int line_ok(const Val *g)
{
    static const int required_ints[] = {K_QUEUE_ID, K_STORE_TS, K_BORN_TS};
    static const int optional_ints[] = {K_FLAG, K_SYS_FLAG, K_RECONSUME, K_PREPARED};
    for (size_t i = 0; i < 3; i++)
        if (g[required_ints[i]].kind != V_INT)
            return 0;
    for (size_t i = 0; i < 4; i++)
        if (g[optional_ints[i]].kind != -1 && g[optional_ints[i]].kind != V_INT)
            return 0;
    for (int k = K_QUEUE_OFFSET; k <= K_PHYSICAL_OFFSET; k++)
        if (g[k].kind != -1 && g[k].kind != V_NULL && (g[k].kind != V_INT || g[k].i < 0))
            return 0;
    if (g[K_TOPIC].kind != V_STRING || g[K_BORN_HOST].kind != V_STRING || g[K_STORE_HOST].kind != V_STRING)
        return 0;
    if (g[K_MAGIC].kind == V_STRING && g[K_MAGIC].escaped)
        return 0;
    if (g[K_BODY_BASE64].kind != -1 || g[K_PROPS_BASE64].kind != -1 || g[K_PROPS_STRING].kind != V_STRING)
        return 0;
    if (g[K_BODY].kind == -1)
        return g[K_BODY_SIZE].kind == -1 && g[K_BODY_ENCODING].kind == -1;
    return g[K_BODY].kind == V_STRING && (g[K_BODY_ENCODING].kind == -1 || is_raw(&g[K_BODY_ENCODING], "base64"));
}

static inline int64_t int_or(const Val *v, int64_t dflt)
{
    return v->kind == V_INT ? v->i : dflt;
}

typedef struct {
    PyObject *topic_ids, *topics, *born_ids, *born, *store_ids, *store, *bodies, *props;
} Out;

/* One line into row i of out: 1 done, 0 not one the columns take, -1 a Python error. */
static int dump_line(const uint8_t *s, Py_ssize_t len, int64_t i, int64_t n, int64_t *out, Out *r)
{
    Val g[K_N];
    if (scan_line(s, len, g) < 0 || !line_ok(g))
        return 0;
    int64_t *col[DC_COLS];
    for (int c = 0; c < DC_COLS; c++)
        col[c] = out + c * n + i;
    *col[DC_QUEUE_ID] = g[K_QUEUE_ID].i;
    *col[DC_STORE_TS] = g[K_STORE_TS].i;
    *col[DC_BORN_TS] = g[K_BORN_TS].i;
    *col[DC_FLAG] = int_or(&g[K_FLAG], 0);
    *col[DC_SYS_FLAG] = int_or(&g[K_SYS_FLAG], 0);
    *col[DC_RECONSUME] = int_or(&g[K_RECONSUME], 0);
    *col[DC_PREPARED] = int_or(&g[K_PREPARED], 0);
    *col[DC_QUEUE_OFFSET] = int_or(&g[K_QUEUE_OFFSET], -1);
    *col[DC_PHYSICAL_OFFSET] = int_or(&g[K_PHYSICAL_OFFSET], -1);
    *col[DC_V2] = is_raw(&g[K_MAGIC], "v2");
    if ((*col[DC_TID] = intern(&g[K_TOPIC], r->topic_ids, r->topics)) < 0)
        return -1;
    int h = host_cols(&g[K_BORN_HOST], r->born_ids, r->born, col[DC_BORN_HOST], col[DC_BORN_PORT]);
    if (h == 0)
        h = host_cols(&g[K_STORE_HOST], r->store_ids, r->store, col[DC_STORE_HOST], col[DC_STORE_PORT]);
    if (h != 0)
        return h > 0 ? 0 : -1;
    PyObject *body = g[K_BODY].kind == -1 ? PyBytes_FromStringAndSize(NULL, 0) : body_bytes(&g[K_BODY]);
    if (body == NULL)
        return -1;
    if (body == Py_None) {
        Py_DECREF(body);
        return 0;
    }
    PyObject *props = string_bytes(&g[K_PROPS_STRING]);
    int bad = props == NULL || PyList_Append(r->bodies, body) < 0 || PyList_Append(r->props, props) < 0;
    Py_DECREF(body);
    Py_XDECREF(props);
    return bad ? -1 : 1;
}

PyDoc_STRVAR(dump_cols_doc,
"dump_cols(lines, out) -> (topics, born_hosts, store_hosts, bodies, props) or None\n\n"
"The records of dump-commitlog jsonl lines (a list of bytes) as a block's columns: out (int64,\n"
"DC_COLS columns of len(lines) items one after another, named by DUMP_COLS) gets the topic id,\n"
"queue id, flag, sysflag, born and store times, the born and store address text ids and ports,\n"
"reconsume times, prepared offset, 1 for magic \"v2\", queue and physical offsets (-1: none);\n"
"topics and address texts are str in first-seen order, bodies base64-decoded, properties_string as\n"
"UTF-8 bytes. None (out partly written) when some line is not one it takes as the twin would.");

static PyObject *k_dump_cols(PyObject *self, PyObject *args)
{
    PyObject *lines, *oo;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "O!O:dump_cols", &PyList_Type, &lines, &oo))
        return NULL;
    if (PyObject_GetBuffer(oo, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return NULL;
    const char *f = out.format + (out.format[0] == '@' || out.format[0] == '=' || out.format[0] == '<');
    if (out.itemsize != 8 || !(strcmp(f, "q") == 0 || (sizeof(long) == 8 && strcmp(f, "l") == 0))) {
        PyErr_Format(PyExc_TypeError, "dump_cols: out must be a contiguous int64 buffer, got format '%s'", out.format);
        PyBuffer_Release(&out);
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (out.len != n * DC_COLS * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "dump_cols: out holds %zd bytes, need %zd (%d int64 columns of %zd)", out.len,
                     n * DC_COLS * (Py_ssize_t)sizeof(int64_t), DC_COLS, n);
        PyBuffer_Release(&out);
        return NULL;
    }
    Out r = {PyDict_New(), PyList_New(0), PyDict_New(), PyList_New(0), PyDict_New(), PyList_New(0),
             PyList_New(0), PyList_New(0)};
    PyObject **all = &r.topic_ids, *res = NULL;
    int status = 1;
    for (int k = 0; k < 8; k++)
        if (all[k] == NULL)
            status = -1;
    for (Py_ssize_t i = 0; status == 1 && i < n; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyBytes_Check(line))
            status = 0;
        else
            status = dump_line((const uint8_t *)PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line), i, n, out.buf, &r);
    }
    PyBuffer_Release(&out);
    if (status == 1)
        res = Py_BuildValue("(OOOOO)", r.topics, r.born, r.store, r.bodies, r.props);
    else if (status == 0) {
        Py_INCREF(Py_None);
        res = Py_None;
    }
    for (int k = 0; k < 8; k++)
        Py_XDECREF(all[k]);
    return res;
}

PyObject *dump_cols_names(void)
{
    PyObject *t = PyTuple_New(DC_COLS);
    for (int i = 0; t != NULL && i < DC_COLS; i++) {
        PyObject *s = PyUnicode_FromString(dc_names[i]);
        if (s == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, s);
    }
    return t;
}

PyMethodDef dump_methods[] = {
    {"dump_cols", k_dump_cols, METH_VARARGS, dump_cols_doc},
    {NULL, NULL, 0, NULL},
};
