"""The broker's ``config/`` files, loaded as ``ConfigManager#load`` loads them.

Each manager (topics, consumer offsets, subscription groups, …) persists one fastjson
text with ``MixAll#string2File`` (keep the old text as ``.bak``; 4.9 and 5.0.0 write ``.tmp``
and rename, 5.1.0+ write the file in place: docs/format/config.md#writing-and-the-bak-file)
and loads it at start-up with ``ConfigManager#load``:

- the file is missing or empty → ``#loadBak``;
- the file does not decode (fastjson throws) → logged ``load <file> failed, and try to load
  backup file`` → ``#loadBak``;
- ``#loadBak``: a missing or empty ``.bak`` returns true (the manager starts empty); a ``.bak``
  that does not decode logs ``load <file>.bak Failed`` and returns false, so
  ``BrokerController#initialize`` (``initializeMetadata`` in 5.x) fails and the broker does
  not start.

"Decodes" is judged on the JSON: fastjson's output (integer map keys unquoted, see
:func:`quote_int_keys`) whose top level is an object or ``null``; a manager's own field types
are checked only where a module reads them (``store/layout/offsets.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs

#: Larger than any real config file (a key and a few numbers per topic, group and queue).
CONFIG_FILE_LIMIT = 32 << 20
BAK_SUFFIX = ".bak"  # MixAll#string2File keeps the previous text as <file>.bak
#: 4.9.x ``MixAll#string2File`` (and 5.x ``TimerMetrics#persist``) writes the new text to
#: <file>.tmp, the old one to <file>.bak, deletes <file> and renames <file>.tmp to it
TMP_SUFFIX = ".tmp"

#: A string literal (kept whole; an unterminated one runs to the end, so no position is
#: scanned twice) or a bare integer map key after ``{`` or ``,``.
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)|([{,]\s*)(-?\d+)(\s*:)', re.S)


class DecodeError(Exception):
    """The text is not what the manager's ``#decode`` accepts (fastjson would throw)."""

    def __init__(self, what: str, offset: int | None = None):
        super().__init__(what)
        self.what = what
        self.offset = offset


def quote_int_keys(text: str) -> str:
    """fastjson's output as strict JSON: ``{0:250}`` → ``{"0":250}``; strings untouched."""
    return _BARE_KEY.sub(lambda m: m[0] if m[1] is None else f'{m[1]}"{m[2]}"{m[3]}', text)


def _unquoted_position(text: str, pos: int) -> int:
    """The position in ``text`` of position ``pos`` of ``quote_int_keys(text)`` (which put a
    quote before and after each bare key)."""
    inserted = [p for m in _BARE_KEY.finditer(text) if m[1] is not None for p in (m.start(2), m.end(2))]
    return pos - sum(1 for k, p in enumerate(inserted) if p + k < pos)


#: A byte that is not UTF-8, as ``surrogateescape`` keeps it: one character per byte.
_RAW_BYTE = re.compile("[\udc80-\udcff]")


def _byte_offset(data: bytes, kept: str, pos: int) -> int:
    """The byte offset in ``data`` of character ``pos`` of ``kept`` (``data`` decoded with
    ``surrogateescape``: one character per byte that is not UTF-8, so exact for any bytes)."""
    return pos if data.isascii() else len(kept[:pos].encode("utf-8", "surrogateescape"))


def fastjson_object(data: bytes) -> dict | None:
    """The top-level object of a fastjson file (None for ``null``), or a DecodeError whose
    offset is the byte of the file where the text stops being JSON (not a character index:
    a multi-byte character or a byte that is not UTF-8 before it counts as its bytes)."""
    import orjson

    kept = data.decode("utf-8", "surrogateescape")
    # MixAll#file2String: new String(bytes), malformed input replaced (here one U+FFFD a byte,
    # so that character positions stay those of ``kept``)
    text = _RAW_BYTE.sub("\ufffd", kept)
    try:
        obj = orjson.loads(text)  # strict JSON (no integer key): no rewriting needed
    except orjson.JSONDecodeError:
        try:
            obj = orjson.loads(quote_int_keys(text))
        except orjson.JSONDecodeError as e:
            at = _byte_offset(data, kept, _unquoted_position(text, e.pos))
            raise DecodeError(f"not fastjson's JSON: {e.msg}", at) from None
    if obj is not None and not isinstance(obj, dict):
        raise DecodeError(f"the top level is a {type(obj).__name__}, not an object")
    return obj


