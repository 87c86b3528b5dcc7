"""Look-ups by key and by id: the broker's query path, and the real-key check it lacks.

``IndexService#queryOffset`` answers with *hash* matches (docs/format/index.md#query) and
``DefaultMessageStore#queryMessage`` adds up to three rounds but never compares the real
key (docs/format/index.md#the-brokers-query-and-the-clients-filter); a RocketMQ client does
that (``MQAdminImpl#queryMessage``). This module gives both answers:

* :func:`broker_query_message` — exactly the broker's records for a query, to explain
  what ``mqadmin queryMsgByKey`` showed someone;
* :func:`lookup_key` — what a person means: messages whose *real* store time lies in
  ``[begin, end]`` and whose real key matches, with hash collisions set apart. The index
  is asked a little wider (timeDiff is whole seconds; the first entry of a rolled file
  reads back late, docs/format/index.md#rolling) and each hit is filtered by its message's store timestamp.

Everything here touches only index headers, one slot and its chain per file, and the
records the chain points at, so a look-up in 420 MB index files reads a few pages.
No numpy: ``decode-msgid`` and ``index-lookup`` start fast (``MessageStore`` reads queues lazily).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqstore_cli.store.commitlog import CommitLog, Status
from rmqstore_cli.store.files.mapped_files import release_pages
from rmqstore_cli.store.javahash import index_key_hash
from rmqstore_cli.store.queues.index import IndexFile, build_key
from rmqstore_cli.store.queues.index_service import IndexService
from rmqstore_cli.store.records.message import KEY_SEPARATOR, Message

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
#: An entry's index time is its store time truncated to whole seconds after the file's
#: beginTimestamp, so it lies in (real - 1000, real].
_TRUNCATION_SLACK = 999


# ---------------------------------------------------------------- the real-key check


def key_match(msg: Message, topic: str, key: str) -> str | None:
    """The client's real-key filter (``MQAdminImpl#queryMessage``): ``"uniq_key"`` when the
    UNIQ_KEY equals the key, ``"keys"`` when ``KEYS.split(" ")`` contains it, else None.
    The topic must be the record's own topic."""
    if msg.topic != topic:
        return None
    if msg.uniq_key is not None and msg.uniq_key == key:
        return "uniq_key"
    raw = msg.keys_raw
    if raw and key in raw.split(KEY_SEPARATOR):
        return "keys"
    return None


def read_record(commitlog: CommitLog, offset: int) -> tuple[Message | None, str]:
    """The record an index entry or id points at, like ``lookMessageByOffset``: the
    message, or None and why not (expired, beyond the log, not a valid record)."""
    if offset < 0:
        return None, f"negative offset {offset}"
    c = commitlog.check_at(offset)
    if c is not None:
        _release_around(commitlog, offset, c.size)
    if c is None:
        if commitlog.files and offset < commitlog.min_offset:
            return None, f"expired: the commit log starts at {commitlog.min_offset}"
        return None, "no commit-log file holds this offset"
    if c.message is None or c.status is Status.INVALID:
        return None, c.reason or c.status.value
    return c.message, ""


#: The kernel maps up to this much around a faulting page (``fault_around_bytes``).
_FAULT_AROUND = 64 << 10


def _release_around(commitlog: CommitLog, offset: int, size: int) -> None:
    """Drop the mapped pages a record read faulted in (its 64 KB fault-around windows) from
    this process's memory: a look-up with 24 000 hits spread over a 1 GB commit-log file
    kept every touched page resident (2.3 GB RSS); the decoded message holds copies."""
    f = commitlog.queue.find(offset)
    if f is None:
        return
    pos = offset - f.file_from_offset
    lo = pos - pos % _FAULT_AROUND
    hi = pos + max(size, 0) + _FAULT_AROUND
    release_pages(f.buffer(), lo, hi - hi % _FAULT_AROUND)


# ---------------------------------------------------------------- the broker's query


