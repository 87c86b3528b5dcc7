"""BatchConsumeQueue: 46-byte units of a 5.x ``queue.type=BatchCQ`` topic, and the sparse
queue of the compaction store (``SparseConsumeQueue``), read as the broker recovers them.

A unit names its own queue offsets (``msgBaseOffset`` .. ``+ batchSize``), so, unlike a
20-byte consume queue, a unit's place in its file says nothing about its queue offset: the
queue offset of a message inside an inner batch is found by the broker's binary search over
``msgBaseOffset`` (``BatchConsumeQueue#getBatchMsgIndexBuffer``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.batch_queue import (
    BATCH_CQ_UNIT_SIZE,
    BCQ_UNIT_FORMAT,
    INVALID_POS,
    BatchConsumeQueueUnit,
)
from rmqstore_cli.formats.derive import numpy_dtype

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import (
    MappedFile,
    MappedFileQueue,
    offset2file_name,
    queue_dirs,
    regular_size,
)

BCQ_UNIT_DTYPE = numpy_dtype(BatchConsumeQueueUnit)
_UNIT = struct.Struct(BCQ_UNIT_FORMAT)


@dataclass(slots=True)
class BatchUnit:
    """One unit, where it lies (``file``, byte ``pos`` in it) and its index in the queue."""

    index: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_time: int
    msg_base_offset: int
    batch_size: int
    compacted_offset: int
    file: str
    pos: int


def valid_units(u: np.ndarray) -> np.ndarray:
    """``BatchConsumeQueue#recover``'s test, element-wise: ``offset >= 0 && size > 0 &&
    msgBaseOffset >= 0 && batchSize > 0``."""
    return (u["commitlog_offset"] >= 0) & (u["size"] > 0) & (u["msg_base_offset"] >= 0) & (u["batch_size"] > 0)


class BatchConsumeQueue:
    """One queue's files, read-only. ``sparse``: the compaction store's queue, each file read
    up to its end unit, then the next file (``SparseConsumeQueue#recover``,
    ``#getMaxMsgOffset``), else ``BatchConsumeQueue#recover`` (the first invalid unit ends
    the queue)."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        queue_id: int,
        file_size: int | None = None,
        sparse: bool = False,
        queue: MappedFileQueue | None = None,
    ):
        """``queue``: the files, when they are not a directory's listing (:meth:`of_file`)."""
        self.dir = directory
        self.topic = topic
        self.queue_id = queue_id
        self.sparse = sparse
        if queue is None:
            probe = MappedFileQueue(directory, 1)
            if file_size is None:  # the files' own size (every file is created at the configured size)
                file_size = max((regular_size(f.path) for f in probe.files), default=BATCH_CQ_UNIT_SIZE)
            queue = MappedFileQueue(directory, file_size)
        self.file_size = queue.file_size
        self.queue = queue
        self.strays = self.queue.strays
        for p in self.queue.not_regular:
            raise StoreError("a directory where a store file belongs; only regular files are read", path=p)
        self._valid: list[int] | None = None

    @classmethod
    def of_file(cls, path: Path, sparse: bool) -> BatchConsumeQueue:
        """One file read on its own (``dump-cq --file``): its directory is not listed."""
        name = path.name
        start = int(name) if name.isdigit() and name.isascii() and len(name) == 20 else 0
        q = path.parent
        return cls(
            q,
            q.parent.name,
            int(q.name) if q.name.isdigit() and q.name.isascii() else 0,
            sparse=sparse,
            queue=MappedFileQueue.of_file(path, start, max(regular_size(path), BATCH_CQ_UNIT_SIZE)),
        )

    def file_units(self, f: MappedFile) -> np.ndarray:
        """Every whole unit of the file, valid or not, as a numpy view of its mapping."""
        buf = f.buffer()
        n = len(buf) // BATCH_CQ_UNIT_SIZE
        return np.frombuffer(buf, BCQ_UNIT_DTYPE, count=n) if n else np.zeros(0, BCQ_UNIT_DTYPE)

    @property
    def valid_counts(self) -> list[int]:
        """Per file, how many units the broker reads after recovery (0 for the files after
        the queue's end)."""
        if self._valid is None:
            self._valid = self._recover()
        return self._valid

    def _recover(self) -> list[int]:
        """``BatchConsumeQueue#recover``: from file n-3 on (earlier files are taken whole),
        units up to the first invalid one, which ends the queue. A sparse queue:
        ``SparseConsumeQueue#recover`` reads each file from n-3 on up to its own first
        invalid unit; of an earlier file the broker reads up to its last valid unit
        (:meth:`_through_last_valid`)."""
        files = self.queue.files
        first = max(0, len(files) - 3)
        if self.sparse:
            return [self._through_last_valid(f) for f in files[:first]] + [
                self._leading_valid(f) for f in files[first:]
            ]
        counts = [len(self.file_units(f)) for f in files[:first]]
        ended = False
        for f in files[first:]:
            n = 0 if ended else self._leading_valid(f)
            counts.append(n)
            ended = ended or n * BATCH_CQ_UNIT_SIZE < self.file_size
        return counts

    def _leading_valid(self, f: MappedFile) -> int:
        """How many units the file holds before its first invalid one."""
        u = self.file_units(f)
        bad = np.flatnonzero(~valid_units(u))
        return int(bad[0]) if bad.size else len(u)

    def _through_last_valid(self, f: MappedFile) -> int:
        """How many units the file holds up to its last valid one: a sparse file before n-3
        is left at its full size by ``MappedFileQueue#load``, and
        ``SparseConsumeQueue#getMaxMsgOffset`` looks for its last unit from the end, skipping
        the end unit (offset -1) and the zeros that ``#putEndPositionInfo`` left where the
        file rolled; the binary searches of ``#getBatchMsgIndexOrNextBuffer`` stay within
        [first unit, that unit]. An invalid unit before it is a hole the broker's reads meet
        (``CompactionLog#getMessage`` stops there): verify reports it."""
        good = np.flatnonzero(valid_units(self.file_units(f)))
        return int(good[-1]) + 1 if good.size else 0

    def unit_arrays(self) -> Iterator[tuple[MappedFile, np.ndarray, int]]:
        """(file, its recovered units, the queue index of its first unit), in file order."""
        index = 0
        for f, n in zip(self.queue.files, self.valid_counts, strict=True):
            if n:
                yield f, self.file_units(f)[:n], index
                index += n

    def units(self) -> Iterator[BatchUnit]:
        """Every recovered unit, in order."""
        for f, arr, first in self.unit_arrays():
            for j, row in enumerate(arr.tolist()):
                off, size, tags, ts, base, batch, compacted, _ = row
                yield BatchUnit(first + j, off, size, tags, ts, base, batch, compacted, f.name, j * BATCH_CQ_UNIT_SIZE)

    def columns(self) -> np.ndarray:
        """Every recovered unit as one numpy array (a copy)."""
        parts = [a for _, a, _ in self.unit_arrays()]
        return np.concatenate(parts) if parts else np.zeros(0, BCQ_UNIT_DTYPE)

    @property
    def unit_count(self) -> int:
        return sum(self.valid_counts)

    @property
    def min_offset(self) -> int:
        """``#reviseMinOffsetInQueue``: the first file's first unit's msgBaseOffset (0: none)."""
        for _, arr, _ in self.unit_arrays():
            return int(arr[0]["msg_base_offset"])
        return 0

    @property
    def max_offset(self) -> int:
        """``#reviseMaxOffsetInQueue``: the last unit's msgBaseOffset + batchSize (0: none)."""
        last = None
        for _, arr, _ in self.unit_arrays():
            last = arr[-1]
        return 0 if last is None else int(last["msg_base_offset"]) + int(last["batch_size"])

    @property
    def max_physic_offset(self) -> int:
        """``#getMaxPhysicOffset`` after recovery: the last unit's commit-log offset (-1: none)."""
        last = None
        for _, arr, _ in self.unit_arrays():
            last = arr[-1]
        return -1 if last is None else int(last["commitlog_offset"])

    def find(self, msg_offset: int, or_next: bool = False) -> BatchUnit | None:
        """``BatchConsumeQueue#getBatchMsgIndexBuffer``: the unit whose batch holds queue
        offset ``msg_offset`` (msgBaseOffset <= it < msgBaseOffset + batchSize), or None.
        ``or_next``: ``SparseConsumeQueue#getBatchMsgIndexOrNextBuffer``, the first unit
        at or after it when none holds it (compaction removed it)."""
        for f, arr, first in self.unit_arrays():
            ends = arr["msg_base_offset"] + arr["batch_size"]
            j = int(np.searchsorted(ends, msg_offset, side="right"))
            if j >= len(arr):
                continue
            if or_next or int(arr[j]["msg_base_offset"]) <= msg_offset:
                row = arr[j].tolist()
                return BatchUnit(first + j, *row[:7], f.name, j * BATCH_CQ_UNIT_SIZE)
            return None
        return None

    def close(self) -> None:
        self.queue.close()


