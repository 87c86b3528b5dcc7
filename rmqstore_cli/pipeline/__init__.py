"""The data pipeline: the same engine code, partitioned by commit-log file.

``tasks`` holds the work units and what one unit does (pure Python, no Spark); the local
engine runs them in this process, ``spark`` runs the very same functions on executors.
"""
