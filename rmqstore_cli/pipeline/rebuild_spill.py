"""rebuild-index's spills: what a commit-log file's task captured (units, index keys,
BatchCQ units, index chains), saved beside the output in ``<dest>/.rmqstore-parts/`` as
``.npy`` files for the later tasks of ``rebuild_tasks.py``, and read back from there."""

from __future__ import annotations

import os
from pathlib import Path

from rmqstore_cli.pipeline.rebuild_dispatch import FileSummary

PARTS = ".rmqstore-parts"


def parts_dir(dest) -> Path:
    return Path(dest) / PARTS


def save_spill(path: Path, rows: list, dtype=None) -> None:
    """A spill: ``rows`` (each a list of 1-D pieces, joined) as one ``(len(rows), n)`` array
        in a ``.npy`` file, written in runs of :data:`SPILL_CHUNK` elements (no stacked copy of
    ~30 bytes a unit or key, no write per small queue),
        whole or not at all: its space reserved first, so a full disk is one ENOSPC error line,
        not a short write; the reservation is cut back to what was written."""
    import numpy as np

    from rmqstore_cli.store.files import safefs

    dtype = np.dtype(dtype or np.int64)
    n = sum(len(p) for p in rows[0]) if rows else 0
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            safefs.reserve(fh.fileno(), 0, len(rows) * n * dtype.itemsize + 4096, tmp)
            np.lib.format.write_array_header_1_0(
                fh, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (len(rows), n)}
            )
            for row in rows:
                for chunk in _chunks(row):
                    one = chunk[0] if len(chunk) == 1 else np.concatenate(chunk)
                    np.ascontiguousarray(one, dtype=dtype).tofile(fh)
            fh.truncate(fh.tell())
    except OSError as e:
        raise safefs.os_error(e, tmp, "write a spill") from None
    os.replace(tmp, path)  # a retried task replaces, never half-writes


#: Elements a spill writes at once: a file's many small queues in a few writes (20 000
#: queues: not 80 000 ``tofile`` calls), a big queue's units without a stacked copy.
SPILL_CHUNK = 1 << 16


def _chunks(row: list) -> list[list]:
    """The pieces of one spill row grouped in runs of about :data:`SPILL_CHUNK` elements."""
    out: list[list] = []
    run: list = []
    n = 0
    for piece in row:
        run.append(piece)
        n += len(piece)
        if n >= SPILL_CHUNK:
            out.append(run)
            run, n = [], 0
    if run:
        out.append(run)
    return out


def spilled_units(dest, s: FileSummary) -> dict:
    """The units file ``s`` spilled: queue → (phy, size, tagsCode, cq offset) arrays."""
    import numpy as np

    if not s.queues:
        return {}
    # a plain view of the mapping: slicing it per queue skips np.memmap's per-slice bookkeeping
    arr = np.load(parts_dir(dest) / f"{s.position}.units.npy", mmap_mode="r").view(np.ndarray)
    out, at = {}, 0
    for key, (_, _, n) in s.queues.items():
        out[key] = tuple(np.asarray(arr[r, at : at + n]) for r in range(4))
        at += n
    return out


def spilled_packed(dest, s: FileSummary) -> tuple[memoryview, dict]:
    """The units file ``s`` spilled as consume-queue units (``pack_units``, all queues at
    once, in spill order) and per queue its (first unit there, units, first cq offset)."""
    import numpy as np

    from rmqstore_cli.store.queues.consume_queue import pack_units

    if not s.queues:
        return memoryview(b""), {}
    arr = np.load(parts_dir(dest) / f"{s.position}.units.npy", mmap_mode="r").view(np.ndarray)
    where, at = {}, 0
    for key, (first, _, n) in s.queues.items():
        where[key] = (at, n, first)
        at += n
    return memoryview(pack_units(arr[0], arr[1], arr[2])), where


def spilled_batch(dest, s: FileSummary, key: tuple[str, int]):
    """Queue ``key``'s BatchCQ units that file ``s`` spilled: (6, n) int64 (``FileDispatch.batch``)."""
    import numpy as np

    arr = np.load(parts_dir(dest) / f"{s.position}.bcq.npy", mmap_mode="r")
    at = 0
    for k, n in s.batch.items():
        if k == key:
            return np.asarray(arr[:, at : at + n])
        at += n
    return np.empty((6, 0), np.int64)


def spilled_keys(dest, position: int) -> tuple:
    import numpy as np

    path = parts_dir(dest) / f"{position}.keys.npy"
    if not path.exists():
        return tuple(np.empty(0, np.int64) for _ in range(3))
    arr = np.load(path, mmap_mode="r")
    return arr[0], arr[1], arr[2]
