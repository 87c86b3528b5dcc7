"""Derive fast-path views (``struct`` formats, numpy dtypes) from the construct declarations.

The hot loops never restate a layout: they call these on the declaration, and
``tests/engine/test_formats.py`` checks both decoders agree on every field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from construct import Bytes, Const, Construct, FormatField, Rebuild, Struct

if TYPE_CHECKING:  # numpy is imported where a dtype is made (numpy_dtype), never at import time
    import numpy as np


def fixed_fields_format(s: Struct) -> str:
    """The ``struct`` format of a Struct made only of fixed-size fields (nested flattened)."""
    return ">" + "".join(field_format(sc.subcon) for sc in s.subcons)


def field_format(sc: Construct) -> str:
    """The ``struct`` format of one fixed-size field, without the byte order."""
    if isinstance(sc, FormatField):
        fmt: str = sc.fmtstr  # construct has no annotations: the type is said here
        return fmt[1:]
    if isinstance(sc, Struct):
        return "".join(field_format(x.subcon) for x in sc.subcons)
    if isinstance(sc, Bytes) and isinstance(sc.length, int):
        return f"{sc.length}s"
    if isinstance(sc, (Const, Rebuild)):
        return field_format(sc.subcon)
    raise TypeError(f"not a fixed-size field: {sc!r}")


_NUMPY_CODES = {
    "q": ">i8",
    "l": ">i4",
    "i": ">i4",
    "h": ">i2",
    "b": "i1",
    "L": ">u4",
    "I": ">u4",
    "Q": ">u8",
    "H": ">u2",
    "B": "u1",
}


def numpy_code(sc: Construct) -> str:
    """The big-endian numpy dtype string of one fixed-size field (``Int32sb`` -> ``">i4"``,
    ``Bytes(4)`` -> ``"S4"``)."""
    fmt = field_format(sc)
    return f"S{fmt[:-1]}" if fmt.endswith("s") else _NUMPY_CODES[fmt]


def numpy_dtype(s: Struct) -> np.dtype[np.void]:
    """A big-endian numpy record dtype with the Struct's field names and layout."""
    import numpy as np  # only the commands that vectorise pay for numpy

    fmt = fixed_fields_format(s)[1:]
    return np.dtype({"names": [sc.name for sc in s.subcons], "formats": [_NUMPY_CODES[c] for c in fmt]})


def field_offset(s: Struct, name: str) -> int:
    """Byte offset of field ``name`` in a fixed-size Struct."""
    import struct

    pos = ">"
    for sc in s.subcons:
        if sc.name == name:
            return struct.calcsize(pos)
        pos += field_format(sc.subcon)
    raise KeyError(name)


def lazy_dtypes(namespace: dict[str, object], structs: dict[str, Struct]) -> Callable[[str], np.dtype[np.void]]:
    """A module ``__getattr__`` (PEP 562) that makes each name of ``structs`` the
    :func:`numpy_dtype` of its Struct on first use and keeps it in ``namespace``: numpy is
    imported only by the readers that vectorise, never by the per-record paths."""

    def __getattr__(name: str) -> np.dtype[np.void]:
        if name in structs:
            namespace[name] = dtype = numpy_dtype(structs[name])
            return dtype
        raise AttributeError(name)

    return __getattr__
