"""The 5.x timer store (docs/format/timer.md): ``timerwheel``, ``timerlog/``, ``config/timercheck``.

Every layout here is read from RocketMQ 5.3.3's ``store/timer`` sources: ``Slot`` (32 bytes),
``TimerLog`` (52-byte units, a 16-byte blank at a file's end), ``TimerCheckpoint`` (seven
longs in a 4096-byte file) and the constants of ``TimerMessageStore``.
"""

from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from .derive import field_offset, fixed_fields_format, lazy_dtypes, numpy_code

#: ``TimerWheel#putSlot``: the slot's time as ``timeMs / precisionMs`` (the 4.x/5.0 wheel
#: stored seconds: "to be compatible with previous version"), the first and last timer-log
#: position of the slot's chain, the number of messages and an unused magic.
TimerSlot = Struct(
    "time" / Int64sb,
    "first_pos" / Int64sb,
    "last_pos" / Int64sb,
    "num" / Int32sb,
    "magic" / Int32sb,
)
SLOT_SIZE: int = TimerSlot.sizeof()  # Slot.SIZE
SLOT_FORMAT = fixed_fields_format(TimerSlot)
#: A slot seen as 8-byte words: ``TimerWheel.slots`` finds the non-zero slots word-wise.
SLOT_WORD = numpy_code(Int64sb)
SLOT_WORDS = SLOT_SIZE // 8

#: ``TimerMessageStore#doEnqueue``: one unit per enqueued (or rolled, or deleted) message.
TimerLogUnit = Struct(
    "size" / Int32sb,  # TimerLog.UNIT_SIZE
    "prev_pos" / Int64sb,  # the slot's lastPos before this unit: the chain runs backwards
    "magic" / Int32sb,  # MAGIC_DEFAULT | MAGIC_ROLL | MAGIC_DELETE
    "enqueue_time" / Int64sb,  # currWriteTimeMs
    "delay" / Int32sb,  # delayedTime - currWriteTimeMs
    "offset_py" / Int64sb,  # the rmq_sys_wheel_timer message in the commit log
    "size_py" / Int32sb,
    "topic_hash" / Int32sb,  # hashTopicForMetrics(REAL_TOPIC): String#hashCode
    "reserved" / Int64sb,
)
UNIT_SIZE: int = TimerLogUnit.sizeof()
UNIT_FORMAT = fixed_fields_format(TimerLogUnit)

#: ``TimerLog#append``: when a unit and a blank do not fit, the file's rest is one blank.
TimerLogBlank = Struct(
    "size" / Int32sb,  # the bytes left in the file
    "zero" / Int64sb,
    "magic" / Int32sb,  # BLANK_MAGIC_CODE
)
MIN_BLANK_LEN: int = TimerLogBlank.sizeof()
#: The smallest timer-log file: one unit and the blank ``TimerLog#append`` keeps room for.
MIN_FILE_SIZE: int = UNIT_SIZE + MIN_BLANK_LEN
BLANK_FORMAT = fixed_fields_format(TimerLogBlank)


def _java_int(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


#: ``TimerLog.BLANK_MAGIC_CODE = 0xBBCCDDEE ^ 1880681586 + 8`` (``+`` binds before ``^``).
BLANK_MAGIC_CODE = _java_int(0xBBCCDDEE ^ (1880681586 + 8))

#: ``TimerCheckpoint#flush``: four longs, then the DataVersion (stateVersion, timestamp,
#: counter); a file of OS_PAGE_SIZE.
TimerCheckpoint = Struct(
    "last_read_time_ms" / Int64sb,
    "last_timer_log_flush_pos" / Int64sb,
    "last_timer_queue_offset" / Int64sb,
    "master_timer_queue_offset" / Int64sb,
    "state_version" / Int64sb,
    "timestamp" / Int64sb,
    "counter" / Int64sb,
)
CHECKPOINT_SIZE: int = TimerCheckpoint.sizeof()
CHECKPOINT_FORMAT = fixed_fields_format(TimerCheckpoint)
CHECKPOINT_FILE_SIZE = 4096
#: The first four longs: what an older broker wrote (``TimerCheckpoint`` reads the rest
#: only ``if (hasRemaining())``).
CHECKPOINT_MIN_SIZE = field_offset(TimerCheckpoint, "state_version")

# ``TimerMessageStore`` constants
TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
#: ``slotsTotal``: "the fixed number of slots regardless of precision"; the file holds twice as many.
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS
TIMER_BLANK_SLOTS = 60
MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2
#: ``TimerWheel.BLANK``: no position.
NO_POS = -1

# ``MessageConst`` properties of a timer message (``HookUtils#transformTimerMessage``)
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"


def wheel_file_size(slots_total: int = SLOTS_TOTAL) -> int:
    """``TimerWheel``'s ``wheelLength = slotsTotal * 2 * Slot.SIZE``."""
    return slots_total * 2 * SLOT_SIZE


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore#isMagicOK``: only the low four bits may be set."""
    return (magic | 0xF) == 0xF


#: ``SLOT_DTYPE``, ``UNIT_DTYPE``: numpy views of the wheel and a timer-log file.
__getattr__ = lazy_dtypes(globals(), {"SLOT_DTYPE": TimerSlot, "UNIT_DTYPE": TimerLogUnit})
