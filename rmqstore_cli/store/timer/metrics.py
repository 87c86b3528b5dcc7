"""``config/timermetrics``: pending timer messages per real topic (``TimerMetrics``, 5.3.3).

A ``ConfigManager`` JSON file (``TimerMetricsSerializeWrapper``: ``timingCount`` of
``{"count", "timeStamp"}`` per topic and a ``dataVersion``), loaded as every config file is
(``configfiles.load_config``: the file, else its ``.bak``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import orjson

from rmqstore_cli.store.files.safefs import replace_file


@dataclass
class TimerMetrics:
    #: topic -> (count, timeStamp)
    timing_count: dict[str, tuple[int, int]] = field(default_factory=dict)
    data_version: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: object) -> TimerMetrics:
        """The decoded JSON of the file (``TimerMetrics#decode``); odd entries are skipped."""
        out = cls()
        if not isinstance(obj, dict):
            return out
        counts = obj.get("timingCount")
        for topic, m in counts.items() if isinstance(counts, dict) else ():
            if isinstance(m, dict) and isinstance(m.get("count"), int):
                ts = m.get("timeStamp")
                out.timing_count[str(topic)] = (m["count"], ts if isinstance(ts, int) else 0)
        dv = obj.get("dataVersion")
        out.data_version = dv if isinstance(dv, dict) else {}
        return out

    def encode(self) -> bytes:
        """``TimerMetrics#encode`` (fastjson, fields sorted as it writes them)."""
        return orjson.dumps(
            {
                "dataVersion": self.data_version,
                "timingCount": {t: {"count": c, "timeStamp": ts} for t, (c, ts) in self.timing_count.items()},
            }
        )

    def write(self, path: Path, roots: list[Path]) -> None:
        """``ConfigManager#persist``: the file and its ``.bak`` (the previous content)."""
        data = self.encode()
        replace_file(path, data, roots)
        replace_file(path.with_name(path.name + ".bak"), data, roots)
