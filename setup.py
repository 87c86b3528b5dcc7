"""The build's one addition to pyproject.toml (which holds all the metadata): the compiled
loops (issue 23), as dulwich ships ``_pack.c`` beside its pure-Python pack code.

- ``rmqstore_cli.store._ckernels`` (rmqstore_cli/store/_ckernels.c): the engine's record
  walk, small bodies' CRC and byte-range joins (rmqstore_cli/store/kernels.py chooses);
- ``rmqstore_cli._cjson`` (rmqstore_cli/_cjson.c): dump-commitlog's JSON lines
  (rmqstore_cli/jsonblock.py);
- ``rmqstore_cli.store._mapguard`` (rmqstore_cli/store/_mapguard.c): not a speed path but
  the SIGBUS guard of mapped reads (rmqstore_cli/store/mapguard.py: a file truncated while
  it is read is one error line, not a dead process), used under RMQSTORE_PURE=1 too.

All three are ``optional=True``: a machine without a C compiler (or without Python's headers)
still installs, with a warning, and runs the reference loops, same output (``rmqstore
--version`` says which run); without the guard, read-only files are read into memory
instead of mapped (mapguard.py). Plain C API and the buffer protocol: nothing but the
compiler and Python's headers is needed to build them.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "rmqstore_cli.store._ckernels",
            ["rmqstore_cli/store/_ckernels.c"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension("rmqstore_cli._cjson", ["rmqstore_cli/_cjson.c"], optional=True, extra_compile_args=["-O3"]),
        Extension(
            "rmqstore_cli.store._mapguard",
            ["rmqstore_cli/store/_mapguard.c"],
            optional=True,
            extra_compile_args=["-std=gnu11"],
        ),
    ]
)
