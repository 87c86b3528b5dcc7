"""Where the engine chooses its fast paths: the one policy.

Every bulk reader has a reference loop (Python and numpy) and a compiled twin that gives
the same result to the bit (tests compare): the engine's C loops
(:mod:`~rmqstore_cli.store.files.kernels`) and dump's JSON renderer (``rmqstore_cli._cjson``),
both C extensions built at install (setup.py). They cost nothing to load, so they run
whenever they were built; ``RMQSTORE_PURE=1`` (or :attr:`FastPaths.pure`) forces the
reference loops, which is how the tests run both. That choice and the renderer's and
append path's sizes live here, in :data:`FAST_PATHS`, and nowhere else; a caller may also
force a path with the ``compiled`` parameter of
:func:`~rmqstore_cli.store.commitlog.bulk.walk_records`.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.crc import body_crcs
from rmqstore_cli.store.files.extload import Loaded, load, phrase


class MissingExtension(StoreError):
    """The compiled loops were forced (``compiled=True``) but the C extension is not here:
    a one-line error naming it and how to build it, not an AttributeError."""


class FastPaths:
    """Which loops run (one per process).

    * ``pure`` — True: the reference loops everywhere, even where the C loops are built
      (from ``RMQSTORE_PURE``: set and not ``0``);
    * ``json_min`` — dump renders a block of at least this many JSON lines with the
      compiled renderer (a C extension: nothing to load; below ~16 lines its per-block
      set-up, ~120 µs, costs more than the reference's ~8 µs a line; tests set it to 0 to
      use it everywhere, or high to force the reference);
    * ``key_block`` — the append path (generate) puts its index keys this many at a time
      (:class:`~rmqstore_cli.store.write.keyblock.IndexKeyBlock`: hashed in bulk, the header once
      per block); 0 puts each key as it comes (the reference, ``IndexService#putKey``);
    * ``gen_block`` — the append path (generate, ``--from-jsonl``) encodes, writes and
      dispatches this many sends at a time (``CommitLog.append_block``, ``FastDispatcher``);
      0 appends and dispatches each send as it comes (the reference, ``CommitLog.append``).
    """

    def __init__(
        self, json_min: int = 16, key_block: int = 1 << 16, gen_block: int = 1 << 13, pure: bool | None = None
    ):
        self.json_min, self.key_block, self.gen_block = json_min, key_block, gen_block
        self.pure = os.environ.get("RMQSTORE_PURE", "0") not in ("", "0") if pure is None else pure

    def kernels(self) -> ModuleType | None:
        """The C loops (:mod:`~rmqstore_cli.store.files.kernels`: walk, body CRCs, joins), or None
        for the reference loops: :attr:`pure`, or the extension was not built."""
        if self.pure:
            return None
        from rmqstore_cli.store.files import kernels

        return kernels if kernels.BUILT else None

    @staticmethod
    def require_kernels() -> ModuleType:
        """The C loops for a caller that forces them (``compiled=True``, even when
        :attr:`pure`); :class:`MissingExtension` when the extension was not built (or was
        built for another layout: ``kernels.layout``)."""
        from rmqstore_cli.store.files import kernels

        if not kernels.BUILT:
            raise MissingExtension(
                "the compiled loops were asked for (compiled=True) but the C extension "
                "rmqstore_cli.store._ckernels is not built, or was built for another layout",
                hint="build it with `pip install -e .` or `python setup.py build_ext --inplace` "
                "(needs a C compiler), or leave compiled=None to run the reference loops",
            )
        return kernels

    def describe(self) -> str:
        """Which loops run, in a few words (``rmqstore --version``'s first line), and how wide
        the CRC-32 folds (``RMQSTORE_NO_VPCLMUL``/``RMQSTORE_NO_CLMUL`` narrow it)."""
        k = self.kernels()
        if k is not None:
            return f"C loops, CRC-32 on {k.CLMUL_BITS}-bit carry-less multiplies" if k.CLMUL_BITS else "C loops"
        if self.pure:
            return "reference loops: RMQSTORE_PURE is set"
        from rmqstore_cli.store.files import kernels

        return f"reference loops: the C extension {phrase(kernels.PROBLEM)}"

    def extensions(self) -> dict[str, str]:
        """Each C extension's state: "in use", or why not ("RMQSTORE_PURE is set", "not
        built", "failed to import: " and the error, "built for another layout") — what
        ``rmqstore --version`` prints, verify's summary holds (``c_extensions``) and
        bench/bench_all.py's header shows, so that a run at pure-Python speed is never silent.
        The SIGBUS guard is not a speed path: RMQSTORE_PURE leaves it on."""
        from rmqstore_cli.store.files import kernels, mapguard

        pure = "RMQSTORE_PURE is set" if self.pure else ""
        return {
            "_ckernels": pure or kernels.PROBLEM or "in use",
            "_cjson": pure or _cjson().problem or "in use",
            "_mapguard": mapguard.PROBLEM or "in use",
        }

    def walk_loop(self, compiled: bool | None = None, entries: bool = False):
        """The compiled walk to use (``kernels.walk``, or ``walk_entries`` for a DLedger
        file), or None for the reference loop: ``compiled`` forces either (True needs the
        built extension: :meth:`require_kernels`); None: :meth:`kernels` decides."""
        if compiled:
            k = self.require_kernels()
        else:
            k = self.kernels() if compiled is None else None
        if k is None:
            return None
        return k.walk_entries if entries else k.walk

    def body_crcs(self, buf, a: np.ndarray | None, at: np.ndarray, ln: np.ndarray) -> np.ndarray:
        """:func:`~rmqstore_cli.store.files.crc.body_crcs` (``UtilAll#crc32`` of every body),
        small bodies in the C loop, long ones (and all on the reference path, or without
        ``a``, ``buf`` as a uint8 array) by zlib."""
        k = self.kernels()
        if k is None or a is None:
            return body_crcs(buf, at, ln)
        got = np.empty(at.size, np.int64)
        if k.small_body_crcs(a, at, ln, k.SMALL_BODY, got):
            big = np.flatnonzero(ln >= k.SMALL_BODY)
            got[big] = body_crcs(buf, at[big], ln[big])
        return got

    def json_kernel(self, n: int) -> ModuleType | None:
        """The compiled JSON renderer (the C extension ``rmqstore_cli._cjson``) for a block
        of ``n`` lines, or None for the reference (fewer than :attr:`json_min`, :attr:`pure`,
        or the extension did not build)."""
        if n < self.json_min or self.pure:
            return None
        return _cjson().module


def _cjson() -> Loaded:
    """The compiled JSON renderer's import (this module is its one user; after the first,
    a look-up in ``sys.modules``, so a test may take it away)."""
    return load("rmqstore_cli._cjson")


#: The process's policy.
FAST_PATHS = FastPaths()
