"""The one progress bar of every long job (expire, export, generate, rebuild-index, verify):
on stderr, only on a terminal, and only once the job has run a moment (:func:`progress_delay`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rmqstore_cli.render_console import err_console, isatty

#: The environment variable that sets how many seconds a job runs before its progress bar
#: shows (default :data:`PROGRESS_DELAY`; 0: at once, as the tests run it).
PROGRESS_DELAY_ENV = "RMQSTORE_PROGRESS_DELAY"
#: A job done sooner than this (seconds) shows no bar at all.
PROGRESS_DELAY = 2.0


def progress_delay() -> float:
    """Seconds before a progress bar shows: ``RMQSTORE_PROGRESS_DELAY``, else 2."""
    try:
        return max(float(os.environ.get(PROGRESS_DELAY_ENV, "") or PROGRESS_DELAY), 0.0)
    except ValueError:
        return PROGRESS_DELAY


class ProgressBar:
    """The one progress bar of every command: on stderr, and only when ``enabled`` (not
    ``--quiet``) and stderr is a terminal (otherwise every call does nothing), and only once
    the job has run :func:`progress_delay` seconds (2 s: a quick job draws nothing). Its
    columns: the label, the bar, the percentage, units done of the total (bytes, or
    ``unit``), the rate and the time left; with ``detail`` the label, the bar, a line of
    figures (:meth:`update`'s ``info``) and the time taken. Gone from the screen when done."""

    def __init__(
        self, label: str, total: int | None = None, enabled: bool = True, detail: bool = False, unit: str = "bytes"
    ):
        self.label = label
        self.total = total
        self.enabled = enabled and isatty(sys.stderr)
        self.detail = detail
        self.unit = unit
        self.bar: Any = None
        self.task: Any = None
        self.t0 = 0.0
        self.done = 0
        self.info = ""

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            import time

            self.t0 = time.perf_counter()
            self._shown()
        return self

    def _columns(self) -> tuple:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        if self.detail:
            return (
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
            )
        done, rate = (
            (DownloadColumn(), TransferSpeedColumn())
            if self.unit == "bytes"
            else (MofNCompleteColumn(), TextColumn("{task.fields[rate]}"))
        )
        return (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), done, rate, TimeRemainingColumn())

    def _shown(self) -> bool:
        """Whether the bar is on the screen: started once the delay has passed."""
        if self.bar is None and self.enabled:
            import time

            if time.perf_counter() - self.t0 < progress_delay():
                return False
            from rich.progress import Progress

            # stdout stays the command's own: rich would send what is printed there meanwhile
            # (verify's streamed findings) to the bar's console, stderr
            self.bar = Progress(*self._columns(), console=err_console(), transient=True, redirect_stdout=False)
            self.task = self.bar.add_task(self.label, total=self.total, completed=self.done, info=self.info, rate="")
            self.bar.start()
        return self.bar is not None

    def advance(self, n: int) -> None:
        """``n`` more units (bytes, files…) done."""
        self.done += n
        if self._shown():
            self._draw()

    def update(self, done: int, total: int, info: str = "") -> None:
        """``done`` of ``total``, with ``info`` (the figures shown with ``detail``)."""
        self.done, self.total, self.info = done, max(total, 1), info
        if self._shown():
            self._draw()

    def set_total(self, total: int) -> None:
        """The total, once the job knows it (a plan made inside the work)."""
        self.total = max(total, 1)
        if self._shown():
            self._draw()

    def _draw(self) -> None:
        rate = ""
        if self.unit != "bytes":
            import time

            rate = f"{self.done / max(time.perf_counter() - self.t0, 1e-6):,.0f} {self.unit}/s"
        self.bar.update(self.task, total=self.total, completed=self.done, info=self.info, rate=rate)

    def dispatch(self, files: int, done: int, total: int, messages: int) -> None:
        """A dispatch's progress (``store.rebuild.Progress``): bytes of the commit log done,
        with files, messages and MB/s."""
        if self.enabled:
            import time

            dt = max(time.perf_counter() - self.t0, 1e-6)
            self.update(done, total, f"files {files}  messages {messages:,}  {done / dt / 1e6:.0f} MB/s")

    def __exit__(self, *_exc) -> bool:
        if self.bar is not None:
            self.bar.stop()
        return False
