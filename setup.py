"""The build's one addition to pyproject.toml (which holds all the metadata): the engine's
compiled loops, rmqstore_cli/store/_ckernels.c (issue 23).

``optional=True``: a machine without a C compiler (or without Python's headers) still
installs, with a warning, and runs the reference loops (rmqstore_cli/store/kernels.py
says which; ``rmqstore --version`` shows it). Plain C API and the buffer protocol: nothing
but the compiler and Python's headers is needed to build it.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("rmqstore_cli.store._ckernels", ["rmqstore_cli/store/_ckernels.c"],
                             optional=True, extra_compile_args=["-O3"])])