def batch_queues(root: Path, sparse: bool = False, file_size: int | None = None) -> Iterator[BatchConsumeQueue]:
    """Every ``<topic>/<queueId>`` queue under ``root`` (batchconsumequeue/ or compactionCq/)."""
    for topic, qid, d in queue_dirs(root):
        yield BatchConsumeQueue(d, topic, qid, file_size, sparse)


def pack_unit(offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int, batch_size: int) -> bytes:
    """``BatchConsumeQueue#putBatchMessagePositionInfo``'s 46 bytes (compactedOffset
    ``INVALID_POS``, 4 reserved bytes 0)."""
    return _UNIT.pack(offset, size, tags_code, store_time, msg_base_offset, batch_size, INVALID_POS, 0)


class BatchConsumeQueueWriter:
    """``BatchConsumeQueue#putBatchMessagePositionInfo`` into a new queue directory: units
    appended after one another, a new file (created at its full size) when one is full."""

    def __init__(self, directory: Path, file_size: int, roots: list[Path]):
        self.dir = directory
        self.file_size = file_size // BATCH_CQ_UNIT_SIZE * BATCH_CQ_UNIT_SIZE
        self.roots = roots
        self.write_offset = 0
        self.max_physic_offset = -1
        self._buf = bytearray()
        self._buf_start = 0

    def resume(self) -> None:
        """Append after the recovered end of a queue already there (a generate --append),
        never over its units: ``BatchConsumeQueue#recover`` then ``#getMaxPhysicOffset``."""
        if not self.dir.is_dir():
            return
        bq = BatchConsumeQueue(self.dir, "", 0, self.file_size)
        counts = bq.valid_counts
        if bq.queue.files:
            last = max((i for i, n in enumerate(counts) if n), default=0)
            f = bq.queue.files[last]
            self.write_offset = self._buf_start = f.file_from_offset + counts[last] * BATCH_CQ_UNIT_SIZE
            self.max_physic_offset = bq.max_physic_offset
        bq.close()

    def put(
        self, offset: int, size: int, tags_code: int, store_time: int, msg_base_offset: int, batch_size: int
    ) -> bool:
        """One unit; a commit-log offset at or below the last one is "built repeatedly": skipped."""
        if offset <= self.max_physic_offset:
            return True
        self.max_physic_offset = offset
        self._buf += pack_unit(offset, size, tags_code, store_time, msg_base_offset, batch_size)
        self.write_offset += BATCH_CQ_UNIT_SIZE
        return True

    def put_many(self, offset, size, tags_code, store_time, msg_base_offset, batch_size) -> None:
        """:meth:`put` over arrays (one queue's units in dispatch order): a unit whose
        commit-log offset is at or below every earlier one's is skipped, the rest packed at once."""
        offset = np.asarray(offset, dtype=np.int64)
        if not len(offset):
            return
        prev = np.full(len(offset), self.max_physic_offset, dtype=np.int64)
        prev[1:] = np.maximum(np.maximum.accumulate(offset[:-1]), self.max_physic_offset)
        keep = np.flatnonzero(offset > prev)
        if not len(keep):
            return
        u = np.zeros(len(keep), BCQ_UNIT_DTYPE)
        for name, col in (
            ("commitlog_offset", offset),
            ("size", size),
            ("tags_code", tags_code),
            ("store_time", store_time),
            ("msg_base_offset", msg_base_offset),
            ("batch_size", batch_size),
        ):
            u[name] = np.asarray(col)[keep]
        u["compacted_offset"] = INVALID_POS
        self.max_physic_offset = int(offset[keep[-1]])
        self._buf += u.tobytes()
        self.write_offset += len(keep) * BATCH_CQ_UNIT_SIZE

    def flush(self) -> None:
        from rmqstore_cli.store.files.safefs import write_range

        data, pos = bytes(self._buf), self._buf_start
        safefs.make_dirs(self.dir, self.roots)
        while data:
            start = pos - pos % self.file_size
            path = self.dir / offset2file_name(start)
            if not path.exists():
                safefs.create_sized(path, self.file_size, self.roots, "batch consume-queue file")
            n = min(len(data), start + self.file_size - pos)
            write_range(path, pos - start, data[:n], "batch consume-queue units", self.roots)
            data, pos = data[n:], pos + n
        self._buf = bytearray()
        self._buf_start = pos


