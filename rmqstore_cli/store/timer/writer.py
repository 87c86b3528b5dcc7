"""generate's timer store: what a 5.x broker writes for the timer messages it stores.

Each ``rmq_sys_wheel_timer`` message the writer appends is enqueued as
``TimerMessageStore#enqueue`` then ``#doEnqueue`` would at its store time (currWriteTimeMs =
the store time formatted to the precision): a 52-byte unit appended to the timer log
(prevPos = the slot's lastPos) and the slot put back with the unit as its lastPos and num
+ 1. At close the wheel, ``config/timercheck`` (``#prepareTimerCheckPoint``: read time and
queue offset where the broker stopped) and ``config/timermetrics`` are written. generate
gives every timer message a delivery time after the last store time, so a generated store
is a broker stopped with every timer message pending (nothing delivered yet). With
``--overdue-timers`` some are due inside the run: the checkpoint's read time is then left
at the first of their slots, a dequeue that stalled there (``#dequeue`` moves the read time
only past a slot it finished), so they are overdue (store/answers/overdue.py).
"""

from __future__ import annotations

from pathlib import Path

from rmqstore_cli.formats.timer import (
    MAGIC_DEFAULT,
    NO_POS,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_OUT_MS,
    SLOTS_TOTAL,
    UNIT_SIZE,
)

from rmqstore_cli.store.javahash import java_hash
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.timer.checkpoint import TimerCheckpoint
from rmqstore_cli.store.timer.log import TimerLogWriter
from rmqstore_cli.store.timer.metrics import TimerMetrics
from rmqstore_cli.store.timer.wheel import WheelWriter


class TimerWriter:
    """The timer store of a store being generated (fresh: no timer files yet)."""

    def __init__(self, config: StoreConfig, roots: list[Path]):
        self.config = config
        self.roots = roots
        self.precision = config.timer_precision_ms
        self.log = TimerLogWriter(config.timer_log_dir, config.mapped_file_size_timer_log, roots)
        self.wheel = WheelWriter(self.precision, SLOTS_TOTAL)
        self.counts: dict[str, int] = {}
        self.queue_offset = 0
        self.write_time = 0
        self.dues: list[int] = []

    def enqueue(self, msg) -> None:
        """``#enqueue`` + ``#doEnqueue`` of one stored rmq_sys_wheel_timer message."""
        delayed = int(msg.properties[PROPERTY_TIMER_OUT_MS])
        real = msg.properties.get(PROPERTY_REAL_TOPIC)
        self.write_time = msg.store_timestamp // self.precision * self.precision  # #maybeMoveWriteTime
        first, last, num, magic = self.wheel.get_slot(delayed)
        unit = (
            UNIT_SIZE,
            last,
            MAGIC_DEFAULT,
            self.write_time,
            delayed - self.write_time,
            msg.physical_offset,
            msg.total_size,
            java_hash(real) if real is not None else 0,
            0,
        )
        pos = self.log.append(unit)
        self.wheel.put_slot(delayed, pos if first == NO_POS else first, pos, num + 1, magic)
        self.counts[real] = self.counts.get(real, 0) + 1  # #addMetric
        self.queue_offset = msg.queue_offset + 1
        self.dues.append(delayed)

    def read_time(self) -> int:
        """lastReadTimeMs: the write time, or the first slot due before it (a stalled dequeue)."""
        slots = [d // self.precision * self.precision for d in self.dues]
        return min([t for t in slots if t < self.write_time], default=self.write_time)

    def close(self) -> None:
        """The wheel, the checkpoint and the metrics, as the broker's shutdown flushes them."""
        from rmqstore_cli.store.files.safefs import make_dirs

        self.log.close()
        cfg = self.config
        make_dirs(cfg.timer_checkpoint_path.parent, self.roots)
        self.wheel.write(cfg.timer_wheel_path, self.roots)
        cp = TimerCheckpoint(
            self.read_time(), self.log.write_pos, self.queue_offset, self.queue_offset, 0, self.write_time, 1
        )
        cp.write(cfg.timer_checkpoint_path, self.roots)
        metrics = TimerMetrics(
            {t: (n, self.write_time) for t, n in self.counts.items()},
            {"counter": len(self.counts), "stateVersion": 0, "timestamp": self.write_time},
        )
        metrics.write(cfg.root / "config" / "timermetrics", self.roots)
