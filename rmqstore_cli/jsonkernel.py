"""The compiled loop of :mod:`rmqstore_cli.jsonblock`: one pass over each record's bytes
that checks its PROPERTIES and writes its JSON line.

Compiled by numba on first use and cached on disk (as :mod:`~rmqstore_cli.store.kernels`
says), so only commands that render many records pay the import. Everything here works on
numbers and byte arrays that :mod:`~rmqstore_cli.jsonblock` prepares from the declared record layout; the field names
and their order come from there too.

A record is rendered only when the result is certain to equal the reference
(:func:`~rmqstore_cli.render.message_dict` + :func:`~rmqstore_cli.render.to_json_bytes`):
its topic and every name and value of its PROPERTIES hold no byte that JSON escapes and
are valid UTF-8 with no character a terminal acts on (:data:`~rmqstore_cli.render._UNSAFE_UTF8`,
:func:`_text_end`), and its PROPERTIES are empty or every pair is ``name\\x01value`` with
both non-empty and no name twice. Otherwise its status says so and the caller renders it
by the reference.
"""
from __future__ import annotations

import numpy as np

from rmqstore_cli.formats.commitlog import HEAD, PORT
from rmqstore_cli.store.kernels import JIT as _JIT
from rmqstore_cli.store.kernels import copy_bytes as _copy

_PORT_SIZE = PORT.size  # the msgId is the store address, its port and PHYSICALOFFSET
_PHY_SIZE = HEAD["physical_offset"].size

_HEXU = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_HEXL = np.frombuffer(b"0123456789abcdef", np.uint8)
_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)
_LONG_MIN = np.frombuffer(b"-9223372036854775808", np.uint8)
#: bytes by what a name or value may hold: 0 printable ASCII that JSON leaves alone, 1 the
#: others (controls and separators, '"', '\\', DEL), 2 the lead byte of a UTF-8 character
_CLASS = np.ones(256, np.uint8)
_CLASS[0x20:0x7F] = 0
_CLASS[[0x22, 0x5C]] = 1
_CLASS[0x80:] = 2
_DIGITS2 = np.frombuffer(b"".join(b"%02d" % i for i in range(100)), np.uint8)

#: columns of ``nums``
NUMS = ("physical_offset", "total_size", "v2", "body_crc", "queue_id", "flag", "queue_offset", "sys_flag",
        "born_timestamp", "born_port", "store_timestamp", "store_port", "reconsume_times",
        "prepared_transaction_offset", "body_size")
#: columns of ``locs``: positions and lengths in the file
LOCS = ("born_at", "born_len", "store_at", "store_len", "topic_at", "topic_len", "props_at", "props_len",
        "body_at", "phy_at")
BODY_NONE, BODY_BASE64, BODY_HEX = 0, 1, 2
# A constant argument is typed as its literal value, and numba compiles the callee once per
# value (``_lit`` alone 19 times, most of a first run's compile): arguments that are
# constants go through these, typed plain int64 / uint8, so each callee compiles once.
_I, _B = np.int64, np.uint8


@_JIT
def _lit(out, o, lits, lit_off, k):
    return _copy(out, o, lits, lit_off[k], lit_off[k + 1] - lit_off[k])


@_JIT
def _int(out, o, v):
    """Decimal text of an int64 (Java's Long.toString), two digits per division."""
    if v == -9223372036854775807 - 1:
        return _copy(out, o, _LONG_MIN, _I(0), _I(_LONG_MIN.size))
    if v < 0:
        out[o] = 45
        o += 1
        v = -v
    u = np.uint64(v)
    nd = 1
    t = u
    while t >= np.uint64(100):
        t //= np.uint64(100)
        nd += 2
    if t >= np.uint64(10):
        nd += 1
    p = o + nd
    while u >= np.uint64(100):
        q = u // np.uint64(100)
        r = (u - q * np.uint64(100)) * np.uint64(2)
        p -= 2
        out[p], out[p + 1] = _DIGITS2[r], _DIGITS2[r + np.uint64(1)]
        u = q
    if u >= np.uint64(10):
        r = u * np.uint64(2)
        out[p - 2], out[p - 1] = _DIGITS2[r], _DIGITS2[r + np.uint64(1)]
    else:
        out[p - 1] = np.uint8(48) + np.uint8(u)
    return o + nd