@dataclass(slots=True)
class Hit:
    """An index entry for ``topic#key`` and what lies at its offset.

    ``match``: ``"keys"`` / ``"uniq_key"`` (a true hit), ``"collision"`` (same hash, other
    key or topic), ``"outside"`` (true key, store time outside the window) or ``"stale"``
    (no valid record there: expired, truncated or overwritten, docs/format/index.md#entries-and-the-commit-log).
    """

    key: str
    topic: str
    physical_offset: int
    index_file: str
    message: Message | None
    match: str
    reason: str = ""

    @property
    def true(self) -> bool:
        return self.match in ("keys", "uniq_key")

    @property
    def store_timestamp(self) -> int | None:
        return self.message.store_timestamp if self.message is not None else None


_MESSAGE_SLOT = Hit.__dict__["message"]


class _RereadHit(Hit):
    """A hit of :func:`lookup_key` that keeps no decoded message (a shared key has tens of
    thousands of hits, each body a copy): ``message`` reads the record again from the
    commit log on each access (a few µs, its pages released again), so a look-up's memory
    does not grow with its hits' bodies."""

    __slots__ = ("_commitlog", "_ts")

    def __init__(
        self,
        key: str,
        topic: str,
        physical_offset: int,
        index_file: str,
        match: str,
        commitlog: CommitLog,
        ts: int,
        reason: str = "",
    ):
        Hit.__init__(self, key, topic, physical_offset, index_file, None, match, reason)
        self._commitlog, self._ts = commitlog, ts

    @property
    def message(self) -> Message | None:
        return read_record(self._commitlog, self.physical_offset)[0]

    @message.setter
    def message(self, value) -> None:  # the dataclass __init__ sets it (to None)
        _MESSAGE_SLOT.__set__(self, value)

    @property
    def store_timestamp(self) -> int | None:
        return self._ts


def query_offset(
    index: IndexService, topic: str, key: str, max_num: int, begin: int, end: int, cap: bool = True
) -> list[tuple[int, str]]:
    """``IndexService#queryOffset`` with the file each offset came from: newest file first,
    stop at a file older than ``begin`` or at ``max_num`` hits (capped by maxMsgsNumBatch)."""
    if cap:
        max_num = min(max_num, index.max_msgs_num_batch)
    out: list[int] = []
    files: list[tuple[int, str]] = []
    k = build_key(topic, key)
    for f in reversed(index.files):
        last = f is index.files[0]
        if f.is_time_matched(begin, end):
            n = len(out)
            f.select_phy_offset(k, max_num, begin, end, out)
            files.extend((phy, f.name) for phy in out[n:])
        if f.header.begin_timestamp < begin or len(out) >= max_num or last:
            break
    return files


def broker_query_message(
    index: IndexService, commitlog: CommitLog, topic: str, key: str, max_num: int, begin: int, end: int
) -> list[Hit]:
    """``DefaultMessageStore#queryMessage``
    (docs/format/index.md#the-brokers-query-and-the-clients-filter), then the client's key check.

    Up to 3 rounds of ``queryOffset(topic, key, maxNum, begin, lastQueryMsgTime)``; each
    round's offsets sorted ascending; ``lastQueryMsgTime`` = store time of the first one;
    stop after a round that returned a record or when ``lastQueryMsgTime < begin``.
    Records that cannot be read are left out, as the broker's caught exception does.
    Every returned record is a :class:`Hit` whose ``match`` says whether the client keeps it.
    """
    hits: list[Hit] = []
    last_query_time = end
    for _ in range(3):
        found = query_offset(index, topic, key, max_num, begin, last_query_time)
        if not found:
            break
        found.sort(key=lambda x: x[0])  # Collections.sort: stable, by offset
        for m, (phy, fname) in enumerate(found):
            msg, _why = read_record(commitlog, phy)
            if msg is None:
                continue
            if m == 0:
                last_query_time = msg.store_timestamp
            match = key_match(msg, topic, key) or "collision"
            hits.append(Hit(key, topic, phy, fname, msg, match))
        if hits:
            break
        if last_query_time < begin:
            break
    return hits


# ---------------------------------------------------------------- what a person means


