"""A commit-log record as the broker's services see it, one at a time: its fields, properties,
ids, kind, the topic table and the shared filters (a block of records as columns is
store/commitlog/columns.py's)."""
