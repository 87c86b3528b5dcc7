"""verify's PROPERTIES of a batch in one pass: the C loop ``prop_fused`` (``store/_ckernels.c``),
its reference twin of the same name, and :class:`FusedProperties`, what verify reads of them.

:class:`~rmqstore_cli.store.records.properties.Properties` finds every pair of a batch (a C
scan writing five lists, then numpy over them) and the C loop ``prop_keys`` passes over the
same bytes again for TAGS and the index keys. verify needs less: which messages hold a
malformed pair or malformed UTF-8 (``MessageDecoder#string2messageProperties`` drops or
replaces them), the values of a few names (``__CRC32#``, ``DELAY``, the multi-dispatch
pair), the tagsCodes and the keys. ``prop_fused`` gives all of it in one pass over each
message; anything else (and a value of malformed UTF-8, whose hash follows the decoder's
replacements) is asked of a full :class:`Properties` over the same joined bytes, made only
then. The twin is a plain loop per message (``bytes`` methods, ``str.decode``): the C
loop's results to the bit (tests/equivalence/test_ckernels_propfused.py, hostile input);
``RMQSTORE_PURE=1`` keeps :class:`Properties` in verify, as the twin is slow.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from rmqstore_cli.formats.properties import KEY_SEPARATOR, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

from rmqstore_cli.store.javahash import INT_MIN, java_hash
from rmqstore_cli.store.records.properties import CRC_MARK, IndexKeys, Properties, grouped_keys

#: flags: a pair that is not name\x01value with both non-empty; a byte >= 0x80; malformed UTF-8
MALFORMED, HIGH, BAD_UTF8 = 1, 2, 4
#: keys' rows: columns (message, start, end, index hash, flags) and flags (the C loop's
#: KEY_COLS, KEY_WORD, KEY_WIDE), and a TAGS value of malformed UTF-8 (TAGS_WIDE)
KEY_COLS, KEY_WORD, KEY_WIDE, TAGS_WIDE = 5, 1, 2, 1 << 40
_PAIR, _NAME, _SPACE = PROPERTY_SEPARATOR.encode(), NAME_VALUE_SEPARATOR.encode(), KEY_SEPARATOR.encode()
_TAGS, _KEYS, _UNIQ = (f"{k}{NAME_VALUE_SEPARATOR}".encode() for k in ("TAGS", "KEYS", "UNIQ_KEY"))


def _pairs(p: bytes):
    """(start, pair bytes) of each pair of one message (split at \\x02, none after a final one)."""
    pieces = p.split(_PAIR) if p else []
    if p.endswith(_PAIR):
        pieces.pop()
    at = 0
    for piece in pieces:
        yield at, piece
        at += len(piece) + 1


def _index_hash(prefix: int, key: bytes) -> tuple[int, int]:
    """(``indexKeyHashMethod`` of ``topic#`` + key, flags): the prefix's hashCode continued over
    the key's UTF-16 units; (0, KEY_WIDE) for malformed UTF-8."""
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return 0, KEY_WIDE
    units = len(text.encode("utf-16-be", "surrogatepass")) // 2
    h = (prefix * pow(31, units, 1 << 32) + java_hash(text)) & 0xFFFFFFFF
    s = h - (1 << 32) if h & 0x80000000 else h
    return (0 if s == INT_MIN else abs(s)), 0


def _message(p: bytes, s: int, names: list[bytes], vals: list) -> tuple[int, dict]:
    """Flags of one message's PROPERTIES ``p`` (at ``s`` in the buffer), its named values into
    ``vals`` and TAGS, KEYS and UNIQ_KEY's value ranges (the last non-empty pair of each)."""
    flags, own = 0, {}
    for at, piece in _pairs(p):
        i = piece.find(_NAME)
        if i <= 0 or i == len(piece) - 1:
            flags |= MALFORMED
        for j, name in enumerate([*names, _TAGS, _KEYS, _UNIQ]):
            if len(piece) > len(name) and piece.startswith(name):
                if j < len(names):
                    vals[j] = (s + at + len(name), s + at + len(piece))
                else:
                    own[name] = (s + at + len(name), s + at + len(piece))
    if not p.isascii():
        flags |= HIGH
        try:
            p.decode("utf-8")
        except UnicodeDecodeError:
            flags |= BAD_UTF8
    return flags, own


def _keys(raw: bytes, m: int, own: dict, prefix: int) -> list[tuple[int, int, int, int, int]]:
    """Message m's key rows: its UNIQ_KEY, then each non-empty word of KEYS."""
    spans = [(*own[_UNIQ], 0)] if _UNIQ in own else []
    if _KEYS in own:
        x, y = own[_KEYS]
        for w in raw[x:y].split(_SPACE):
            if w:
                spans.append((x, x + len(w), KEY_WORD))
            x += len(w) + 1
    return [(m, x, y, *_or_flag(_index_hash(prefix, raw[x:y]), f)) for x, y, f in spans]


def _or_flag(got: tuple[int, int], flag: int) -> tuple[int, int]:
    return got[0], got[1] | flag


def _prefix(prefix, t: int, m: int) -> int:
    """hashCode of ``topic#`` for message m's topic id ``t`` (uint32)."""
    if not 0 <= t < len(prefix):
        raise ValueError(f"prop_fused: message {m} has topic id {t}, outside the prefixes")
    return int(prefix[t]) & 0xFFFFFFFF


def _tags(raw: bytes, own: dict) -> int:
    """``tagsString2tagsCode`` of the TAGS value (0 without one, TAGS_WIDE when malformed)."""
    if _TAGS not in own:
        return 0
    try:
        return java_hash(raw[slice(*own[_TAGS])].decode("utf-8"))
    except UnicodeDecodeError:
        return TAGS_WIDE


def _one(raw: bytes, m: int, s: int, ln: int, nl: list[bytes], outs: tuple) -> dict:
    """Message m (``raw[s:s+ln]``): its flags, tagsCode and named values into ``outs``; its
    TAGS, KEYS and UNIQ_KEY value ranges returned."""
    if not (s >= 0 and ln >= 0 and s <= len(raw) and ln <= len(raw) - s):
        raise ValueError(f"prop_fused: range {m} ({s}, {ln}) lies outside a ({len(raw)} bytes)")
    flags_out, tags_out, cols = outs
    vals: list = [(-1, -1)] * len(nl)
    flags_out[m], own = _message(raw[s : s + ln], s, nl, vals)
    for j, (x, y) in enumerate(vals):
        cols[2 * j, m], cols[2 * j + 1, m] = x, y
    tags_out[m] = _tags(raw, own)
    return own


def prop_fused(a, moff, pl, indexable, tid, prefix, names, noff, flags_out, tags_out, vals_out, keys_out) -> int:
    """The reference of the C ``prop_fused``: for each message m, its PROPERTIES
    ``a[moff[m]:moff[m]+pl[m]]``: ``flags_out[m]`` (:data:`MALFORMED` | :data:`HIGH` |
    :data:`BAD_UTF8`), for each name j (``names[noff[j]:noff[j+1]]``) the value range of its
    last non-empty pair at ``vals_out[2j*n+m]``, ``vals_out[(2j+1)*n+m]`` (-1 without), the
    tagsCode into ``tags_out`` and, when ``indexable[m]``, the index keys into ``keys_out``
    (rows of :data:`KEY_COLS`, those that fit) as the C ``prop_keys`` does, a key of
    malformed UTF-8 with hash 0. Returns how many keys there are."""
    n, raw = len(moff), bytes(memoryview(a).cast("B"))
    nl = [bytes(names[x:y]) for x, y in zip(noff[:-1].tolist(), noff[1:].tolist(), strict=True)]
    if {len(pl), len(indexable), len(tid), len(flags_out), len(tags_out)} != {n} or len(vals_out) != 2 * len(nl) * n:
        raise ValueError("prop_fused: the arrays differ in length")
    cols = vals_out.reshape(2 * len(nl), n) if n else vals_out
    keys: list = []
    for m, (s, ln) in enumerate(zip(moff.tolist(), pl.tolist(), strict=True)):
        own = _one(raw, m, s, ln, nl, (flags_out, tags_out, cols))
        if indexable[m] and (_UNIQ in own or _KEYS in own):
            keys += _keys(raw, m, own, _prefix(prefix, int(tid[m]), m))
    fit = min(len(keys), keys_out.size // KEY_COLS)
    if fit:
        keys_out.reshape(-1, KEY_COLS)[:fit] = keys[:fit]
    return len(keys)


class FusedProperties:
    """What verify reads of a batch's PROPERTIES, from one pass of the C loop ``prop_fused``
    over their joined bytes (:attr:`cat`, as :class:`Properties` joins them): the same
    answers as :class:`Properties` for :meth:`suspects`, :meth:`value` of the ``names`` it was
    built with, :attr:`prop_crc`, :attr:`tags_code` and :meth:`index_keys` (for the
    ``indexable``, ``tid`` and ``prefix_hash`` it was built with); anything else, and a batch
    with a TAGS value or key of malformed UTF-8, from a full :class:`Properties`."""

    def __init__(self, kern, arr, ps, pl, indexable, tid, prefix_hash, names: tuple[bytes, ...]):
        n = self.n = ps.size
        self.names, self._args, self._keys_args = names, (arr, ps, pl), (indexable, tid, prefix_hash)
        self.tot = int(pl.sum())
        self.cat = np.empty(self.tot, np.uint8)
        kern.join_ranges(arr, ps, pl, self.cat)
        self.moff = np.cumsum(pl) - pl
        self.flags, self.tags = np.empty(n, np.int64), np.empty(n, np.int64)
        self.vals = np.empty((2 * len(names), n), np.int64)
        noff = np.cumsum([0] + [len(x) for x in names], dtype=np.int64)
        args = (self.cat, self.moff, pl, np.ascontiguousarray(indexable, bool), np.ascontiguousarray(tid, np.int64))
        args += (np.ascontiguousarray(prefix_hash, np.int64), np.frombuffer(b"".join(names), np.uint8), noff)
        rows = np.empty((4 * n, KEY_COLS), np.int64)  # ~3 keys a message: a second call when more
        k = kern.prop_fused(*args, self.flags, self.tags, self.vals, rows)
        if k > rows.shape[0]:
            rows = np.empty((k, KEY_COLS), np.int64)
            kern.prop_fused(*args, self.flags, self.tags, self.vals, rows)
        self.rows = rows[:k]
        self.wide = bool((self.tags == TAGS_WIDE).any() or (self.rows[:, 4] & KEY_WIDE).any())

    @cached_property
    def full(self) -> Properties:
        """Every pair, for what the one pass does not answer (made once, on the same bytes)."""
        arr, ps, pl = self._args
        return Properties(arr, ps, pl, joined=self.cat)

    def suspects(self) -> np.ndarray:
        """:meth:`Properties.suspects`: malformed pairs, and when some message is not UTF-8
        every message with a byte >= 0x80 (one decode of the batch told them apart there)."""
        bad = (self.flags & MALFORMED) != 0
        if (self.flags & BAD_UTF8).any():
            bad |= (self.flags & HIGH) != 0
        return np.flatnonzero(bad)

    def value(self, name: bytes):
        """:meth:`Properties.value`: (message, value start, value end) of the last non-empty
        pair ``name`` of each message."""
        if name not in self.names:
            return self.full.value(name)
        j = self.names.index(name)
        m = np.flatnonzero(self.vals[2 * j] >= 0)
        return m, self.vals[2 * j][m], self.vals[2 * j + 1][m]

    def has_pair(self, name: bytes) -> bool:
        return self.value(name)[0].size > 0

    @property
    def prop_crc(self) -> np.ndarray:
        """Messages with a ``__CRC32#`` property."""
        out = np.zeros(self.n, bool)
        out[self.value(CRC_MARK)[0]] = True
        return out

    @property
    def tags_code(self) -> np.ndarray:
        return self.full.tags_code if self.wide else self.tags

    def put_keys(self) -> tuple[np.ndarray, ...]:
        """(message, start, end, index hash) of the keys in put order, as
        :meth:`Properties.compiled_keys` gives them (a batch with malformed UTF-8: from it)."""
        if self.wide:
            return self.full.compiled_keys(*self._keys_args)[:4]
        return tuple(np.ascontiguousarray(c) for c in self.rows.T[:4])

    def key_ranges(self, indexable: np.ndarray):
        return self.full.key_ranges(indexable)

    def index_keys(
        self, tid: np.ndarray, prefix_hash: np.ndarray, indexable: np.ndarray, topic_names: list[bytes]
    ) -> IndexKeys:
        """:meth:`Properties.index_keys` (the arguments the pass was made with)."""
        if self.wide:
            return self.full.index_keys(tid, prefix_hash, indexable, topic_names)
        owner, a, b, ih, flags = self.rows.T
        return grouped_keys(owner, a, b, ih, (flags & KEY_WORD) != 0, self.cat, tid, topic_names)
