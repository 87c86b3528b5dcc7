"""The operator's questions answered from the files: look-ups, offsets by time, where a walk
of the log goes (its range, sampling), disk use and traffic, diffs, transactions, POP,
overdue timers, traces, consumer progress."""
