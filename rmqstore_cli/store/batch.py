"""Temporary re-exports while the callers move (issue #17): batch.py dissolved into owners.

The bulk commit-log read is :mod:`~rmqstore_cli.store.commitlog.bulk`, numpy helpers
:mod:`~rmqstore_cli.store.arrays`, Java hashes :mod:`~rmqstore_cli.store.javahash`,
vectorised PROPERTIES :mod:`~rmqstore_cli.store.properties`, topic ids
:mod:`~rmqstore_cli.store.topics`, the fast-path choice :mod:`~rmqstore_cli.store.fastpaths`.
Import from those; this module goes when no caller is left.
"""
from __future__ import annotations

from rmqstore_cli.store.arrays import byte_rows, cat_bytes, file_array, gather, stable_argsort  # noqa: F401
from rmqstore_cli.store.commitlog.bulk import RecordBatch, body_crcs, walk_records  # noqa: F401
from rmqstore_cli.store.fastpaths import FAST_PATHS
from rmqstore_cli.store.javahash.bulk import (concat_hashes, index_hash, index_hashes, java_hashes,  # noqa: F401
                                              java_int)
from rmqstore_cli.store.mapped_files import release_pages  # noqa: F401
from rmqstore_cli.store.properties import (CRC_MARK, IndexKeys, Properties, pick_property,  # noqa: F401
                                           props_well_formed)
from rmqstore_cli.store.topics import TopicIds  # noqa: F401

#: tests/test_pipeline_verify.py patches this name; FAST_PATHS.for_bytes is the setting
COMPILE_FOR_BYTES = FAST_PATHS.for_bytes


def compile_walk() -> bool:
    """``FAST_PATHS.compile()``."""
    return FAST_PATHS.compile()


def compile_for(nbytes: int) -> bool:
    """``FAST_PATHS.for_file(nbytes)``, with the threshold patched here if it was."""
    FAST_PATHS.for_bytes = COMPILE_FOR_BYTES
    return FAST_PATHS.for_file(nbytes)