@_JIT
def _utf8(a, j, end):
    """Length of the valid UTF-8 character at ``a[j]`` (a non-ASCII lead byte), 0 when it is
    invalid, truncated or one that :data:`~rmqstore_cli.render._UNSAFE_UTF8` escapes."""
    b0 = a[j]
    if b0 < 0xC2 or b0 > 0xF4:
        return 0
    if b0 < 0xE0:
        if j + 1 >= end:
            return 0
        b1 = a[j + 1]
        if b1 < 0x80 or b1 > 0xBF or (b0 == 0xC2 and b1 <= 0x9F):  # C1 controls
            return 0
        return 2
    if b0 < 0xF0:
        if j + 2 >= end:
            return 0
        b1, b2 = a[j + 1], a[j + 2]
        lo = 0xA0 if b0 == 0xE0 else 0x80
        hi = 0x9F if b0 == 0xED else 0xBF  # no surrogates
        if b1 < lo or b1 > hi or b2 < 0x80 or b2 > 0xBF:
            return 0
        if b0 == 0xE2 and ((b1 == 0x80 and (b2 == 0x8E or b2 == 0x8F or 0xA8 <= b2 <= 0xAE))
                           or (b1 == 0x81 and 0xA6 <= b2 <= 0xA9)):  # marks, separators, bidi controls
            return 0
        return 3
    if j + 3 >= end:
        return 0
    b1, b2, b3 = a[j + 1], a[j + 2], a[j + 3]
    lo = 0x90 if b0 == 0xF0 else 0x80
    hi = 0x8F if b0 == 0xF4 else 0xBF
    if b1 < lo or b1 > hi or b2 < 0x80 or b2 > 0xBF or b3 < 0x80 or b3 > 0xBF:
        return 0
    return 4


@_JIT
def _same(a, x, y, n):
    for k in range(n):
        if a[np.uint64(x + k)] != a[np.uint64(y + k)]:
            return False
    return True


@_JIT
def _slot(a, x, n, names, name_len):
    """Which of the ``names`` (rows, ``name_len`` bytes each) ``a[x:x+n]`` is, or -1."""
    first = a[np.uint64(x)]
    for s in range(names.shape[0]):
        if n == name_len[s] and first == names[s, 0] and _same_as(a, x, names[s, :n]):
            return s
    return -1


@_JIT
def _same_as(a, x, name):
    for k in range(name.size):
        if a[np.uint64(x + k)] != name[k]:
            return False
    return True


@_JIT
def _text_end(a, j, end, stop):
    """Where the name or value from ``j`` ends (at ``stop`` or ``end``), or -1 at a byte that
    needs a JSON escape or is not plain UTF-8 (see :func:`_utf8`)."""
    while j < end:
        b = a[np.uint64(j)]
        c = _CLASS[b]
        if c == 0:
            j += 1
        elif b == stop:
            return j
        elif c == 2:
            k = _utf8(a, j, end)
            if k == 0:
                return -1
            j += k
        else:  # a byte JSON escapes, or \x01 inside a value
            return -1
    return j


@_JIT
def _properties(a, pa, pl, pairs, found, names, name_lens):
    """Split PROPERTIES ``a[pa:pa+pl]`` into ``pairs`` (name start, name end, value start,
    value end) and fill ``found`` with the value ranges of TAGS, KEYS and UNIQ_KEY (-1:
    absent; ``names`` holds those three). Returns the number of pairs, or -1 when the record must take the reference."""
    found[:] = -1
    end = pa + pl
    j = pa
    n = 0
    while j < end:
        name_end = _text_end(a, j, end, _B(1))
        if name_end < 0 or name_end == j or name_end == end:
            return -1
        value_end = _text_end(a, name_end + 1, end, _B(2))
        if value_end < 0 or value_end == name_end + 1:
            return -1
        name_len = name_end - j
        for p in range(n):  # a name twice: the parser keeps the last value in the first place
            if pairs[p, 1] - pairs[p, 0] == name_len and _same(a, pairs[p, 0], j, name_len):
                return -1
        pairs[n, 0], pairs[n, 1], pairs[n, 2], pairs[n, 3] = j, name_end, name_end + 1, value_end
        n += 1
        slot = _slot(a, j, name_len, names, name_lens)
        if slot >= 0:
            found[slot, 0], found[slot, 1] = name_end + 1, value_end
        j = value_end + 1  # past the \x02; a pair must follow unless it was the last byte
    return n


