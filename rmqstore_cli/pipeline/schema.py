"""The export dataset's columns: dump-commitlog's JSON field names, plus ``store``.

Declared once here; the pyarrow and Spark schemas are both derived from this list.
"""

from __future__ import annotations

#: (column, type) in row order; types: long, int, string, binary, map, list, and timestamp: epoch
#: milliseconds as an instant (Arrow ``timestamp[ms, tz=UTC]``; Parquet TIMESTAMP(MILLIS,
#: isAdjustedToUTC=true), what the broker's ``System.currentTimeMillis()`` stamps hold).
EXPORT_COLUMNS: list[tuple[str, str]] = [
    ("physical_offset", "long"),
    ("total_size", "int"),
    ("magic", "string"),
    ("body_crc", "int"),
    ("queue_id", "int"),
    ("flag", "int"),
    ("queue_offset", "long"),
    ("sys_flag", "int"),
    ("born_timestamp", "timestamp"),
    ("born_host", "string"),
    ("store_timestamp", "timestamp"),
    ("store_host", "string"),
    ("reconsume_times", "int"),
    ("prepared_transaction_offset", "long"),
    ("properties", "map"),
    ("properties_string", "string"),
    ("properties_base64", "string"),
    ("tags", "string"),
    ("keys", "list"),
    ("uniq_key", "string"),
    ("msg_id", "string"),
    ("body_size", "int"),
    ("body", "binary"),
    ("file", "string"),
    ("topic_base64", "string"),
    ("topic", "string"),
    # partition columns last
    ("store", "string"),
    ("topic_dir", "string"),
]
#: Hive partitions ``store=…/topic_dir=…``. The topic is a column of the files, exact (NUL,
#: 32 KB V2 topics and all); ``topic_dir`` is only where its rows lie: see :func:`topic_dir`.
PARTITION_COLUMNS = ["store", "topic_dir"]
#: Longest topic (percent-escaped, as pyarrow's hive partitioning writes it) used as its own
#: directory name: with ``topic_dir=`` it stays under the 255 bytes of a file name.
TOPIC_DIR_MAX = 200
COLUMN_NAMES = [c for c, _ in EXPORT_COLUMNS]


def topic_dir(topic: str | None, topic_base64: str | None = None) -> str:
    """The partition directory value of a topic's rows: the topic itself when it can be one
    (pyarrow percent-escapes ``/``, ``%`` and non-ASCII and decodes them on read), else
    ``~`` and 32 hex digits of the SHA-256 of its bytes: an empty topic, ``.``/``..``, a NUL
    (which pyarrow would silently cut the name at), a topic that is not UTF-8, or one whose
    escaped form is over :data:`TOPIC_DIR_MAX` bytes (ENAMETOOLONG). ``~`` is outside the
    broker's topic characters, so such a name is never a real topic's own."""
    from urllib.parse import quote

    if (
        topic_base64 is None
        and topic
        and topic not in (".", "..")
        and "\0" not in topic
        and len(quote(topic, safe="")) <= TOPIC_DIR_MAX
    ):
        return topic
    import base64
    import hashlib

    raw = base64.b64decode(topic_base64) if topic_base64 else (topic or "").encode("utf-8", "surrogatepass")
    return "~" + hashlib.sha256(raw).hexdigest()[:32]


def arrow_schema():
    """The export columns as a pyarrow schema (the local engine's, and every Parquet file's)."""
    import pyarrow as pa

    types = {
        "long": pa.int64(),
        "int": pa.int32(),
        "string": pa.string(),
        "binary": pa.binary(),
        "map": pa.map_(pa.string(), pa.string()),
        "list": pa.list_(pa.string()),
        "timestamp": pa.timestamp("ms", tz="UTC"),
    }
    return pa.schema([(c, types[t]) for c, t in EXPORT_COLUMNS])


def spark_schema():
    """The export columns as a Spark schema (the JVM writer's; its timestamps are microseconds)."""
    from pyspark.sql import types as T

    types = {
        "long": T.LongType(),
        "int": T.IntegerType(),
        "string": T.StringType(),
        "binary": T.BinaryType(),
        "map": T.MapType(T.StringType(), T.StringType()),
        "list": T.ArrayType(T.StringType()),
        # microseconds in Spark; the JVM writer stores them as milliseconds (spark.export_jvm)
        "timestamp": T.TimestampType(),
    }
    return T.StructType([T.StructField(c, types[t], True) for c, t in EXPORT_COLUMNS])
