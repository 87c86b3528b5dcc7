"""What is left of numba in the engine: how :mod:`~rmqstore_cli.jsonkernel` (dump's JSON
lines for large dumps) is compiled, and the byte copy it calls. The engine's own loops are C
(:mod:`~rmqstore_cli.store.kernels`); this module goes when jsonkernel's C port lands, and
with it the ``numba`` dependency. Reached through ``kernels.JIT`` / ``kernels.copy_bytes``
(loaded on demand), so no other command imports numba.
"""
from __future__ import annotations

import os
import tempfile

import numba
import numpy as np
from numba import njit


def _cacheable() -> None:
    """Compiled code is cached beside this file, else in numba's user-wide cache; when
    neither is writable (a read-only install run by a user without a home), in the temp
    directory, so that no run compiles again."""
    try:
        njit(cache=True)(_cacheable)
    except RuntimeError:
        numba.config.CACHE_DIR = os.path.join(tempfile.gettempdir(), f"rmqstore-numba-{os.getuid()}")


_cacheable()
#: how jsonkernel's loops are compiled: cached, without bounds checks
JIT = njit(cache=True, nogil=True, boundscheck=False)


@JIT
def copy_bytes(out, o, src, a, n):
    """``out[o:o+n] = src[a:a+n]``, returns ``o + n``; unsigned indexes spare numba's
    negative-index check, which keeps the loop from being vectorised."""
    for k in range(n):
        out[np.uint64(o + k)] = src[np.uint64(a + k)]
    return o + n