def _candidates(f: IndexFile, full_key: str, begin: int, end: int):
    """Entries of ``f`` on the key's chain whose hash matches and whose real store time
    may lie in ``[begin, end]``: index time in ``[begin - 999, end]``, plus entry 1, whose
    index time reads late in a rolled file (docs/format/index.md#rolling). Newest first; yields phy offsets."""
    h = index_key_hash(full_key)
    lo = begin - _TRUNCATION_SLACK
    for n, key_hash, phy, t in _chain(f, f.read_slot(h), lo):
        if key_hash == h and (n == 1 or lo <= t <= end):
            yield phy


def _chain(f: IndexFile, v: int, lo: int):
    """The entries on the hash chain from slot value ``v``, newest first, as (entry number, key
    hash, phy offset, index time), at most ``chain_limit`` steps (``IndexFile#selectPhyOffset``)."""
    count = f.header.index_count
    if v <= 0 or v > count or count <= 1:
        return
    base = f.header.begin_timestamp
    n, steps = v, 0
    limit = f.chain_limit
    while steps <= limit:
        steps += 1
        key_hash, phy, diff, prev = f.read_entry(n)
        if diff < 0:
            break
        t = base + diff * 1000
        yield n, key_hash, phy, t
        if _chain_ends(prev, count, n, t, lo):
            break
        n = prev


def _chain_ends(prev: int, count: int, n: int, t: int, lo: int) -> bool:
    """The chain ends at entry ``n``: its link points nowhere valid (or at itself), or its time
    is before the window (entry 1's time reads late in a rolled file, so it never ends it)."""
    return prev <= 0 or prev > count or prev == n or (t < lo and n != 1)


@dataclass
class LookupResult:
    hits: list[Hit] = field(default_factory=list)
    #: Hash matches that are not true hits (collisions, stale entries, true key outside
    #: the window), for ``--show-collisions``.
    others: list[Hit] = field(default_factory=list)
    #: True when more true hits existed than ``max_hits``.
    capped: bool = False


def lookup_key(
    index: IndexService,
    commitlog: CommitLog,
    topics: list[str],
    key: str,
    begin: int = 0,
    end: int = LONG_MAX,
    max_hits: int = 64,
) -> LookupResult:
    """Messages of ``topics`` whose real key is ``key`` and whose store time lies in
    ``[begin, end]``; one hit per message (duplicate and split index entries merged).

    ``max_hits`` (0 = no cap) keeps the newest hits, as the broker's newest-first walk
    does. Hits come back in physical-offset order.
    """
    res = LookupResult()
    limit = max_hits + 1 if max_hits else 0  # one more than asked: tells whether we capped
    for topic in topics:
        _look_up_in_topic(res, index, commitlog, topic, key, begin, end, limit)
    res.hits.sort(key=lambda h: (h.store_timestamp, h.physical_offset))
    if max_hits and len(res.hits) > max_hits:
        res.hits = res.hits[-max_hits:]
        res.capped = True
    res.hits.sort(key=lambda h: (h.physical_offset, h.topic))
    res.others.sort(key=lambda h: (h.physical_offset, h.topic))
    return res


def _look_up_in_topic(
    res: LookupResult,
    index: IndexService,
    commitlog: CommitLog,
    topic: str,
    key: str,
    begin: int,
    end: int,
    limit: int,
) -> None:
    """The candidates of ``topic``'s key in every index file, newest file first, each offset
    judged once, until ``limit`` true hits (0: no limit)."""
    full_key = build_key(topic, key)
    seen: set[int] = set()
    true_count = 0
    for f in reversed(index.files):
        if limit and true_count >= limit:
            break
        if not _may_hold(f, begin, end):
            continue
        for phy in _candidates(f, full_key, begin, end):
            if limit and true_count >= limit:
                break
            if phy not in seen:
                seen.add(phy)
                true_count += _judge(res, commitlog, topic, key, phy, f.name, begin, end)


def _may_hold(f: IndexFile, begin: int, end: int) -> bool:
    """The index file has entries and its time range meets ``[begin, end]``."""
    hb = f.header
    return hb.index_count > 1 and hb.end_timestamp >= begin and hb.begin_timestamp <= end