@_JIT
def _quoted_or_null(out, o, a, r):
    if r[0] < 0:
        out[o], out[o + 1], out[o + 2], out[o + 3] = 110, 117, 108, 108  # null
        return o + 4
    out[o] = 34
    o = _copy(out, o + 1, a, r[0], r[1] - r[0])
    out[o] = 34
    return o + 1


@_JIT
def _keys(out, o, a, r):
    """``["k1","k2"]``: KEYS split at spaces, empty words dropped (``split_keys``)."""
    out[o] = 91
    o += 1
    if r[0] >= 0:
        first = True
        j = r[0]
        while j < r[1]:
            w = j
            while j < r[1] and a[j] != 32:
                j += 1
            if j > w:
                if not first:
                    out[o] = 44
                    o += 1
                out[o] = 34
                o = _copy(out, o + 1, a, w, j - w)
                out[o] = 34
                o += 1
                first = False
            j += 1
    out[o] = 93
    return o + 1


@_JIT
def _host(out, o, a, at, table, table_off, row):
    """An address: row ``row`` of the caller's table (IPv6), or the IPv4 octets at ``at``."""
    if row >= 0:
        return _copy(out, o, table, table_off[row], table_off[row + 1] - table_off[row])
    for k in range(4):
        if k:
            out[o] = 46
            o += 1
        o = _int(out, o, np.int64(a[at + k]))
    return o


@_JIT
def _hex(out, o, a, at, n, digits):
    for k in range(n):
        b = a[at + k]
        out[o] = digits[b >> 4]
        out[o + 1] = digits[b & 15]
        o += 2
    return o


@_JIT
def _base64(out, o, a, at, n):
    full = n - n % 3
    for k in range(at, at + full, 3):
        v = (np.int64(a[k]) << 16) | (np.int64(a[k + 1]) << 8) | np.int64(a[k + 2])
        out[o], out[o + 1], out[o + 2], out[o + 3] = _B64[v >> 18], _B64[(v >> 12) & 63], _B64[(v >> 6) & 63], _B64[v & 63]
        o += 4
    rest = n - full
    if rest:
        v = np.int64(a[at + full]) << 16
        if rest == 2:
            v |= np.int64(a[at + full + 1]) << 8
        out[o], out[o + 1] = _B64[v >> 18], _B64[(v >> 12) & 63]
        out[o + 2] = _B64[(v >> 6) & 63] if rest == 2 else 61
        out[o + 3] = 61
        o += 4
    return o


@_JIT
def _object(out, o, a, pairs, n):
    """The inside of ``{…}``: ``"name":"value"`` pairs."""
    for p in range(n):
        if p:
            out[o], out[o + 1] = 34, 44  # the value's closing quote and a comma
            o += 2
        out[o] = 34
        o = _copy(out, o + 1, a, pairs[p, 0], pairs[p, 1] - pairs[p, 0])
        out[o], out[o + 1], out[o + 2] = 34, 58, 34
        o = _copy(out, o + 3, a, pairs[p, 2], pairs[p, 3] - pairs[p, 2])
    if n:
        out[o] = 34
        o += 1
    return o


@_JIT
def _escaped(out, o, sep):
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 92, 117, 48, 48, 48, 48 + sep
    return o + 6


@_JIT
def _properties_string(out, o, a, pairs, n, end):
    """The PROPERTIES text with its separators as ``\\u0001`` and ``\\u0002``."""
    for p in range(n):
        o = _copy(out, o, a, pairs[p, 0], pairs[p, 1] - pairs[p, 0])
        o = _escaped(out, o, _B(1))
        o = _copy(out, o, a, pairs[p, 2], pairs[p, 3] - pairs[p, 2])
        if pairs[p, 3] < end:
            o = _escaped(out, o, _B(2))
    return o