def dispatch_batch(m) -> tuple[int, int]:
    """(msgBaseOffset, batchSize) dispatch gives a record: its queue offset and 1
    (``DispatchRequest``), or INNER_BASE and INNER_NUM when it carries both
    (``CommitLog#setBatchSizeIfNeeded``; a value Java cannot parse: -1, 0)."""
    from rmqstore_cli.formats.batch_queue import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM

    props = m.properties
    if PROPERTY_INNER_NUM in props and PROPERTY_INNER_BASE in props:
        try:
            return int(props[PROPERTY_INNER_BASE]), int(props[PROPERTY_INNER_NUM])
        except ValueError:
            return -1, 0
    return m.queue_offset, 1


def topic_table(root: Path) -> dict | None:
    """``config/topics.json``'s ``topicConfigTable`` as the broker loads it
    (``TopicConfigManager#load``, ``.bak`` when the file does not parse), or None when the
    store has none (a store copied without config/, or the 5.3.3 sample)."""
    from rmqstore_cli.store.layout.configfiles import BROKER_CONFIG_FILES, load_config

    topics_json = next(c for c in BROKER_CONFIG_FILES if c.name == "topics.json")
    try:
        value = load_config(root / "config", topics_json).value
    except StoreError:
        return None
    table = value.get("topicConfigTable") if isinstance(value, dict) else None
    return table if isinstance(table, dict) else None


