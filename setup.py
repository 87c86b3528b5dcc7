"""Build of the optional C extension; the project's metadata stays in pyproject.toml.

``rmqstore_cli._cjson`` renders dump-commitlog's JSON lines (rmqstore_cli/jsonblock.py).
It is ``optional``: where it does not build (no compiler, no Python headers) the install
still succeeds and the pure-Python reference renders every record (same output).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("rmqstore_cli._cjson", ["rmqstore_cli/_cjson.c"], optional=True,
                             extra_compile_args=["-O3"])])
