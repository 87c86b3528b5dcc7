"""The operator's questions answered from the files: look-ups, offsets by time, disk use and
traffic, diffs, transactions, POP, overdue timers, traces, consumer progress."""