def topic_attribute(table: dict, topic: str, key: str) -> str | None:
    """The topic's attribute ``key`` as the broker reads it (``TopicConfig#getAttributes``,
    then ``attributes.get(key)``: ``QueueTypeUtils#getCQType``,
    ``CleanupPolicyUtils#getDeletePolicy``), None when the topic, its attributes or the key
    is absent (the caller's default), ``"null"`` for a JSON null (``valueOf`` throws).

    Only the stored key counts: ``+key``/``-key`` are request spellings
    (``AttributeUtil#alterCurrentAttributes`` stores the real key,
    ``TopicConfigManager#updateSingleTopicConfigWithoutPersist``), so a topics.json entry
    spelled ``+queue.type`` is a SimpleCQ topic to the broker."""
    tc = table.get(topic)
    attrs = tc.get("attributes") if isinstance(tc, dict) else None
    if not isinstance(attrs, dict) or key not in attrs:
        return None
    return "null" if attrs[key] is None else str(attrs[key])


def queue_type(table: dict, topic: str) -> str:
    """``QueueTypeUtils#getCQType``: the topic's ``queue.type`` (:func:`topic_attribute`,
    the one parser: :func:`batch_topics`, verify's ``bcq.queue-type``), SimpleCQ when
    absent (returned as written: ``CQType.valueOf`` throws on anything but :data:`CQ_TYPES`)."""
    from rmqstore_cli.formats.batch_queue import QUEUE_TYPE_ATTRIBUTE, SIMPLE_CQ_TYPE

    value = topic_attribute(table, topic, QUEUE_TYPE_ATTRIBUTE)
    return SIMPLE_CQ_TYPE if value is None else value


