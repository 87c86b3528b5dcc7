"""The 5.x timer store's owners: the wheel, the log, the checkpoint and the metrics.

``TimerMessageStore`` (5.3.3) keeps a timer message in three places besides the commit log:
``timerwheel`` (:mod:`.wheel`), ``timerlog/`` (:mod:`.log`) and ``config/timercheck``
(:mod:`.checkpoint`); ``config/timermetrics`` (:mod:`.metrics`) counts them per topic.
:class:`TimerStore` opens them together, with the geometry from the broker config
(``timerPrecisionMs``, ``mappedFileSizeTimerLog``; ``slotsTotal`` is fixed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rmqstore_cli.formats.timer import SLOTS_TOTAL

from rmqstore_cli.store.layout.config import StoreConfig, timer_files_present
from rmqstore_cli.store.timer.checkpoint import TimerCheckpoint
from rmqstore_cli.store.timer.log import TimerLog
from rmqstore_cli.store.timer.wheel import TimerWheel


def infer_log_file_size(config: StoreConfig) -> int:
    """``mappedFileSizeTimerLog``: the config's when set, else the one size all timer-log
    files share (the default when they disagree: verify then names the odd ones)."""
    from rmqstore_cli.store.layout.config import data_files

    if "mapped_file_size_timer_log" in config.explicit:
        return config.mapped_file_size_timer_log
    sizes = {p.stat().st_size for p in data_files([config.timer_log_dir])} - {0}
    if len(sizes) == 1:
        config.mapped_file_size_timer_log = sizes.pop()
    return config.mapped_file_size_timer_log


@dataclass
class TimerStore:
    config: StoreConfig
    wheel: TimerWheel
    log: TimerLog

    @classmethod
    def open(cls, config: StoreConfig) -> TimerStore | None:
        """The timer store of ``config``'s root, None when it has no timer file (a 4.9 store,
        or ``timerWheelEnable=false`` from the start). Nothing is read yet."""
        if not timer_files_present(config.root):
            return None
        wheel = TimerWheel(config.timer_wheel_path, config.timer_precision_ms, SLOTS_TOTAL)
        return cls(config, wheel, TimerLog(config.timer_log_dir, infer_log_file_size(config)))

    @property
    def precision_ms(self) -> int:
        return self.config.timer_precision_ms

    def read_checkpoint(self) -> TimerCheckpoint | None:
        """``config/timercheck``, None when absent (the broker starts from zeros)."""
        p = self.config.timer_checkpoint_path
        return TimerCheckpoint.read(p) if os.path.lexists(p) else None

    def geometry(self) -> dict:
        """The wheel as expected.json names it."""
        return {
            "path": "timerwheel",
            "size": self.wheel.length,
            "slotsTotal": self.wheel.slots_total,
            "precisionMs": self.precision_ms,
        }

    def format_time(self, time_ms: int) -> int:
        """``TimerMessageStore#formatTimeMs``."""
        return time_ms // self.precision_ms * self.precision_ms

    def close(self) -> None:
        self.log.close()