@dataclass(frozen=True)
class ConfigFile:
    """One file a manager loads at start-up, and the broker versions that load it."""

    name: str
    manager: str  # the Java class whose #load reads it
    versions: tuple[str, ...]  # "4.9", "5"
    decode: Callable[[bytes], object] = fastjson_object
    #: ``#load``'s false stops the broker (``BrokerController#initialize`` and the stores' ``#load``
    #: chain it); False where its caller ignores it (the manager then runs empty)
    gates_start: bool = True


#: What ``BrokerController#initialize`` loads, in its order (4.9.7: topicConfigManager,
#: consumerOffsetManager, subscriptionGroupManager, consumerFilterManager, then
#: DefaultMessageStore#load's scheduleMessageService; 5.3.3 ``#initializeMetadata`` adds
#: topicQueueMappingManager and consumerOrderInfoManager, ``TimerMessageStore#load`` loads
#: timerMetrics, and ``#initialize`` loads scheduleMessageService), then the two 5.x managers
#: whose ``#load`` result nobody checks.
BROKER_CONFIG_FILES = (
    ConfigFile("topics.json", "TopicConfigManager", ("4.9", "5")),
    ConfigFile("topicQueueMapping.json", "TopicQueueMappingManager", ("5",)),
    ConfigFile("consumerOffset.json", "ConsumerOffsetManager", ("4.9", "5")),
    ConfigFile("subscriptionGroup.json", "SubscriptionGroupManager", ("4.9", "5")),
    ConfigFile("consumerFilter.json", "ConsumerFilterManager", ("4.9", "5")),
    ConfigFile("consumerOrderInfo.json", "ConsumerOrderInfoManager", ("5",)),
    ConfigFile("timermetrics", "TimerMetrics", ("5",)),
    ConfigFile("delayOffset.json", "ScheduleMessageService", ("4.9", "5")),
    # 5.x, loaded where their result is ignored: QueryAssignmentProcessor's constructor,
    # TransactionalMessageServiceImpl's constructor
    ConfigFile("messageRequestMode.json", "MessageRequestModeManager", ("5",), gates_start=False),
    ConfigFile("transactionMetrics", "TransactionMetrics", ("5",), gates_start=False),
)
#: ``enableLmq=true``: ``LmqConsumerOffsetManager`` (4.9.7 and 5.x ``BrokerController``) is the
#: consumer-offset manager, and its ``#configFilePath`` is this file instead of consumerOffset.json.
LMQ_OFFSETS = ConfigFile("lmqConsumerOffset.json", "LmqConsumerOffsetManager", ("4.9", "5"))


@dataclass
class ConfigLoad:
    """What ``ConfigManager#load`` would do with one file.

    ``source``: ``"file"`` (the file decodes), ``"bak"`` (the file is missing, empty or does
    not decode and the ``.bak`` does), ``"none"`` (neither has text: the manager starts
    empty), ``"fails"`` (the ``.bak`` does not decode: the broker does not start) or
    ``"unreadable"`` (we cannot tell: not a regular file, or over the size cap).
    """

    config: ConfigFile
    path: Path
    source: str
    notes: list[str] = field(default_factory=list)
    error: DecodeError | None = None  # why the .bak does not decode ("fails")
    value: object = None
    file_error: DecodeError | None = None  # why the file itself does not decode
    file_state: str = "absent"  # the file: "absent", "empty", "torn" (does not decode), "ok" or "unreadable"

    @property
    def bak(self) -> Path:
        return self.path.with_name(self.path.name + BAK_SUFFIX)

    @property
    def tmp(self) -> Path:
        return self.path.with_name(self.path.name + TMP_SUFFIX)

    def tmp_decodes(self) -> bool:
        """Whether ``<file>.tmp`` holds text the manager decodes: the newest persist, complete
        (written before the old file was deleted), that a crash kept from being renamed."""
        try:
            data = read_config_text(self.tmp)
            if not data:
                return False
            self.config.decode(data)
        except (StoreError, DecodeError):
            return False
        return True


