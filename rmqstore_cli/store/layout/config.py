"""StoreConfig: the ``MessageStoreConfig`` properties a store reader and writer need.

Values come from the broker's defaults, then ``broker.conf`` (parsed as
``java.util.Properties`` and applied as ``MixAll#properties2Object`` does), then explicit
overrides. Without a ``broker.conf`` the file sizes are inferred from the files on disk
and checked, so a store written with non-default sizes is read right or refused clearly.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from rmqstore_cli.errors import FileSizeError, StoreError, UsageError, setting
from rmqstore_cli.store.files.mapped_files import entries, is_file_entry, subdir_entries

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass
class StoreConfig:
    """Broker property names in snake case; see docs/format/config.md#brokerconf for each default."""

    store_path_root_dir: str = os.path.join(os.path.expanduser("~"), "store")
    store_path_commit_log: str | None = None
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    message_index_enable: bool = True
    max_msgs_num_batch: int = 64
    max_message_size: int = 1024 * 1024 * 4
    check_crc_on_recover: bool = True
    file_reserved_time: int = 72
    delete_when: str = "04"
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    enabled_append_prop_crc: bool = False
    force_verify_prop_crc: bool = False
    auto_message_version_on_topic_len: bool = True
    enable_consume_queue_ext: bool = False
    enable_dleger_commit_log: bool = False
    dleger_self_id: str | None = None
    store_path_dledger_commit_log: str | None = None
    store_type: str = "default"
    broker_cluster_name: str = "DefaultCluster"
    transaction_check_max: int = 15  # BrokerConfig: the checks before a half is given up
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"  # BrokerConfig: the trace topic clients send to
    # 5.x timer store (``MessageStoreConfig``; docs/format/timer.md)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    # 5.x batch consume queue and compaction store sizes (0: the files' own size)
    mapper_file_size_batch_consume_queue: int = 0
    compaction_mapped_file_size: int = 0
    compaction_cq_mapped_file_size: int = 0
    enable_multi_dispatch: bool = False  # INNER_MULTI_DISPATCH fan-out (store/write/lmq.py)
    enable_lmq: bool = False  # %LMQ% names go to queue 0 (MultiDispatch#queueKey)
    #: Which of the fields were set explicitly (conf file or override), not defaulted.
    explicit: set[str] = field(default_factory=set, repr=False)
    #: Set when the index files' geometry could not be inferred; raised on first index use.
    index_geometry_error: Exception | None = field(default=None, repr=False)
    #: Read commands' ``--allow-odd-size``: a commit-log or consume-queue file whose length is
    #: not the size is read up to its real length instead of refusing the whole store.
    allow_odd_size: bool = field(default=False, repr=False)
    #: The files so tolerated, as ``(path, size, expected size)`` (set by :meth:`infer_sizes`).
    odd_files: list = field(default_factory=list, repr=False)

    # ------------------------------------------------------------- paths
    @property
    def root(self) -> Path:
        return Path(self.store_path_root_dir)

    @property
    def commitlog_dirs(self) -> list[Path]:
        """``storePathCommitLog``; a comma-separated value is a multi-path commit log
        (docs/format/store-layout.md#multi-path-commit-log)."""
        if self.store_path_commit_log:
            dirs = [Path(p) for p in commit_log_paths(self.store_path_commit_log)]
        else:
            dirs = [self.root / "commitlog"]
        from rmqstore_cli.store.layout.dledger_paths import data_dir

        dl = data_dir(self)  # DLedgerCommitLog#getData: the old files below, DLedger's above: one log
        return dirs if dl is None else [*dirs, dl]

    @property
    def dledger_dir(self) -> Path | None:
        """``DLedgerConfig#getDefaultPath`` (``<root>/dledger-<selfId>``) when the commit log is
        DLedger's: ``enableDLegerCommitLog``, or, that not set, the one ``dledger-*/data`` on disk."""
        from rmqstore_cli.store.layout.dledger_paths import dledger_dir

        return dledger_dir(self)

    @property
    def write_roots(self) -> list[Path]:
        """Where mutating commands may write and delete (README, Safety): the store root and,
        when ``storePathCommitLog`` is set (the broker's layout for a commit log on another
        disk), those directories. Each is resolved by ``safefs`` to its real path; a data
        directory that is a symbolic link out of these roots is followed for reading only."""
        roots = [self.root]
        if self.store_path_commit_log:
            roots += self.commitlog_dirs
        if self.store_path_dledger_commit_log and self.dledger_dir is not None:  # DLedger's data elsewhere
            roots.append(Path(self.store_path_dledger_commit_log))
        return roots

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def timer_wheel_path(self) -> Path:
        """``TimerMessageStore#getTimerWheelPath``."""
        return self.root / "timerwheel"

    @property
    def timer_log_dir(self) -> Path:
        """``TimerMessageStore#getTimerLogPath``."""
        return self.root / "timerlog"

    @property
    def timer_checkpoint_path(self) -> Path:
        """``BrokerPathConfigHelper#getTimerCheckPath``: config/timercheck."""
        return self.root / "config" / "timercheck"

    @property
    def cq_file_size(self) -> int:
        """``MessageStoreConfig#getMappedFileSizeConsumeQueue`` rounds up to a multiple of 20."""
        v = self.mapped_file_size_consume_queue
        return -(-v // 20) * 20

    @property
    def index_file_size(self) -> int:
        return 40 + self.max_hash_slot_num * 4 + self.max_index_num * 20

    @property
    def delay_level_table(self) -> dict[int, int]:
        """``ScheduleMessageService#parseDelayLevel``: level (1-based) -> milliseconds."""
        table: dict[int, int] = {}
        for i, word in enumerate(self.message_delay_level.split(" ")):
            unit = _TIME_UNITS.get(word[-1:]) if word else None
            try:
                if unit is None:
                    raise ValueError(word)
                table[i + 1] = int(word[:-1]) * unit
            except ValueError:
                raise UsageError(f"messageDelayLevel has a bad level {word!r}") from None
        return table

    # ------------------------------------------------------------- building
    @classmethod
    def load(
        cls, store: str | os.PathLike | None, broker_conf: str | os.PathLike | None = None, **overrides
    ) -> StoreConfig:
        """The config of the store at ``store`` (None: ``broker_conf``'s ``storePathRootDir``,
        else the broker's default ``${user.home}/store``).

        ``store`` given over a broker.conf whose ``storePathCommitLog`` lies in that conf's
        root (``<root>/commitlog`` spelt out, as many confs do): the commit log is read at the
        same place below ``store`` (:func:`rebase_commit_log`), so a copy of a store read with
        its broker's conf is read whole, never half from the copy and half from the original.
        """
        cfg = cls()
        if broker_conf:
            cfg.apply_properties(read_java_properties(Path(broker_conf)))
            check_conf_paths(cfg, Path(broker_conf), root_used=store is None)
        if store is not None:
            conf_root = cfg.store_path_root_dir
            cfg.store_path_root_dir = str(store)
            cfg.explicit.add("store_path_root_dir")
            if cfg.store_path_commit_log:
                cfg.store_path_commit_log = rebase_commit_log(cfg.store_path_commit_log, conf_root, str(store))
        for name, value in overrides.items():
            if value is not None:
                setattr(cfg, name, value)
                cfg.explicit.add(name)
        cfg.check_file_sizes(broker_conf)
        return cfg

    def check_file_sizes(self, source: str | os.PathLike | None = None) -> None:
        """Refuse (exit 2) a file size no store can have: zero or negative (a size of 0 would
        divide by zero in every offset computation). Out-of-range numbers never get here:
        ``Integer.parseInt`` rejects them and ``MixAll#properties2Object`` keeps the default."""
        for attr in SIZE_FIELDS:
            v = getattr(self, attr)
            if v <= 0:
                where = f" in {source}" if source and attr in self.explicit else ""
                raise UsageError(
                    f"{_camel(attr)}={v}: a file size must be positive",
                    path=source if where else None,
                    hint="fix the broker config or pass the size option",
                )

    def check_writable_sizes(self) -> None:
        """Sizes no broker could write with (``maxIndexNum=1``: no entry after the reserved
        entry 0; a consume-queue file, rounded up to whole units, without one unit…) are
        refused before anything is written: StoreError (exit 3), not a division by zero or a
        broken file halfway through. The bounds are :data:`SIZE_LEAST`; the positive check
        at load (:meth:`check_file_sizes`) runs for every command, this one for writers
        (rebuild-index)."""
        for attr, (prop, keyword, least) in SIZE_LEAST.items():
            v = self.cq_file_size if attr == "mapped_file_size_consume_queue" else getattr(self, attr)
            if v < least:
                raise StoreError(
                    f"{prop}={v} cannot be used (at least {least})",
                    path=self.root,
                    hint=f"fix the broker config, or pass {setting(keyword)}",
                )

    def apply_properties(self, props: dict[str, str]) -> None:
        """``MixAll#properties2Object``: numbers parsed untrimmed (bad ones silently ignored)."""
        by_name = {
            _snake(f.name): f
            for f in fields(self)
            if f.name not in ("explicit", "index_geometry_error", "allow_odd_size", "odd_files")
        }
        for key, raw in props.items():
            f = by_name.get(_snake(key))
            if f is None:
                continue
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            try:
                if kind.startswith("int"):
                    value: object = _java_parse_int(raw)
                elif kind.startswith("bool"):
                    value = raw.strip().lower() == "true"  # Boolean.parseBoolean
                else:
                    value = raw.strip()
            except ValueError:
                continue
            setattr(self, f.name, value)
            self.explicit.add(f.name)

    def infer_sizes(self, defer_index: bool = False) -> list[str]:
        """Check file sizes against the config; infer them when no config set them.

        Returns notes saying what was inferred. Raises StoreError naming the option to
        pass when the files disagree with each other or with an explicit setting.
        """
        notes: list[str] = []
        self.mapped_file_size_commit_log = self._infer(
            "mapped_file_size_commit_log",
            "mappedFileSizeCommitLog",
            "⟦commitlog_file_size⟧",
            data_files(d for d in self.commitlog_dirs),
            notes,
        )
        cq_dir = self.consumequeue_dir  # 20 000 queues: their entries' paths, no Path a directory or file
        cq_files = data_file_paths(q.path for t in subdir_entries(cq_dir) for q in subdir_entries(t.path))
        inferred = self._infer(
            "mapped_file_size_consume_queue", "mappedFileSizeConsumeQueue", "⟦cq_file_size⟧", cq_files, notes
        )
        self.mapped_file_size_consume_queue = inferred
        try:
            self._infer_index(notes)
        except StoreError as e:
            if not defer_index:
                raise
            self.index_geometry_error = e  # a damaged index fails only the commands that read it
            notes.append(str(e))
        return notes

    def _infer(self, attr: str, prop: str, option: str, files: list[Path] | list[str], notes: list[str]) -> int:
        current = getattr(self, attr)
        sized = _files_by_size(files)
        if not sized:
            return current
        want = self.cq_file_size if attr == "mapped_file_size_consume_queue" else current
        explicit = attr in self.explicit
        uniform = _uniform_size(sized, want, explicit)
        if uniform == want:  # the usual case: no file is named, none needs a Path
            return current
        by_size = {size: [Path(p) for p in group] for size, group in sized.items()}
        if uniform is not None:
            notes.append(f"{prop}={uniform} inferred from {by_size[uniform][0].name}")
            return uniform
        expected = _expected_size(by_size, want, explicit)
        odd = _odd_files(by_size, expected)
        if not self.allow_odd_size:
            raise _odd_size_error(by_size, odd, expected, want, explicit, prop, option)
        self.odd_files.extend((p, p.stat().st_size, expected) for p in odd)
        if explicit or expected == want:
            return current
        notes.append(f"{prop}={expected} inferred from most of the files")
        return expected

    def _infer_index(self, notes: list[str]) -> None:
        files = data_files([self.index_dir])
        if not files:
            return
        sizes = {p.stat().st_size for p in files}
        if len(sizes) > 1:
            raise StoreError(
                f"index files disagree on their size ({sorted(sizes)})",
                path=self.index_dir,
                hint="pass ⟦index_slots⟧/⟦index_max⟧ or ⟦broker_conf⟧",
            )
        (size,) = sizes
        if size == self.index_file_size:
            return
        if {"max_hash_slot_num", "max_index_num"} & self.explicit:
            raise StoreError(
                f"index file {files[0]} has {size} bytes, not {self.index_file_size}",
                path=files[0],
                hint="pass the broker's ⟦index_slots⟧/⟦index_max⟧ or ⟦broker_conf⟧",
            )
        from rmqstore_cli.store.layout.index_geometry import infer_index_geometry

        try:
            slots, entries = infer_index_geometry(files, size)
        except StoreError as e:  # only commands that read the index need it: they raise it then
            self.index_geometry_error = e
            notes.append(str(e))
            return
        self.max_hash_slot_num, self.max_index_num = slots, entries
        notes.append(f"maxHashSlotNum={slots} maxIndexNum={entries} inferred from the index files")


def commit_log_paths(value: str) -> list[str]:
    """``storePathCommitLog``'s directories: ``MultiPathMappedFileQueue`` splits it at ``,``
    (``MixAll.MULTI_PATH_SPLITTER``'s default) and trims each."""
    return [p.strip() for p in value.split(",") if p.strip()]


def rebase_commit_log(value: str, conf_root: str, store: str) -> str:
    """``storePathCommitLog`` for a store read at ``store`` instead of the conf's root: each
    directory inside ``conf_root`` moves with it (``/data/store/commitlog`` -> ``<store>/commitlog``);
    one elsewhere (a commit log on another disk) stays where the conf says."""
    base = os.path.normpath(conf_root)
    out = []
    for p in commit_log_paths(value):
        rel = os.path.relpath(os.path.normpath(p), base)
        out.append(p if rel == "." or rel == ".." or rel.startswith(".." + os.sep) else os.path.join(store, rel))
    return ",".join(out)


def check_conf_paths(cfg: StoreConfig, conf: Path, root_used: bool) -> None:
    """Refuse (exit 2) a relative ``storePathRootDir`` (when it is the store to read) or
    ``storePathCommitLog`` from a broker.conf. The broker substitutes nothing in them:
    ``BrokerStartup#createBrokerController`` loads the file with ``Properties#load`` and
    ``MixAll#properties2Object`` sets each value trimmed, so ``${user.home}/store`` or
    ``~/store`` is a relative path, which the broker's JVM resolves against its own working
    directory; rmqstore cannot know that directory, so it does not guess."""
    keys = [("storePathCommitLog", p) for p in commit_log_paths(cfg.store_path_commit_log or "")]
    if root_used and "store_path_root_dir" in cfg.explicit:
        keys.insert(0, ("storePathRootDir", cfg.store_path_root_dir))
    for key, value in keys:
        if not os.path.isabs(value):
            raise UsageError(
                f"{key}={value!r} is not an absolute path: the broker substitutes nothing in it "
                "(no ${…}, no ~) and reads it against its own working directory",
                path=conf,
                hint="pass ⟦path⟧"
                if key == "storePathRootDir"
                else "give the broker config an absolute storePathCommitLog",
            )


def conf_root(conf: Path) -> str | None:
    """The ``storePathRootDir`` a broker.conf sets (checked absolute), or None: it sets none."""
    cfg = StoreConfig()
    cfg.apply_properties(read_java_properties(conf))
    if "store_path_root_dir" not in cfg.explicit:
        return None
    check_conf_paths(cfg, conf, root_used=True)
    return cfg.store_path_root_dir


def _snake(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


#: The size properties, all Java ``int`` in ``MessageStoreConfig`` (checked by :meth:`StoreConfig.check_file_sizes`).
SIZE_FIELDS = ("mapped_file_size_commit_log", "mapped_file_size_consume_queue", "max_hash_slot_num", "max_index_num")
#: Each size property, its name in broker.conf, the setting that gives it (the library's
#: keyword, :func:`~rmqstore_cli.errors.setting`: the command line spells it as an option),
#: and the least a writer can use (a consume-queue file holds at least one 20-byte unit; an
#: index at least one entry after slot 0): checked by :meth:`StoreConfig.check_writable_sizes`.
SIZE_LEAST = {
    "mapped_file_size_commit_log": ("mappedFileSizeCommitLog", "commitlog_file_size", 1),
    "mapped_file_size_consume_queue": ("mappedFileSizeConsumeQueue", "cq_file_size", 20),
    "max_hash_slot_num": ("maxHashSlotNum", "index_slots", 1),
    "max_index_num": ("maxIndexNum", "index_max", 2),
}
_JAVA_INT = (-(1 << 31), (1 << 31) - 1)


def _camel(attr: str) -> str:
    head, *rest = attr.split("_")
    return head + "".join(w.capitalize() for w in rest)


def _java_parse_int(raw: str) -> int:
    """``Integer.parseInt``: optional sign, ASCII digits, no spaces, and within a Java
    ``int`` (every int property rmqstore reads is one): anything else is a ValueError,
    which ``apply_properties`` ignores as ``MixAll#properties2Object`` does."""
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        raise ValueError(raw)
    v = int(raw)
    if not _JAVA_INT[0] <= v <= _JAVA_INT[1]:
        raise ValueError(raw)
    return v


def subdirs(p: Path) -> list[Path]:
    """The directories in ``p``, sorted (none if ``p`` is not a directory)."""
    return [Path(e.path) for e in subdir_entries(p)]


def data_files(dirs) -> list[Path]:
    """The files of ``dirs`` named by digits: what a store's sizes are inferred from."""
    return [Path(p) for p in data_file_paths(dirs)]


def data_file_paths(dirs) -> list[str]:
    """:func:`data_files` as the paths their listing gives (a ``Path`` each costs more than its ``stat``)."""
    return [e.path for d in dirs for e in entries(d) if e.name.isdigit() and is_file_entry(e)]


#: What a 5.x broker's timer leaves in the store root (a 4.9 store has none of them).
TIMER_PATHS = ("timerwheel", "timerlog", "config/timercheck", "config/timermetrics")


def timer_files_present(root: Path) -> bool:
    """Whether the store has a timer store at all: here, not in :mod:`store.timer`, so that
    verify learns it without loading the timer modules (start-up)."""
    return any(os.path.lexists(Path(root) / p) for p in TIMER_PATHS)


#: A broker.conf is a few KB; a larger one is not a broker's (and ``/dev/zero`` is refused).
BROKER_CONF_LIMIT = 16 << 20


def read_java_properties(path: Path) -> dict[str, str]:
    """Parse a ``java.util.Properties`` file (comments, ``=``/``:``/space separators,
    backslash continuations and escapes). A malformed ``\\uxxxx`` escape is an error naming
    the line, as ``Properties#load`` throws ``IllegalArgumentException`` ("Malformed
    \\uxxxx encoding") and the broker does not start. The file is read as a regular file
    under a size cap (a FIFO or device is refused, never waited on)."""
    from rmqstore_cli.store.files.safefs import read_bounded

    try:
        text = read_bounded(path, BROKER_CONF_LIMIT, "broker config").decode("latin-1")
    except StoreError as e:
        raise UsageError(f"cannot read broker config: {e.message}", path=path) from None
    props: dict[str, str] = {}
    logical, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip(" \t\f")
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if not logical:
            start = number
        if _ends_with_odd_backslashes(stripped):
            logical += stripped[:-1]
            continue
        logical += stripped
        _put_property(props, logical, path, start)
        logical = ""
    if logical:
        _put_property(props, logical, path, start)
    return props


def _put_property(props: dict[str, str], logical: str, path: Path, line: int) -> None:
    key, value = _split_property(logical)
    try:
        props[_unescape(key)] = _unescape(value)
    except ValueError:
        raise UsageError(
            f"malformed \\uxxxx encoding on line {line}",
            path=path,
            hint="java.util.Properties#load refuses this file, so the broker would not start",
        ) from None


def _ends_with_odd_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u":  # Properties#loadConvert: exactly four hex digits, or IllegalArgumentException
                digits = s[i + 2 : i + 6]
                if len(digits) < 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise ValueError(f"malformed \\u{digits}")
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _files_by_size(files: list[Path] | list[str]) -> dict[int, list]:
    """Group data files by their byte size: the broker maps every file of a directory at one size."""
    by_size: dict[int, list] = {}
    for p in files:
        by_size.setdefault(os.stat(p).st_size, []).append(p)
    return by_size


def _uniform_size(by_size: dict[int, list], want: int, explicit: bool) -> int | None:
    """The one size every file has, when it settles the setting without a vote.

    It does when it is the setting already, or when nothing was set and the files are not empty;
    None sends the caller to the majority rule and the odd-file checks.
    """
    if len(by_size) != 1:
        return None
    ((size, _paths),) = by_size.items()
    if size == want or (not explicit and size > 0):
        return size
    return None


def _odd_files(by_size: dict[int, list[Path]], expected: int) -> list[Path]:
    """The files whose size is not the expected one, in path order (the first is the one named)."""
    return sorted(p for s, ps in by_size.items() if s != expected for p in ps)


def _expected_size(by_size: dict[int, list[Path]], want: int, explicit: bool) -> int:
    """The size the files should have: the setting, else the most common one (a tie: the larger).

    An empty file tells no size (all empty: the default stays, and each is an odd file).
    """
    nonzero = [s for s in by_size if s > 0]
    if explicit or not nonzero:
        return want
    return max(nonzero, key=lambda s: (len(by_size[s]), s))


def _odd_size_error(
    by_size: dict[int, list[Path]], odd: list[Path], expected: int, want: int, explicit: bool, prop: str, option: str
) -> FileSizeError:
    """The refusal for files whose size is not the expected one, naming the first such file.

    Three wordings, because the fix differs: a setting the files contradict, files that are all
    empty (no size to infer), and files that disagree among themselves.
    """
    first = odd[0]
    size = first.stat().st_size
    more = f" ({len(odd)} files differ)" if len(odd) > 1 else ""
    if explicit:
        return FileSizeError(
            f"file has {size} bytes but {prop}={want}{more}",
            path=first,
            hint=f"pass the broker's own {option} or ⟦broker_conf⟧",
        )
    if not any(s > 0 for s in by_size):
        return FileSizeError(
            f"every file is empty (0 bytes), which tells no {prop}",
            path=first,
            hint=f"pass {option} or ⟦broker_conf⟧",
        )
    others = sum(len(ps) for ps in by_size.values()) - len(odd)
    return FileSizeError(
        f"files disagree on {prop}: this one has {size} bytes, {others} other"
        f"{'s have' if others != 1 else ' has'} {expected}{more}",
        path=first,
        hint=f"the broker refuses to load such a store; pass {option} or ⟦broker_conf⟧",
    )
