"""The engine's compiled loops: the record walk (plain and DLedger), small bodies' CRC, a
join of byte ranges, the TAGS hash and index keys of PROPERTIES — what would otherwise be a Python loop per record.

They are C (``_ckernels.c``), an optional extension built at install by ``setup.py``, as
dulwich ships ``_pack.c`` beside ``pack.py``: same results to the bit as the reference loops
(:func:`~rmqstore_cli.store.commitlog.bulk.walk_records`' own loop,
:func:`~rmqstore_cli.store.files.crc.body_crcs` by zlib, slicing PROPERTIES), which
the tests compare on fixtures and hostile input. A machine that could not build it (no
compiler at install) has :data:`BUILT` False and runs the reference loops; so does
``RMQSTORE_PURE=1`` (:data:`~rmqstore_cli.store.files.fastpaths.FAST_PATHS` decides). Loading
the extension costs well under a millisecond, so even the smallest store uses it.

When built: ``walk``, ``walk_entries``, ``small_body_crcs``, ``join_ranges``,
``prop_scan`` (the pairs of a batch's PROPERTIES), ``prop_keys`` (their TAGS hashes
and index keys), ``record_cols`` (verify's fields of a batch of records and their body CRCs,
one pass) and ``topic_ids`` (topic ids by a hash table; the twins of both:
:mod:`~rmqstore_cli.store.verify.batch_fused`) and ``prop_fused`` (verify's flags, values,
tagsCodes and keys of a batch's PROPERTIES, one pass; its twin:
:mod:`~rmqstore_cli.store.records.props_fused`) and ``index_entries`` (a block of index
entries chained by slot and laid out, one pass; its twin in
:mod:`~rmqstore_cli.store.queues.index`) and ``dump_cols`` (generate --from-jsonl's dump lines
as a block's columns, ``_cdump.c``; its twin in :mod:`~rmqstore_cli.store.write.replay_cols`) and
``host_texts``, ``hex_ranges`` and ``prop_split`` (export's host, msgId and PROPERTIES
columns of a block: Arrow string buffers, or the pairs, TAGS, UNIQ_KEY and KEYS words as
byte ranges; ``_carrow.c``; their twins in :mod:`~rmqstore_cli.store.records.texts`) and
``encode_join`` (generate's records joined into one bytes, their body CRCs computed on the
way, ``_cencode.c``; its twin in :mod:`~rmqstore_cli.store.commitlog.blocks`); their
docstrings and ``_ckernels.c`` say what each does; each checks its arguments and raises
rather than read outside a buffer, and runs without the GIL).
"""

from __future__ import annotations

from typing import Any

from rmqstore_cli.formats.commitlog import (
    AFTER_BORN_HOST,
    AFTER_BORN_HOST_SIZE,
    AFTER_STORE_HOST,
    BORNHOST_V6_FLAG,
    HEAD,
    HEAD_SIZE,
    HOST_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    PREFIX_DTYPE,
    PROPERTIES_LENGTH,
    RECORD_FIXED_SIZE,
    STOREHOSTADDRESS_V6_FLAG,
)
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.formats.dledger import ENTRY_MAGIC, EntryHeader
from rmqstore_cli.formats.index import INDEX_ENTRY_SIZE, IndexEntry
from rmqstore_cli.formats.properties import (
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
)

from rmqstore_cli.store.files.extload import OTHER_LAYOUT, Loaded, load

#: Bodies shorter than this get their CRC here; longer ones from zlib-ng (faster per byte,
#: and its per-call cost no longer matters: measured, 512 B 170 ns here against 250 ns a
#: zlib-ng call, 1 KiB 350 against 230); every body where the CRC runs on carry-less
#: multiplies (:data:`CLMUL`: as fast per byte as zlib-ng's, and no Python call per body).
SMALL_BODY = 768


def layout() -> dict[str, int]:
    """What the C loops read (``MessageDecoder``'s TOTALSIZE and MAGICCODE, the
    ``DLedgerEntry`` header's magic and size, the PROPERTIES separators and the names of
    TAGS, KEYS and UNIQ_KEY), from ``formats/`` and :mod:`~rmqstore_cli.store.records.message`: the extension is used
    only when it was built with exactly this (its ``LAYOUT``)."""
    return {
        "total_at": HEAD["total_size"].offset,
        "magic_at": HEAD["magic"].offset,
        "prefix_size": PREFIX_DTYPE.itemsize,
        "magic_v1": MAGIC_V1,
        "magic_v2": MAGIC_V2,
        "entry_magic": ENTRY_MAGIC,
        "entry_magic_at": field_offset(EntryHeader, "magic"),
        "entry_size_at": field_offset(EntryHeader, "size"),
        "name_sep": ord(NAME_VALUE_SEPARATOR),
        "pair_sep": ord(PROPERTY_SEPARATOR),
        "key_sep": ord(KEY_SEPARATOR),
        **{
            k: (name + NAME_VALUE_SEPARATOR).encode()
            for k, name in (("tags", PROPERTY_TAGS), ("keys", PROPERTY_KEYS), ("uniq_key", PROPERTY_UNIQ_KEY))
        },
        **record_layout(),
    }