def _judge(
    res: LookupResult, commitlog: CommitLog, topic: str, key: str, phy: int, fname: str, begin: int, end: int
) -> bool:
    """The record at ``phy`` as a hit (its real key is ``key``, its store time in the window) or
    one of the others (stale entry, hash collision, outside the window); True for a hit."""
    msg, why = read_record(commitlog, phy)
    if msg is None:
        res.others.append(Hit(key, topic, phy, fname, None, "stale", why))
        return False
    match = key_match(msg, topic, key)
    if match is None:
        res.others.append(_RereadHit(key, topic, phy, fname, "collision", commitlog, msg.store_timestamp))
        return False
    if not begin <= msg.store_timestamp <= end:
        res.others.append(
            _RereadHit(
                key, topic, phy, fname, "outside", commitlog, msg.store_timestamp, "store time outside the window"
            )
        )
        return False
    res.hits.append(_RereadHit(key, topic, phy, fname, match, commitlog, msg.store_timestamp))
    return True


def search_topics(st, given: list[str] | None) -> tuple[list[str], str | None]:
    """(the topics a look-up by key searches, a note to say about them): ``given`` (each once,
    in order), else every topic the store knows, else, with no consume queue and no
    topics.json, every topic a commit-log record names (``IndexService#buildIndex`` indexed a
    key under its record's topic)."""
    if given:
        return list(dict.fromkeys(given)), None
    topics = st.topics()
    if topics:
        return topics, None
    topics = st.topics_from_commitlog()
    return topics, (
        f"no consume queues or config/topics.json: searching the {len(topics)} topic(s) named in the commit log"
    )


@dataclass
class KeyAnswer:
    """What a look-up by key found: the hits whose message carries the key, the others
    (collisions, stale entries, hits outside the window), whether the cap cut the hits, and
    whether they were found under the upper-case UNIQ_KEY."""

    hits: list
    others: list
    capped: bool
    upper: bool = False


def find_key(st, topics: list[str], key: str, begin: int, end: int, cap: int, broker_window: bool) -> KeyAnswer:
    """``key`` in ``topics`` (:func:`lookup_key`, or :func:`broker_query_message` for the
    broker's own window); a lower-case UNIQ_KEY that finds nothing is looked up again in
    upper case, as ``MessageClientIDSetter`` writes and the index holds it."""

    def query(k: str) -> KeyAnswer:
        if broker_window:
            hits, others = [], []
            for t in topics:
                for h in broker_query_message(st.index, st.commitlog, t, k, cap or INT_MAX, begin, end):
                    (hits if h.true else others).append(h)
            return KeyAnswer(hits, others, False)
        r = lookup_key(st.index, st.commitlog, topics, k, begin, end, cap)
        return KeyAnswer(r.hits, r.others, r.capped)

    a = query(key)
    hexdigits = "0123456789abcdefABCDEF"
    if not a.hits and key != key.upper() and len(key) in (32, 56) and all(c in hexdigits for c in key):
        b = query(key.upper())
        if b.hits:
            b.upper = True
            return b
    return a


def not_found(st, topics: list[str], key: str, windowed: bool, no_index: bool):
    """Why a look-up by key found nothing (exit 1): no topic at all, a key with a space
    (never indexed), or simply no message with that key."""
    from rmqstore_cli.errors import NotFound, setting

    if not topics:
        return NotFound(
            "the store knows no topic: no consume queue, config/topics.json or commit-log record names one",
            path=st.config.root,
            hint=f"pass {setting('topics')}",
        )
    if " " in key:
        return NotFound(
            f"no message with key {key!r}",
            hint="KEYS are split on spaces when they are indexed "
            "(IndexService#buildIndex), so a key with a space in it is never in the index: look up "
            "one word of it",
        )
    return NotFound(
        f"no message with key {key!r}"
        + (f" in topic {topics[0]!r}" if len(topics) == 1 else "")
        + (" in that time window" if windowed else ""),
        hint="the store has no index files (messageIndexEnable=false?)" if no_index else None,
    )
