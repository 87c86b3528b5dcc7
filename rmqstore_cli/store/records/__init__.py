"""A commit-log record as the broker's services see it: decoded one at a time or as columns,
its properties, ids, kind, topic table and the shared filters."""
