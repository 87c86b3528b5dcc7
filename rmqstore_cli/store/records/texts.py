"""The reference of the C loops ``host_texts`` and ``hex_ranges`` (``store/_carrow.c``, in the
``_ckernels`` extension): export's host and msgId columns of a block as Arrow string buffers
(values one after another in ``out``, int32 ``offsets``), one record at a time with the
record layer's own formatting. Same arguments, same bytes written, same return value and
the same ValueError cases; the equivalence tests compare them on hostile input.
"""

from __future__ import annotations

import binascii

import numpy as np

from rmqstore_cli.store.records.message import address_text

#: The first 12 bytes of an IPv4-mapped IPv6 address (::ffff:0:0/96), whose text Python's
#: ipaddress writes one way or another by version: ``host_texts`` leaves such a block to its caller.
V4_MAPPED = bytes(10) + b"\xff\xff"
#: The longest ``ip:port`` text: "[8 hextets]" and ":" and an int32 port.
HOST_MAX = 41 + 1 + 11


def host_texts(a, at: np.ndarray, size: np.ndarray, port: np.ndarray, out: np.ndarray, offsets: np.ndarray) -> int:
    """``ip:port`` of every record (``address_text`` of the ``size[i]`` (4 or 16) bytes at
    ``a[at[i]]``, then ``:`` and ``port[i]`` in decimal) into ``out`` one after another,
    ``offsets[i]`` where each starts; the bytes written, or -1 when an address is
    IPv4-mapped IPv6 (``out`` and ``offsets`` partly written)."""
    raw = memoryview(a).cast("B")
    n = len(at)
    if len(size) != n or len(port) != n or len(offsets) != n + 1:
        raise ValueError("host_texts: at, size and port must be as long, offsets one more")
    offsets[0] = o = 0
    for i, (p, s, q) in enumerate(zip(at.tolist(), size.tolist(), port.tolist(), strict=True)):
        if s not in (4, 16) or p < 0 or p > len(raw) - s:
            raise ValueError(f"host_texts: record {i}: an address neither 4 nor 16 bytes, or outside a")
        if len(out) - o < HOST_MAX or o + HOST_MAX > 2**31 - 1:
            raise ValueError(f"host_texts: record {i}: out is too small")
        address = bytes(raw[p : p + s])
        if s == 16 and address.startswith(V4_MAPPED):
            return -1
        text = f"{address_text(address)}:{q}".encode()
        out[o : o + len(text)] = np.frombuffer(text, np.uint8)
        o += len(text)
        offsets[i + 1] = o
    return o


def hex_ranges(a, at: np.ndarray, ln: np.ndarray, out: np.ndarray, offsets: np.ndarray) -> int:
    """Upper-case hex digits of ``k`` byte ranges per value (value i: ranges ``i*k`` ..
    ``i*k+k-1`` of ``at``/``ln``, ``k = len(at) // n``, ``n = len(offsets) - 1``) into ``out``
    one after another, ``offsets[i]`` where each starts; the bytes written."""
    raw = memoryview(a).cast("B")
    n, m = len(offsets) - 1, len(at)
    if n < 0 or len(ln) != m or (m != 0 if n == 0 else m % n):
        raise ValueError("hex_ranges: at and ln must be as long, k ranges for each value")
    k = m // n if n else 0
    offsets[0] = o = 0
    starts, lens = at.tolist(), ln.tolist()
    for i in range(n):
        for j in range(i * k, i * k + k):
            p, s = starts[j], lens[j]
            if s < 0 or p < 0 or p > len(raw) - s or s > (len(out) - o) // 2 or o + 2 * s > 2**31 - 1:
                raise ValueError(f"hex_ranges: range {j}: outside a, or out is too small")
            out[o : o + 2 * s] = np.frombuffer(binascii.hexlify(raw[p : p + s]).upper(), np.uint8)
            o += 2 * s
        offsets[i + 1] = o
    return o


#: Pairs of one record at most for ``prop_split`` (more: the record is left to the reference).
PROPS_CAP = 256


def _pairs_of(text: bytes, base: int, name_sep: int, pair_sep: int) -> list[tuple[int, int, int, int]] | None:
    """``MessageDecoder#string2messageProperties``' kept pairs of ``text`` (parts between pair
    separators cut at their first name separator, both sides non-empty) as (name at, name
    length, value at, value length) from ``base``; None when a NUL, malformed UTF-8, a name
    twice or more than :data:`PROPS_CAP` pairs leave the record to the reference."""
    if 0 in text:
        return None
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows, seen, s = [], set(), 0
    for part in text.split(bytes([pair_sep])):
        k = part.find(name_sep)
        if 0 < k < len(part) - 1:
            if len(rows) >= PROPS_CAP or part[:k] in seen:
                return None
            seen.add(part[:k])
            rows.append((base + s, k, base + s + k + 1, len(part) - k - 1))
        s += len(part) + 1
    return rows


def prop_split(a, at, ln, seps, names, plain, pairs, words, tags, uniq, prow, wrow) -> tuple[int, int]:
    """The PROPERTIES of each record whose ``plain[i]`` is set cut into pairs, TAGS, UNIQ_KEY and
    the KEYS words (``split_keys``) as byte ranges of ``a``; ``plain[i]`` cleared where the
    record is not one the cut reproduces (:func:`_pairs_of`) or its rows do not fit in
    ``prow``/``wrow``. Returns the (pair, word) rows written."""
    raw = memoryview(a).cast("B")
    n = len(at)
    if len(ln) != n or len(seps) != 3 or len(plain) != n or len(pairs) != n or len(words) != n:
        raise ValueError("prop_split: at, ln, plain, pairs, words (n), tags and uniq (n, 2), prow (k, 4), wrow (k, 2)")
    name_sep, pair_sep, key_sep = bytes(seps)
    tag_name, keys_name, uniq_name = names
    np_ = nw = 0
    for i, (p, s) in enumerate(zip(at.tolist(), ln.tolist(), strict=True)):
        if s < 0 or p < 0 or p > len(raw) - s:
            raise ValueError(f"prop_split: record {i}: PROPERTIES outside a")
        tags[i], uniq[i], pairs[i], words[i] = (-1, 0), (-1, 0), 0, 0
        got = _pairs_of(bytes(raw[p : p + s]), p, name_sep, pair_sep) if plain[i] else None
        by_name = {bytes(raw[r[0] : r[0] + r[1]]): r for r in got or []}
        kw = []
        if keys_name in by_name:
            v_at, v_ln = by_name[keys_name][2:]
            w = 0
            for word in bytes(raw[v_at : v_at + v_ln]).split(bytes([key_sep])):
                if word:
                    kw.append((v_at + w, len(word)))
                w += len(word) + 1
        if got is None or np_ + len(got) > len(prow) or nw + len(kw) > len(wrow):
            plain[i] = 0
            continue
        for rows, at_row, new in ((prow, np_, got), (wrow, nw, kw)):
            if new:
                rows[at_row : at_row + len(new)] = new
        pairs[i], words[i] = len(got), len(kw)
        np_, nw = np_ + len(got), nw + len(kw)
        for col, name in ((tags, tag_name), (uniq, uniq_name)):
            if name in by_name:
                col[i] = by_name[name][2:]
    return np_, nw
