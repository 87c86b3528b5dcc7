"""The message filters every reader shares (``dump-commitlog``, the library's
``Store.messages``, export): topic, queue, key, UNIQ_KEY, tag and a store-time window.

One definition, applied two ways with the same verdicts: to a decoded record
(:meth:`MessageFilter.matches`, the reference) and to a whole
:class:`~rmqstore_cli.store.commitlog.columns.MessageBlock` by its columns (:meth:`MessageFilter.select`),
which only the filters that need no PROPERTIES can do (:meth:`MessageFilter.columnar`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MessageFilter:
    """The record filters (None: not given). ``uniq_key`` is compared upper-case, as the
    client writes it (``MessageClientIDSetter#createUniqID``: hex digits in upper case);
    ``begin``/``end`` are store times in epoch milliseconds, both inclusive."""

    topic: str | None = None
    queue_id: int | None = None
    key: str | None = None
    uniq_key: str | None = None
    tag: str | None = None
    begin: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        if self.uniq_key is not None and self.uniq_key != self.uniq_key.upper():
            object.__setattr__(self, "uniq_key", self.uniq_key.upper())

    def any(self) -> bool:
        """Whether any filter is given (a walk that shows nothing is then a negative answer)."""
        return any(
            x is not None for x in (self.topic, self.queue_id, self.key, self.uniq_key, self.tag, self.begin, self.end)
        )

    def columnar(self) -> bool:
        """Whether whole blocks can be filtered by their columns (no filter needs a property)."""
        return self.key is None and self.uniq_key is None and self.tag is None

    def property_needles(self) -> list[bytes] | None:
        """The bytes a record's PROPERTIES must hold for the key, unique-key and tag filters to
        pass (each value's UTF-8), or None when that cannot be told from the bytes: an empty
        value, or one with U+FFFD or a lone surrogate (the record's text is decoded with
        replacement, so such a value may match bytes that are not its UTF-8)."""
        out = []
        for v in (self.key, self.uniq_key, self.tag):
            if v is None:
                continue
            if not v or "\ufffd" in v:
                return None
            try:
                out.append(v.encode("utf-8"))
            except UnicodeEncodeError:
                return None
        return out

    def candidates(self, blk: Any) -> Any:
        """Indices of a block's records that may pass: the column filters' verdict (:meth:`select`)
        and, for the property filters, the rows whose PROPERTIES hold each value's bytes; the
        exact verdict is :meth:`matches` on each candidate decoded."""
        take = self.select(blk)
        needles = self.property_needles()
        if needles and take.size:
            import numpy as np

            held = np.ones(blk.n, bool)
            for needle in needles:
                held &= blk.properties_holding(needle)
            take = take[held[take]]
        return take

    def matches(self, rec: Any) -> bool:
        """The verdict on one decoded record (``store.message.Message``)."""
        return self._header_matches(rec) and self._properties_match(rec)

    def _header_matches(self, rec: Any) -> bool:
        """Topic, queue and store time: the fields every record has, checked first as the cheap ones."""
        return not (
            self.topic is not None
            and rec.topic != self.topic
            or self.queue_id is not None
            and rec.queue_id != self.queue_id
            or self.begin is not None
            and rec.store_timestamp < self.begin
            or self.end is not None
            and rec.store_timestamp > self.end
        )

    def _properties_match(self, rec: Any) -> bool:
        """Key, unique key and tag: read from the record's properties (why :meth:`columnar` excludes them)."""
        return not (
            self.key is not None
            and self.key not in rec.keys
            or self.uniq_key is not None
            and rec.uniq_key != self.uniq_key
            or self.tag is not None
            and rec.tags != self.tag
        )

    def select(self, blk: Any) -> Any:
        """Indices of a block's records that pass the column filters (:meth:`columnar` ones)."""
        import numpy as np

        keep = np.ones(blk.n, bool)
        if self.topic is not None:
            names, tid = blk.topics
            keep &= np.array([t.decode("utf-8", "replace") == self.topic for t in names], bool)[tid]
        if self.queue_id is not None:
            keep &= blk.rb.queue_id == self.queue_id
        if self.begin is not None:
            keep &= blk.store_timestamp >= self.begin
        if self.end is not None:
            keep &= blk.store_timestamp <= self.end
        return np.flatnonzero(keep)