def record_layout() -> dict[str, int]:
    """What ``record_cols`` reads of a record (``MessageDecoder#decode``'s fields after the
    prefix, ``CommitLog#calMsgLength``'s constant), from ``formats/commitlog.py``."""
    return {
        "head_size": HEAD_SIZE,
        **{f"{k}_at": HEAD[k].offset for k in ("body_crc", "queue_id", "queue_offset", "physical_offset", "sys_flag")},
        "born_v6_flag": BORNHOST_V6_FLAG,
        "store_v6_flag": STOREHOSTADDRESS_V6_FLAG,
        "host_v4": HOST_SIZE[False],
        "host_v6": HOST_SIZE[True],
        "store_ts_at": AFTER_BORN_HOST["store_timestamp"].offset,
        "after_born_host": AFTER_BORN_HOST_SIZE,
        "body_length_at": AFTER_STORE_HOST["body_length"].offset,
        "props_length_size": PROPERTIES_LENGTH.size,
        "fixed_size": RECORD_FIXED_SIZE,
    }


def index_entry_layout() -> tuple[int, ...]:
    """What ``index_entries`` writes of an entry (``IndexFile#putKey``): its size and where
    keyHash, phyOffset, timeDiff and prevIndex lie, from ``formats/index.py``."""
    names = ("key_hash", "phy_offset", "time_diff", "prev_index")
    return (INDEX_ENTRY_SIZE, *(field_offset(IndexEntry, k) for k in names))


#: ``dump_cols``' int64 columns (generate --from-jsonl's reader, ``_cdump.c``), in the order of
#: its ``out``; its twin (:mod:`~rmqstore_cli.store.write.replay_cols`) fills the same
DUMP_COLS = (
    "tid",
    "queue_id",
    "flag",
    "sys_flag",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "born_port",
    "store_host",
    "store_port",
    "reconsume_times",
    "prepared_transaction_offset",
    "v2",
    "queue_offset",
    "physical_offset",
)


def _load() -> Loaded:
    """The built extension, or None and why (not built, its import failed, or built for
    another layout: also one built from older sources, which lacks a layout it must state,
    as an editable install not rebuilt after an update). Imported here only: this module is
    its one user."""
    got = load("rmqstore_cli.store._ckernels")
    if got.module is not None and (
        getattr(got.module, "LAYOUT", None) != layout()
        or getattr(got.module, "INDEX_ENTRY", None) != index_entry_layout()
        or getattr(got.module, "DUMP_COLS", None) != DUMP_COLS
    ):
        return Loaded(got.name, None, OTHER_LAYOUT)
    return got


_LOADED = _load()
_EXT: Any = _LOADED.module
#: Why the C loops are not here ("" when they are): "not built", "failed to import: ..."
PROBLEM = _LOADED.problem
#: True when the C loops are here (the names below exist)
BUILT = _EXT is not None
if BUILT:
    walk, walk_entries = _EXT.walk, _EXT.walk_entries
    small_body_crcs, join_ranges = _EXT.small_body_crcs, _EXT.join_ranges
    prop_keys, prop_scan = _EXT.prop_keys, _EXT.prop_scan
    record_cols, topic_ids = _EXT.record_cols, _EXT.topic_ids
    prop_fused, index_entries = _EXT.prop_fused, _EXT.index_entries
    dump_cols, encode_join = _EXT.dump_cols, _EXT.encode_join
    host_texts, hex_ranges, prop_split = _EXT.host_texts, _EXT.hex_ranges, _EXT.prop_split
    #: True when the CRC runs on carry-less multiplies (x86-64 with PCLMULQDQ, 512 bits at a
    #: time with VPCLMULQDQ and AVX-512 unless ``RMQSTORE_NO_VPCLMUL=1``; the tables otherwise,
    #: or with ``RMQSTORE_NO_CLMUL=1``): same numbers either way
    CLMUL = bool(_EXT.CLMUL)
    #: How many bits a step of that fold takes: 0 (the tables), 128 or 512
    CLMUL_BITS = (0, 128, 512)[_EXT.CLMUL]
    if CLMUL:  # 16 KiB bodies: 47 GB/s against zlib-ng's 40 (one cached body a call), 12.8 against 10.9 on 128 bits
        SMALL_BODY = 1 << 62
    #: record_cols' columns, in the order of its out
    REC_COLS = _EXT.REC_COLS
    #: prop_keys' key rows: columns, flags (a KEYS word; malformed UTF-8 inside), and its
    #: tagsCode of a TAGS value of malformed UTF-8 (left for the reference's replacements)
    KEY_COLS, KEY_WORD, KEY_WIDE, TAGS_WIDE = _EXT.KEY_COLS, _EXT.KEY_WORD, _EXT.KEY_WIDE, _EXT.TAGS_WIDE