def batch_topics(root: Path) -> set[str]:
    """Topics whose queues are BatchConsumeQueues (``ConsumeQueueStore#findOrCreateConsumeQueue``
    asks ``QueueTypeUtils#isBatchCq``): ``config/topics.json`` entries whose
    :func:`queue_type` is BatchCQ, and the topics ``batchconsumequeue/`` already has (the topic
    table a broker was given need not be on disk, as in the 5.3.3 sample)."""
    from rmqstore_cli.formats.batch_queue import BATCH_CQ_TYPE

    found = {t for t, _, _ in queue_dirs(root / "batchconsumequeue")}
    table = topic_table(root) or {}
    found.update(name for name in table if queue_type(table, name) == BATCH_CQ_TYPE)
    return found


def batch_position(props: bytes, queue_offset: int) -> tuple[int, int] | None:
    """(msgBaseOffset, batchSize) of a BatchCQ topic's record as dispatch hands it to
    ``BatchConsumeQueue#putMessagePositionInfoWrapper``: INNER_BASE and INNER_NUM of its
    PROPERTIES (``CommitLog#setBatchSizeIfNeeded``), else its queue offset and 1; None for
    what the broker does not write (a value Java cannot parse, a negative one: logged)."""
    from rmqstore_cli.store.records.properties import pick_property

    num, base = pick_property(props, b"INNER_NUM\x01"), pick_property(props, b"INNER_BASE\x01")
    try:
        base_offset, batch = (int(base), int(num)) if num is not None and base is not None else (queue_offset, 1)
    except ValueError:
        return None
    if base_offset < 0 or batch < 0:
        return None
    return base_offset, batch


def batch_file_size(config, root: Path) -> int:
    """``mapperFileSizeBatchConsumeQueue``: configured, else the size of the files there, else
    the broker's default."""
    from rmqstore_cli.formats.batch_queue import DEFAULT_BCQ_FILE_SIZE

    if config.mapper_file_size_batch_consume_queue > 0:
        return config.mapper_file_size_batch_consume_queue
    for _, _, d in queue_dirs(root / "batchconsumequeue"):
        for p in sorted(d.iterdir()):
            if p.is_file() and p.stat().st_size:
                return p.stat().st_size
    return DEFAULT_BCQ_FILE_SIZE


def encode_inner_message(body: bytes, properties: bytes, flag: int = 0) -> bytes:
    """``MessageDecoder#encodeMessage``: one message of a batch body (magic and CRC 0)."""
    from rmqstore_cli.formats.batch_queue import INNER_MESSAGE_OVERHEAD, InnerBatchMessage

    return InnerBatchMessage.build(
        dict(
            total_size=INNER_MESSAGE_OVERHEAD + len(body) + len(properties),
            magic=0,
            body_crc=0,
            flag=flag,
            body=body,
            properties=properties,
        )
    )


def assign_inner_base(spec, queue_table: dict[str, int]) -> int:
    """``BatchConsumeQueue#assignQueueOffset`` for an inner-batch send: the queue's next
    offset becomes the record's QUEUEOFFSET and its INNER_BASE property (put into the
    broker's HashMap of 128 and re-serialised); returns the messages it counts (INNER_NUM),
    by which ``#increaseQueueOffset`` then moves the queue on."""
    from rmqstore_cli.formats.batch_queue import PROPERTY_INNER_BASE, PROPERTY_INNER_NUM
    from rmqstore_cli.formats.properties import parse_properties, serialize_properties

    from rmqstore_cli.store.records.message import JavaHashMap

    base = queue_table.get(f"{spec.topic}-{spec.queue_id}", 0)
    m = JavaHashMap(128)
    for k, v in parse_properties(spec.properties).items():
        m.put(k, v)
    m.put(PROPERTY_INNER_BASE, str(base))
    spec.properties = serialize_properties(m.items(), True)
    spec.queue_offset = base
    return int(m.get(PROPERTY_INNER_NUM) or 1)