def read_config_text(path: Path, limit: int = CONFIG_FILE_LIMIT) -> bytes | None:
    """``MixAll#file2String``: None when the file does not exist (a dangling link included)."""
    if not os.path.lexists(path):
        return None
    return safefs.read_bounded(path, limit, what=path.name)


def load_config(config_dir: Path, config: ConfigFile) -> ConfigLoad:
    """``ConfigManager#load`` then ``#loadBak`` for one file (module docstring), never raising
    for what the broker would survive or die of; StoreError only for a file we may not read."""
    out = ConfigLoad(config, config_dir / config.name, "none")
    for path, kind in ((out.path, "file"), (out.bak, "bak")):
        try:
            data = read_config_text(path)
        except StoreError as e:
            out.source = "unreadable"
            out.notes.append(e.message)
            if kind == "file":
                out.file_state = "unreadable"
            return out
        if not data:
            _note_missing(out, path, data is not None, kind == "file")
            continue
        try:
            out.value = config.decode(data)
        except DecodeError as e:
            out.notes.append(_decode_note(path, e))
            if kind == "bak":
                out.source, out.error = "fails", e
                return out
            out.file_state, out.file_error = "torn", e
            continue
        out.source = kind
        if kind == "file":
            out.file_state = "ok"
        return out
    return out


def _note_missing(out: ConfigLoad, path: Path, present: bool, main: bool) -> None:
    """An empty or absent file: the broker goes on to the .bak (or the defaults), so only a note,
    and for the main file its state."""
    out.notes.append(f"{path.name} is {'empty' if present else 'absent'}")
    if main:
        out.file_state = "empty" if present else "absent"


def _decode_note(path: Path, e: DecodeError) -> str:
    """Where a file stops decoding, with the byte when the decoder knows it."""
    if e.offset is not None:
        return f"{path.name} does not decode at byte {e.offset}: {e.what}"
    return f"{path.name} does not decode: {e.what}"


def load_broker_configs(config_dir: Path, version: str, lmq: bool = False) -> list[ConfigLoad]:
    """The outcome of every config file the broker of ``version`` ("4.9" or "5") loads;
    ``lmq`` (``enableLmq``): the consumer offsets are :data:`LMQ_OFFSETS`."""
    files = [LMQ_OFFSETS if lmq and c.manager == "ConsumerOffsetManager" else c for c in BROKER_CONFIG_FILES]
    return [load_config(config_dir, c) for c in files if version in c.versions]


def config_repair(ld: ConfigLoad) -> tuple[str, str | None]:
    """What restores a config file without losing what it holds, as (why, the command or None):
    ``<file>.tmp`` when a 4.9.x persist left its complete new text there (newer than the file
    or the .bak): renaming it; else a copy of the store's config/ from a backup. Never moving
    the files aside (the broker would start with the table empty)."""
    import shlex

    if ld.tmp_decodes():
        return (
            f"{ld.tmp.name} holds the newest complete text (MixAll#string2File stopped before renaming it)",
            f"mv {shlex.quote(str(ld.tmp))} {shlex.quote(str(ld.path))}",
        )
    if ld.source == "bak":
        return (
            f"nothing newer is on disk: the broker loads {ld.bak.name} as it is (compare it with what you expect)",
            None,
        )
    return (
        f"restore {ld.path.name} from a backup of the store's config/ before starting (moving it aside starts "
        f"the broker with an empty {ld.config.manager})",
        None,
    )
