"""The build's one addition to pyproject.toml (which holds all the metadata): the compiled
loops (issue 23), as dulwich ships ``_pack.c`` beside its pure-Python pack code.

- ``rmqstore_cli.store._ckernels`` (rmqstore_cli/store/_ckernels.c): the engine's record
  walk, small bodies' CRC and byte-range joins (rmqstore_cli/store/files/kernels.py chooses);
- ``rmqstore_cli._cjson`` (rmqstore_cli/_cjson.c): dump-commitlog's JSON lines
  (rmqstore_cli/jsonblock.py);
- ``rmqstore_cli.store._mapguard`` (rmqstore_cli/store/_mapguard.c): not a speed path but
  the SIGBUS guard of mapped reads (rmqstore_cli/store/files/mapguard.py: a file truncated while
  it is read is one error line, not a dead process), used under RMQSTORE_PURE=1 too.

All three are ``optional=True``: a machine without a C compiler (or without Python's headers)
still installs and runs the reference loops, same output, but never silently: the build ends
with a warning on stderr naming each extension that failed and what to install
(:class:`BuildExt`; pip shows a build's output with ``pip install -v``), and ``rmqstore
--version`` and verify's summary (``c_extensions``) say which run and why; without the
guard, read-only files are read into memory instead of mapped (mapguard.py). Plain C API
and the buffer protocol: nothing but the compiler and Python's headers is needed to build them.
"""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: What a machine needs to build the extensions (the warning names it).
NEEDS = (
    "a C compiler and Python's development headers, e.g.\n"
    "      Debian/Ubuntu: apt-get install gcc python3-dev\n"
    "      Fedora/RHEL:   dnf install gcc python3-devel\n"
    "      Alpine:        apk add gcc musl-dev python3-dev\n"
    "      macOS:         xcode-select --install"
)


class BuildExt(build_ext):
    """build_ext that says loudly which optional extension did not build, and why, instead
    of setuptools' one line lost in the build log (the install still succeeds)."""

    def run(self) -> None:
        self.failed: list[tuple[str, str]] = []
        super().run()
        if self.failed:
            sys.stderr.write(warning(self.failed))
            sys.stderr.flush()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:  # CompileError, CCompilerError, DistutilsExecError: optional ones are skipped
            self.failed.append((ext.name, str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__))
            raise


def warning(failed: list[tuple[str, str]]) -> str:
    """The multi-line warning for extensions that did not build."""
    bar = "!" * 78
    lines = [bar, "WARNING: these optional C extensions of rmqstore were NOT built (it runs much slower without):", ""]
    lines += [f"  {name}: {why}" for name, why in failed]
    lines += [
        "",
        "  The install goes on: every command runs its pure-Python reference loops (same output,",
        "  many times slower; without _mapguard files are read into memory instead of mapped).",
        f"  To build them install {NEEDS}",
        "  then reinstall (pip install . or pip install -e .). `rmqstore --version` says which run.",
        bar,
        "",
    ]
    return "\n".join(lines)


setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "rmqstore_cli.store._ckernels",
            [
                "rmqstore_cli/store/_ckernels.c",
                "rmqstore_cli/store/_cdump.c",
                "rmqstore_cli/store/_carrow.c",
                "rmqstore_cli/store/_ccrc.c",
                "rmqstore_cli/store/_cencode.c",
            ],
            depends=[
                "rmqstore_cli/store/_cdump.h",
                "rmqstore_cli/store/_carrow.h",
                "rmqstore_cli/store/_ccrc.h",
                "rmqstore_cli/store/_cencode.h",
                "rmqstore_cli/store/_v6text.h",
            ],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "rmqstore_cli._cjson",
            ["rmqstore_cli/_cjson.c"],
            depends=["rmqstore_cli/store/_v6text.h"],
            optional=True,
            extra_compile_args=["-O3"],
        ),
        Extension(
            "rmqstore_cli.store._mapguard",
            ["rmqstore_cli/store/_mapguard.c"],
            optional=True,
            extra_compile_args=["-std=gnu11"],
        ),
    ],
)
