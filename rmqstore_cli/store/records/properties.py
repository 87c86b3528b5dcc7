"""PROPERTIES of many records at once (numpy), beside the codec of ``formats/properties.py``.

:class:`Properties` is ``MessageDecoder#string2messageProperties`` for a whole batch, on the
bytes; :func:`pick_property` one value of one record without a full parse;
:func:`props_well_formed` the cheap test of which records need the full parse.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from rmqstore_cli.formats.commitlog import CRC32_PROPERTY
from rmqstore_cli.formats.properties import NAME_VALUE_SEPARATOR, parse_properties

from rmqstore_cli.store.files.arrays import BE_U32, byte_rows, bytes_base
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.javahash.bulk import (
    RangeHashes,
    concat_hashes,
    index_hash,
    java_int,
    utf8_hashes,
    window_hashes,
)

CRC_MARK = (
    CRC32_PROPERTY + NAME_VALUE_SEPARATOR
).encode()  # the __CRC32# pair (docs/format/commitlog.md#whole-record-crc)


def pick_property(props: bytes, name: bytes) -> bytes | None:
    """The value ``MessageDecoder#string2messageProperties`` keeps for ``name`` (which ends
    with \\x01), picked out of the PROPERTIES bytes without a full parse when possible: the
    last pair of that name wins (\\x02 and \\x01 are single bytes in UTF-8, never inside a
    character); an empty last value is dropped by the parser, so an earlier pair may count
    and the full parse decides. None when absent."""
    i = props.rfind(b"\x02" + name)
    if i >= 0:
        i += 1
    elif props.startswith(name):
        i = 0
    else:
        return None
    j = props.find(b"\x02", i)
    v = props[i + len(name) : j if j >= 0 else len(props)]
    if not v:  # an empty value is dropped by the parser; an earlier pair may still count
        return parse_properties(props.decode("utf-8", "replace")).get(name[:-1].decode(), "").encode() or None
    return v


_NOT_SEPARATOR = bytes(c for c in range(256) if c not in (1, 2))
_ALTERNATING = b"\x01\x02" * 16384  # PROPERTIES are at most 32767 bytes (a short length)


def props_well_formed(props: bytes) -> bool:
    """Cheap test that every pair is ``name\\x01value`` with both non-empty and one \\x01.

    False means "look closer" (a value may legally hold \\x01). Counting separators is not
    enough: in ``A\\x01x\\x01y\\x02junk`` the value's extra \\x01 hides a pair without
    one, which the broker's parser drops. So the separators, picked out by one
    ``translate`` (in C, no split), must run \\x01 \\x02 \\x01 ... pair by pair."""
    seps = props.translate(None, _NOT_SEPARATOR)
    n = len(seps)
    return (
        n <= len(_ALTERNATING)
        and seps == _ALTERNATING[:n]
        and (n % 2 == 0) == props.endswith(b"\x02")
        and not props.startswith(b"\x01")
        and not props.endswith(b"\x01")
        and b"\x02\x01" not in props
        and b"\x01\x02" not in props
    )


def compiled_join(a: np.ndarray, at: np.ndarray, ln: np.ndarray) -> np.ndarray | None:
    """The bytes ``a[at:at+ln]`` of every range joined by the C loop (25x cheaper than
    slicing the mapping per record), or None on the reference path (:data:`FAST_PATHS`):
    :class:`Properties` joins them itself."""
    kern = FAST_PATHS.kernels()
    if kern is None:
        return None
    out = np.empty(int(ln.sum()), np.uint8)
    kern.join_ranges(a, at, ln, out)
    return out


def _non_ascii_runs(cat: np.ndarray, hp: np.ndarray) -> bytes:
    """The non-ASCII bytes of ``cat`` (at the sorted positions ``hp``), each maximal run of
    them followed by a space: valid UTF-8 exactly when ``cat`` is (an ASCII byte never lies
    inside a multi-byte character, so each run must be whole characters on its own), and
    much shorter to decode."""
    brk = np.flatnonzero(hp[1:] != hp[:-1] + 1) + 1  # a run ends before each break
    vals = cat[hp]
    out = np.full(hp.size + brk.size + 1, 0x20, np.uint8)
    out[np.arange(hp.size) + np.searchsorted(brk, np.arange(hp.size), "right")] = vals
    return out.tobytes()


def _scan_pairs(cat: np.ndarray, moff: np.ndarray, pl: np.ndarray, tot: int, checks: bool) -> tuple:
    """The reference pair scan of :class:`Properties` (numpy): (pair starts, owners, ends,
    spaces, bytes >= 0x80, and with ``checks`` every \x01 and the first at or after each
    pair start, else None)."""
    # one pass finds every byte that matters: \x01, \x02 and >= 0x80 (with the rare \x00):
    # uint8 cat - 3 wraps 0..2 to 253..255 and puts 0x80.. at 125.., the rest below 125
    special = np.flatnonzero(((cat - np.uint8(3)) >= 125) | (cat == 0x20))  # and the spaces KEYS splits at
    kind = cat[special]
    spaces = special[kind == 0x20]
    sep = special[kind == 2]
    # pair starts: each message's first byte (tagged 0) and each byte after a \x02 (tagged
    # 1), sorted together; a position both ways is the message's start (tag 0 sorts first),
    # and each pair's owner is the count of message starts up to it
    ne = np.flatnonzero(pl > 0)
    after = sep + 1
    key = np.concatenate([moff[ne] << 1, (after[after < tot] << 1) | 1])
    key.sort()
    pos = key >> 1
    first = np.ones(pos.size, bool)
    first[1:] = pos[1:] != pos[:-1]
    key, starts = key[first], pos[first]
    owner = ne[np.cumsum((key & 1) == 0) - 1]
    # a pair ends at the next pair's start, less the \x02 before it if there is one (the
    # next start is the byte after a \x02, or the next message's first byte)
    nxt = np.empty_like(starts)
    nxt[:-1] = starts[1:]
    nxt[-1] = tot
    end = nxt - (cat[nxt - 1] == 2)
    hp = special[kind >= 0x80]  # non-ASCII bytes: UTF-8 to validate, UTF-16 to hash
    if not checks:
        return starts, owner, end, spaces, hp, None, None
    ones = special[kind == 1]
    if ones.size == starts.size and (ones > starts).all() and (ones[:-1] < starts[1:]).all():
        first1 = ones  # one \x01 inside each pair (the usual case): no search needed
    else:
        k = np.searchsorted(ones, starts)
        first1 = (
            np.where(k < ones.size, ones[np.minimum(k, max(ones.size - 1, 0))], tot)
            if ones.size
            else np.full(starts.size, tot)
        )
    return starts, owner, end, spaces, hp, ones, first1


def compiled_scan(cat: np.ndarray, moff: np.ndarray, pl: np.ndarray, tot: int) -> tuple | None:
    """:func:`_scan_pairs` by the C loop ``prop_scan`` (one pass to count, one to fill), or
    None on the reference path (:data:`FAST_PATHS`)."""
    kern = FAST_PATHS.kernels()
    if kern is None:
        return None
    moff, pl = np.ascontiguousarray(moff, np.int64), np.ascontiguousarray(pl, np.int64)
    counts = kern.prop_scan(cat, moff, pl, tot, *[np.zeros(0, np.int64)] * 7)
    ones, spaces, high, starts, owner, end, first1 = (np.empty(k, np.int64) for k in counts + counts[3:] * 3)
    kern.prop_scan(cat, moff, pl, tot, ones, spaces, high, starts, owner, end, first1)
    return starts, owner, end, spaces, high, ones, first1


class IndexKeys:
    """Index keys of a batch: owner message, index hash, and the key text on demand.

    ``owner`` and ``hash`` list every UNIQ_KEY first, then the KEYS words; ``put``, when the
    caller has it, is the same (owner, hash) in the order ``IndexService#buildIndex`` puts
    them (per message its UNIQ_KEY, then its words): the order of an index file's entries."""

    def __init__(self, owner, hash_, cat, a, b, topic_of, put: tuple[np.ndarray, np.ndarray] | None = None):
        self.owner, self.hash, self._cat, self._a, self._b, self._topic_of = owner, hash_, cat, a, b, topic_of
        self._put = put

    def put_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(owner, hash) of the keys in put order (a stable sort by owner when not given)."""
        if self._put is None:
            order = np.argsort(self.owner, kind="stable")
            self._put = (self.owner[order], self.hash[order])
        return self._put

    def text(self, x: int) -> str:
        key = bytes(self._cat[self._a[x] : self._b[x]]).decode("utf-8", "backslashreplace")
        return f"{self._topic_of(int(self.owner[x]))}#{key}"


#: Most pairs in one message for which :func:`repeated_keys` compares neighbours instead of sorting.
NEAR_PAIRS = 16


def repeated_keys(key: np.ndarray, most: int) -> np.ndarray:
    """The keys (message index in the top 16 bits, then the name's length and first bytes)
    found twice. A message's pairs lie together, at most ``most`` of them: each pair is
    compared with the ``most`` - 1 after it, a few passes where a sort of every pair costs
    several times more; past :data:`NEAR_PAIRS` (a hostile record), the sort."""
    if most > NEAR_PAIRS:
        key = np.sort(key)
        return key[1:][key[1:] == key[:-1]]
    return np.concatenate([key[d:][key[d:] == key[:-d]] for d in range(1, most)] + [key[:0]])


class Properties:
    """``MessageDecoder#string2messageProperties`` for a whole batch at once, on the bytes.

    Pair boundaries are the \x02 bytes; a pair's name runs to its first \x01 (both are
    single bytes in UTF-8, never inside a multi-byte character). The last pair of a name
    wins; empty names/values are dropped, as the broker's parser does.

    Java ``String#hashCode`` of any byte range comes from one prefix sum:
    ``hash(cat[a:b]) = 31^(b-1) * (S[b] - S[a])`` with ``S[k] = sum(c_i * 31^-i, i < k)``,
    all mod 2^32 (uint32 arithmetic wraps exactly like Java's int). Non-ASCII ranges are
    hashed over UTF-16 code units in Python instead.
    """

    def __init__(
        self,
        arr: np.ndarray,
        ps: np.ndarray,
        pl: np.ndarray,
        buf=None,
        checks: bool = True,
        joined: np.ndarray | None = None,
    ):
        """``checks=False``: only pairs and values (what dispatch reads); no well-formedness
        marks, so :meth:`suspects` and :meth:`simple` are not available. ``joined``: the
        ranges' bytes already joined by the caller (verify's compiled loop)."""
        n = ps.size
        self.n = n
        self._prefix = None
        self._hashes: RangeHashes | None = None
        self.suspect = np.zeros(n, bool)
        tot = int(pl.sum())
        self.tot = tot
        self.hp = self.spaces = np.zeros(0, np.int64)
        if not tot:
            self.cat = np.zeros(0, np.uint8)
            return
        moff = np.cumsum(pl) - pl
        self.moff, self.mend = moff, moff + pl
        if joined is not None:
            cat = joined
        elif buf is not None:  # slicing the mapping and joining is cheaper than a numpy gather
            cat = np.frombuffer(b"".join(map(buf.__getitem__, map(slice, ps.tolist(), (ps + pl).tolist()))), np.uint8)
        else:
            cat = arr[np.repeat(ps - moff, pl) + np.arange(tot)]
        self.cat = cat
        got = compiled_scan(cat, moff, pl, tot)
        if got is None:
            got = _scan_pairs(cat, moff, pl, tot, checks)
        starts, owner, end, self.spaces, self.hp, ones, first1 = got
        self.starts, self.owner, self.end = starts, owner, end
        if not checks:
            self.suspect = None
            return
        # well-formed pairs: name\x01value, both non-empty
        good = (first1 > starts) & (first1 < end - 1)
        self.suspect[owner[~good]] = True
        self.ones, self.first1 = ones, first1  # every \x01; the first at or after each pair start

    @cached_property
    def non_ascii_msg(self) -> np.ndarray:
        """Messages with a non-ASCII byte in their PROPERTIES."""
        out = np.zeros(self.n, bool)
        hp = self.hp
        if hp.size:  # the first byte of each run of them, and the first byte of each message
            runs = hp[np.r_[True, hp[1:] != hp[:-1] + 1]]
            out[np.searchsorted(self.moff, runs, "right") - 1] = True
            ne = np.flatnonzero(self.mend > self.moff)
            out[ne[self.cat[self.moff[ne]] >= 0x80]] = True
        return out

    @cached_property
    def tags_code(self) -> np.ndarray:
        """``tagsString2tagsCode`` of each message's TAGS (0 without one), int64 (by the C
        loop of :meth:`compiled_keys` when built)."""
        none = np.zeros(self.n, bool)
        if self.compiled_keys(none, none.astype(np.int64), np.zeros(0, np.int64)) is not None:
            return self.__dict__["tags_code"]
        out = np.zeros(self.n, np.int64)
        m, a, b = self.value(b"TAGS\x01")
        if m.size:
            out[m] = java_int(self.hash_ranges(a, b))
            na = self.non_ascii(a, b, m)
            if na.size:  # hashCode runs over UTF-16 code units, not the UTF-8 bytes
                out[m[na]] = java_int(utf8_hashes(self.cat, a[na], b[na], bytes_base(self.cat))[0])
        return out

    @cached_property
    def prop_crc(self) -> np.ndarray:
        """Messages with a ``__CRC32#`` property."""
        out = np.zeros(self.n, bool)
        out[self.value(CRC_MARK)[0]] = True
        return out

    def simple(self) -> np.ndarray:
        """Messages (bool) whose parse keeps every pair, in order: non-empty, well formed,
        valid UTF-8, one \x01 per pair (none inside a value) and no name twice (names
        compared by length and first four bytes: two names alike in those count as a
        repeat). For these the PROPERTIES bytes can be rewritten pair by pair."""
        out = self.mend > self.moff if self.tot else np.zeros(self.n, bool)
        if not self.tot:
            return out
        out[self.suspects()] = False
        pairs = np.bincount(self.owner, minlength=self.n)
        # each message's \x01s: the sorted positions counted between message starts (the
        # messages lie end to end in cat), not each one's message searched
        out &= np.diff(np.searchsorted(self.ones, self.moff), append=self.ones.size) == pairs
        name_len = np.clip(self.first1 - self.starts, 0, 0xFFFF).astype(np.int64)
        head = self.prefix4.astype(np.int64) >> (8 * np.maximum(4 - name_len, 0))  # a short name's bytes only
        out[repeated_keys(self.owner.astype(np.int64) << 48 | name_len << 32 | head, int(pairs.max())) >> 48] = False
        return out

    def suspects(self) -> np.ndarray:
        """Messages whose properties need a closer look: malformed pairs, or non-ASCII bytes
        that may not be UTF-8 (one decode of the whole batch clears them all when it is)."""
        bad = self.suspect.copy()
        if self.hp.size:
            cat = self.cat
            first = cat[self.moff[self.mend > self.moff]]
            cont = ((first & 0xC0) == 0x80).any()  # a character split across two messages
            try:
                if cont:
                    raise UnicodeDecodeError("utf-8", b"", 0, 1, "split")
                _non_ascii_runs(cat, self.hp).decode("utf-8")
            except UnicodeDecodeError:
                bad |= self.non_ascii_msg
        return np.flatnonzero(bad)

    def hash_ranges(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Java hashCode (uint32) of the ASCII byte ranges ``cat[a:b]``."""
        if self._hashes is None:
            h = window_hashes(self.cat, a, b)  # the ranges' bytes only
            if h is not None:
                return h
            self._hashes = RangeHashes(self.cat)  # many different lengths: one prefix sum serves all
        return self._hashes(a, b)

    def non_ascii(self, a: np.ndarray, b: np.ndarray, owner: np.ndarray) -> np.ndarray:
        """Which ranges ``cat[a:b]`` (inside the PROPERTIES of messages ``owner``) hold a byte
        >= 0x80: searched among the ranges of messages that have one only (few, usually)."""
        if not self.hp.size:
            return np.zeros(0, np.int64)
        cand = np.flatnonzero(self.non_ascii_msg[owner])
        return cand[np.searchsorted(self.hp, b[cand]) > np.searchsorted(self.hp, a[cand])]

    @property
    def prefix4(self) -> np.ndarray:
        """The first four bytes of every pair as a big-endian uint32 (bytes past the end of
        all PROPERTIES read as the last byte)."""
        if self._prefix is None:
            self._prefix = np.ascontiguousarray(byte_rows(self.cat, self.starts, 4)).view(BE_U32).ravel()
        return self._prefix

    def has_pair(self, name: bytes) -> bool:
        """Whether some pair may be ``name`` (its first four bytes match): the cheap test
        before :meth:`value` or :attr:`prop_crc`, with no copy of the bytes."""
        return bool(self.tot) and bool((self.prefix4 == int.from_bytes(name[:4], "big")).any())

    def value(self, name: bytes):
        """(message index, value start, value end) of the last non-empty pair ``name`` per message."""
        if not self.tot:
            z = np.zeros(0, np.int64)
            return z, z, z
        L = len(name)
        m = np.flatnonzero((self.prefix4 == int.from_bytes(name[:4], "big")) & (self.starts + L < self.end))
        if m.size and L > 4:
            rest = byte_rows(self.cat, self.starts[m] + 4, L - 4)  # clipped to cat's end, as the size check wants
            m = m[(rest == np.frombuffer(name[4:], np.uint8)).all(1)]
        if not m.size:
            z = np.zeros(0, np.int64)
            return z, z, z
        own = self.owner[m]
        last = np.r_[own[1:] != own[:-1], True]
        m = m[last]
        return self.owner[m], self.starts[m] + L, self.end[m]

    def key_ranges(self, indexable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(message, start, end) in ``cat`` of the keys ``IndexService#buildIndex`` indexes for
        the ``indexable`` messages: every UNIQ_KEY, then every non-empty word of KEYS split at
        spaces (each group in message order)."""
        um, ua, ub = self.value(b"UNIQ_KEY\x01")
        km, ka, kb = self.value(b"KEYS\x01")
        if km.size:  # words of KEYS: split each value at its spaces, drop empty words
            # (value() gives pairs in byte order: ka is sorted)
            sp = self.spaces
            r = np.searchsorted(ka, sp, "right") - 1
            inside = (r >= 0) & (sp < kb[np.maximum(r, 0)])
            sp = sp[inside]
            wa = np.concatenate([ka, sp + 1])
            wb = np.concatenate([sp, kb])
            wa.sort()
            wb.sort()
            keep = wb > wa
            wa, wb = wa[keep], wb[keep]
            wm = km[np.searchsorted(ka, wa, "right") - 1]
        else:
            wa = wb = wm = np.zeros(0, np.int64)
        owner = np.concatenate([um, wm])
        a = np.concatenate([ua, wa])
        b = np.concatenate([ub, wb])
        keep = indexable[owner] if owner.size else np.zeros(0, bool)
        return owner[keep], a[keep], b[keep]

    def compiled_keys(self, indexable: np.ndarray, tid: np.ndarray, prefix_hash: np.ndarray):
        """The C loop's twin of :attr:`tags_code` and :meth:`key_ranges` + the keys' index
        hashes (``IndexService#buildIndex``: ``topic#UNIQ_KEY``, ``topic#word`` for each word
        of KEYS; ``prefix_hash``: hashCode of ``topic#`` per topic id), in one pass over the
        PROPERTIES: sets :attr:`tags_code`, returns (message, start, end, index hash, is a
        KEYS word) of the keys, per message its UNIQ_KEY then its words. The C loop hashes
        UTF-16 units of well-formed UTF-8; malformed values (the decoder's U+FFFD rules) are
        hashed here as the reference does. None on the reference path (:data:`FAST_PATHS`)."""
        kern = FAST_PATHS.kernels()
        if kern is None:
            return None
        z = np.zeros(0, np.int64)
        if not self.tot:
            self.tags_code = np.zeros(self.n, np.int64)
            return z, z, z, z, z.astype(bool)
        tags = np.empty(self.n, np.int64)
        args = (
            self.cat,
            self.moff,
            self.mend - self.moff,
            np.ascontiguousarray(indexable, bool),
            np.ascontiguousarray(tid, np.int64),
            np.ascontiguousarray(prefix_hash, np.int64),
            tags,
        )
        # room for every key: a UNIQ_KEY and a KEYS value a message, a word more per space
        rows = np.empty((2 * self.n + self.spaces.size, kern.KEY_COLS), np.int64)
        k = kern.prop_keys(*args, rows)
        owner, a, b, ih, flags = rows[:k].T
        wide = np.flatnonzero(tags == kern.TAGS_WIDE)
        if wide.size:  # malformed UTF-8: the decoder's replacements, as the reference does
            m, ta, tb = self.value(b"TAGS\x01")
            sel = np.flatnonzero(np.isin(m, wide))
            tags[m[sel]] = java_int(utf8_hashes(self.cat, ta[sel], tb[sel], bytes_base(self.cat))[0])
        self.tags_code = tags
        ih = ih.copy()
        wide = np.flatnonzero(flags & kern.KEY_WIDE)
        if wide.size:
            h, lens = utf8_hashes(self.cat, a[wide], b[wide], bytes_base(self.cat))
            pfx = np.asarray(prefix_hash)[np.asarray(tid)[owner[wide]]]
            ih[wide] = index_hash(concat_hashes(pfx, lens, h))
        return owner.copy(), a.copy(), b.copy(), ih, (flags & kern.KEY_WORD) != 0

    def index_keys(
        self, tid: np.ndarray, prefix_hash: np.ndarray, indexable: np.ndarray, topic_names: list[bytes]
    ) -> IndexKeys:
        """``IndexService#buildIndex`` keys (topic#UNIQ_KEY, topic#k for each KEYS word) with
        their hashes, every UNIQ_KEY first (the C loop's keys put in that order); sets
        :attr:`tags_code` too on the C path."""
        cat = self.cat
        got = self.compiled_keys(indexable, tid, prefix_hash)
        if got is not None:
            return grouped_keys(*got, cat, tid, topic_names)
        owner, a, b = self.key_ranges(indexable)
        pfx = prefix_hash[tid[owner]]
        h = self.hash_ranges(a, b)
        lens = b - a
        na = self.non_ascii(a, b, owner)
        if na.size:  # hashCode runs over UTF-16 code units, not the UTF-8 bytes: re-hash those keys
            h[na], lens[na] = utf8_hashes(cat, a[na], b[na], bytes_base(cat))
        ih = index_hash(concat_hashes(pfx, lens, h))
        return IndexKeys(owner, ih, cat, a, b, _topic_namer(tid, topic_names))


def _topic_namer(tid: np.ndarray, topic_names: list[bytes]):
    """The topic of message m as text (an index key's text is ``topic#key``)."""

    def topic_of(m: int) -> str:
        return topic_names[int(tid[m])].decode("utf-8", "backslashreplace")

    return topic_of


def grouped_keys(owner, a, b, ih, word, cat, tid, topic_names) -> IndexKeys:
    """:class:`IndexKeys` of key rows in put order (per message its UNIQ_KEY, then its KEYS
    words: ``word``), every UNIQ_KEY first as the reference groups them."""
    order = np.concatenate([np.flatnonzero(~word), np.flatnonzero(word)])
    return IndexKeys(owner[order], ih[order], cat, a[order], b[order], _topic_namer(tid, topic_names), put=(owner, ih))