# a BatchCQ queue where the readers of consume queues look (search-offset,
# consumer-progress, stats)
def store_batch_queues(config, topic: str | None = None) -> Iterator[BatchConsumeQueue]:
    """The BatchCQ queues of the store (``batchconsumequeue/<topic>/<queueId>``) of ``topic``
    or all, but those a ``consumequeue/`` directory of the same name shadows (the broker
    keeps one queue per topic and id: ``ConsumeQueueStore#findOrCreateConsumeQueue``)."""
    size = config.mapper_file_size_batch_consume_queue or None
    for t, qid, d in queue_dirs(config.root / "batchconsumequeue"):
        if (topic is None or t == topic) and not (config.consumequeue_dir / t / str(qid)).is_dir():
            yield BatchConsumeQueue(d, t, qid, size)


def batch_queue_of(config, topic: str, queue_id: int) -> BatchConsumeQueue | None:
    """One BatchCQ queue (:func:`store_batch_queues`), or None."""
    return next((q for q in store_batch_queues(config, topic) if q.queue_id == queue_id), None)


def _search_right(ts: list[int], left: int, right: int, when: int, upper: bool) -> int:
    """``BatchConsumeQueue#binarySearchRight`` over unit indices (the Java steps by
    46-byte positions; ``ceil`` rounds the middle down to a unit): -1 when none."""
    while left <= right:
        mid = (left + right) // 2
        v = ts[mid]
        if mid == right:
            return mid if v >= when else -1
        if mid == left:
            if v >= when:
                return mid
            left = mid + 1
        elif not upper:
            if v < when:
                left = mid + 1
            else:
                right = mid
        elif v <= when:
            left = mid
        else:
            right = mid - 1
    return -1


def offset_by_time(bq: BatchConsumeQueue, when: int, upper: bool = False) -> int:
    """``BatchConsumeQueue#getOffsetInQueueByTime`` of 5.3.3 with the default
    ``searchBcqByCacheEnable=true``: the last file when its first unit is at or before
    ``when``, else the file ``timeCache.floorEntry(when)`` names (the latest start time at
    or before it; the first file when none), then ``binarySearchRight`` in that file; a
    time at or after the file's last unit answers that unit's msgBaseOffset. Returns the
    msgBaseOffset found, -1 when the broker finds none (unclamped)."""
    files = [(f, arr) for f, arr, _ in bq.unit_arrays()]
    if not files:
        return -1
    target = _file_by_time(bq, files, when)
    if target is None:
        return -1
    ts = target["store_time"].tolist()
    if when >= ts[-1]:
        return int(target[-1]["msg_base_offset"])
    mid = _search_right(ts, 0, len(ts) - 1, when, upper)
    return -1 if mid == -1 else int(target[mid]["msg_base_offset"])


def _file_by_time(bq: BatchConsumeQueue, files: list, when: int) -> np.ndarray | None:
    """The units of the file ``#getOffsetInQueueByTime`` searches (None: no file to search)."""
    last_file_empty = bq.valid_counts[len(bq.queue.files) - 1] == 0 if bq.queue.files else True
    if not last_file_empty and int(files[-1][1][0]["store_time"]) <= when:
        return files[-1][1]
    cache: dict[int, np.ndarray] = {}  # refreshCache: a later file of the same start time wins
    for _, arr in files:
        cache[int(arr[0]["store_time"])] = arr
    floor = [k for k in cache if k <= when]
    if floor:
        return cache[max(floor)]
    return files[0][1] if bq.valid_counts[0] else None  # searchTimeFromCache: the first file


def first_at_or_after(bq: BatchConsumeQueue, when: int) -> BatchUnit | None:
    """The first unit stored at or after ``when`` (the units' own store times: an inner
    batch is one record, one time), or None."""
    for f, arr, first in bq.unit_arrays():
        hit = np.flatnonzero(arr["store_time"] >= when)
        if hit.size:
            j = int(hit[0])
            return BatchUnit(first + j, *arr[j].tolist()[:7], f.name, j * BATCH_CQ_UNIT_SIZE)
    return None
