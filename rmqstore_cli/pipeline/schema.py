"""The export dataset's columns: dump-commitlog's JSON field names, plus ``store``.

Declared once here; the pyarrow and Spark schemas are both derived from this list.
"""
from __future__ import annotations

#: (column, type) in row order; types: long, int, string, binary, map, list.
EXPORT_COLUMNS: list[tuple[str, str]] = [
    ("physical_offset", "long"),
    ("total_size", "int"),
    ("magic", "string"),
    ("body_crc", "int"),
    ("queue_id", "int"),
    ("flag", "int"),
    ("queue_offset", "long"),
    ("sys_flag", "int"),
    ("born_timestamp", "long"),
    ("born_host", "string"),
    ("store_timestamp", "long"),
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
    # partition columns last
    ("store", "string"),
    ("topic", "string"),
]
PARTITION_COLUMNS = ["store", "topic"]
COLUMN_NAMES = [c for c, _ in EXPORT_COLUMNS]


def arrow_schema():
    import pyarrow as pa

    types = {"long": pa.int64(), "int": pa.int32(), "string": pa.string(), "binary": pa.binary(),
             "map": pa.map_(pa.string(), pa.string()), "list": pa.list_(pa.string())}
    return pa.schema([(c, types[t]) for c, t in EXPORT_COLUMNS])


def spark_schema():
    from pyspark.sql import types as T

    types = {"long": T.LongType(), "int": T.IntegerType(), "string": T.StringType(), "binary": T.BinaryType(),
             "map": T.MapType(T.StringType(), T.StringType()), "list": T.ArrayType(T.StringType())}
    return T.StructType([T.StructField(c, types[t], True) for c, t in EXPORT_COLUMNS])