@_JIT
def render(a, nums, locs, ok, hosts, host_off, host_rows, lits, lit_off, names, name_lens, body_mode, props_on, out,
           ends):
    """Write the JSON line of every record whose ``ok`` is set into ``out``; ``ends[i]``
    is where record i's line ends (equal to the previous end for one left out). Records
    whose topic or PROPERTIES need the reference get ``ok[i] = False``. Returns the bytes
    written. ``nums``/``locs``: a row per record, columns :data:`NUMS`/:data:`LOCS`;
    ``hosts``/``host_off``/``host_rows``: IPv6 address texts and each record's rows (born,
    store; -1 for IPv4); ``lits``/``lit_off``: the text between the values, in order;
    ``names``/``name_lens``: TAGS, KEYS, UNIQ_KEY."""
    n = nums.shape[0]
    o = _I(0)
    longest = 0
    for i in range(n):
        longest = max(longest, locs[i, 7])
    pairs = np.empty((longest // 2 + 2, 4), np.int64)  # (name start, end, value start, end) of a record
    found = np.empty((3, 2), np.int64)
    for i in range(n):
        plain = ok[i] and _text_end(a, locs[i, 4], locs[i, 4] + locs[i, 5], _B(0)) == locs[i, 4] + locs[i, 5]
        npairs = _properties(a, locs[i, 6], locs[i, 7], pairs, found, names, name_lens) if plain else -1
        if npairs < 0:
            ok[i] = False
            ends[i] = o
            continue
        nu, lo = nums[i], locs[i]
        o = _lit(out, o, lits, lit_off, _I(0))
        o = _int(out, o, nu[0])
        o = _lit(out, o, lits, lit_off, _I(1))
        o = _int(out, o, nu[1])
        o = _lit(out, o, lits, lit_off, _I(2))
        out[o], out[o + 1] = 118, 50 if nu[2] else 49  # v2 / v1
        o += 2
        for k in range(3, 9):  # body_crc .. born_timestamp
            o = _lit(out, o, lits, lit_off, k)
            o = _int(out, o, nu[k])
        o = _lit(out, o, lits, lit_off, _I(9))
        o = _host(out, o, a, lo[0], hosts, host_off, host_rows[i, 0])
        out[o] = 58
        o = _int(out, o + 1, nu[9])
        o = _lit(out, o, lits, lit_off, _I(10))
        o = _int(out, o, nu[10])
        o = _lit(out, o, lits, lit_off, _I(11))
        o = _host(out, o, a, lo[2], hosts, host_off, host_rows[i, 1])
        out[o] = 58
        o = _int(out, o + 1, nu[11])
        for k in range(12, 14):  # reconsume_times, prepared_transaction_offset
            o = _lit(out, o, lits, lit_off, k)
            o = _int(out, o, nu[k])
        o = _lit(out, o, lits, lit_off, _I(14))
        o = _copy(out, o, a, lo[4], lo[5])
        pa, pl = lo[6], lo[7]
        if props_on:
            o = _lit(out, o, lits, lit_off, _I(15))  # ","properties":{
            o = _object(out, o, a, pairs, npairs)
            o = _lit(out, o, lits, lit_off, _I(16))  # },"properties_string":"
            o = _properties_string(out, o, a, pairs, npairs, pa + pl)
        o = _lit(out, o, lits, lit_off, _I(17))  # ","tags":
        o = _quoted_or_null(out, o, a, found[0])
        o = _lit(out, o, lits, lit_off, _I(18))
        o = _keys(out, o, a, found[1])
        o = _lit(out, o, lits, lit_off, _I(19))
        o = _quoted_or_null(out, o, a, found[2])
        o = _lit(out, o, lits, lit_off, _I(20))  # ,"msg_id":"
        o = _hex(out, o, a, lo[2], lo[3] + _PORT_SIZE, _HEXU)  # store address and port
        o = _hex(out, o, a, lo[9], _I(_PHY_SIZE), _HEXU)  # the stored physical offset
        o = _lit(out, o, lits, lit_off, _I(21))
        o = _int(out, o, nu[14])
        if body_mode:
            o = _lit(out, o, lits, lit_off, _I(22))
            if body_mode == 1:
                o = _base64(out, o, a, lo[8], nu[14])
            else:
                o = _hex(out, o, a, lo[8], nu[14], _HEXL)
            o = _lit(out, o, lits, lit_off, _I(23))
        o = _lit(out, o, lits, lit_off, _I(24))
        ends[i] = o
    return o
