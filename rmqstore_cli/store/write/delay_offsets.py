"""generate's ``config/delayOffset.json``: the delay service's progress, left behind on purpose.

``ScheduleMessageService#encode`` writes ``DelayOffsetSerializeWrapper`` with fastjson:
``{"dataVersion":{...},"offsetTable":{1:5,2:3}}`` (integer map keys unquoted, as
``store/layout/offsets.py`` reads them back), each level's offset the next one of queue level - 1
of ``SCHEDULE_TOPIC_XXXX`` to deliver (``#delayLevel2QueueId``). A lag of N leaves each
level's last N messages (fewer if the queue has fewer) undelivered: those due already are
what ``dump-timer --overdue`` and verify's ``delay.overdue`` report.
"""

from __future__ import annotations

from pathlib import Path

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.layout.offsets import DELAY_OFFSET_FILE, SCHEDULE_TOPIC


def encode_delay_offsets(levels: dict[int, int], timestamp: int) -> bytes:
    """``ScheduleMessageService#encode`` of ``levels`` (level -> offset) as fastjson prints it."""
    table = ",".join(f"{lvl}:{off}" for lvl, off in sorted(levels.items()))
    version = f'{{"counter":{len(levels)},"stateVersion":0,"timestamp":{timestamp}}}'
    return f'{{"dataVersion":{version},"offsetTable":{{{table}}}}}'.encode()


def lagging_offsets(config: StoreConfig, lag: int) -> dict[int, int]:
    """Each level with a queue on disk -> its max offset less ``lag`` (at least its min)."""
    from rmqstore_cli.store.files.mapped_files import queue_dirs
    from rmqstore_cli.store.message_store import MessageStore

    ms = MessageStore(config)
    try:
        out = {}
        for topic, qid, _ in queue_dirs(config.consumequeue_dir):
            if topic == SCHEDULE_TOPIC:
                cq = ms.consume_queue(topic, qid)
                out[qid + 1] = max(cq.max_offset - lag, cq.min_offset(ms.commitlog.min_offset))
        return out
    finally:
        ms.close()


def write_lagging_offsets(config: StoreConfig, lag: int, roots: list[Path], timestamp: int) -> None:
    """``config/delayOffset.json`` with every level ``lag`` messages behind its queue's end."""
    from rmqstore_cli.store.files.safefs import make_dirs, replace_file

    path = config.root / "config" / DELAY_OFFSET_FILE
    make_dirs(path.parent, roots)
    replace_file(path, encode_delay_offsets(lagging_offsets(config, lag), timestamp), roots)
