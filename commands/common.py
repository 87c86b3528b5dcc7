"""The names every command imports, in one place: each lives in the module of its role.

* :mod:`~rmqstore_cli.commands.options`: the options several commands declare alike;
* :mod:`~rmqstore_cli.commands.exits`: ``@command``, errors and output faults to exit codes;
* :mod:`~rmqstore_cli.commands.which_store`: which store, and the stderr line saying why;
* :mod:`~rmqstore_cli.commands.opening`: the store's config and engine opened, its warnings;
* :mod:`~rmqstore_cli.commands.completion`: shell completion of topics and queue ids.
"""

from __future__ import annotations

from rmqstore_cli.commands.completion import complete_queue_id, complete_topic
from rmqstore_cli.commands.exits import ODD_SIZE_HINT, STATE, command, fail, output_fault, work_done
from rmqstore_cli.commands.opening import load_config, no_such_topic, open_store, warn_odd_files, warn_store
from rmqstore_cli.commands.options import (
    JAVA_INT_MAX,
    STORE_HELP,
    AllowOddSizeOpt,
    BrokerConfOpt,
    BrokerVersion,
    CommitlogSizeOpt,
    CqSizeOpt,
    Engine,
    EngineOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    JobsOpt,
    QuietOpt,
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoreGlobOpt,
    StoreOpt,
    StoresOpt,
    TzOpt,
    VerifyBrokerVersion,
    VerifyJobsOpt,
)
from rmqstore_cli.commands.which_store import CONF_ENV, DEFAULT_STORE, STORE_ENV, conf_path, pick_store, pick_stores

__all__ = [
    "CONF_ENV",
    "DEFAULT_STORE",
    "JAVA_INT_MAX",
    "ODD_SIZE_HINT",
    "STATE",
    "STORE_ENV",
    "STORE_HELP",
    "AllowOddSizeOpt",
    "BrokerConfOpt",
    "BrokerVersion",
    "CommitlogSizeOpt",
    "CqSizeOpt",
    "Engine",
    "EngineOpt",
    "Fmt",
    "FormatOpt",
    "IndexMaxOpt",
    "IndexSlotsOpt",
    "JobsOpt",
    "QuietOpt",
    "SparkConfOpt",
    "SparkMasterOpt",
    "SparkVerboseOpt",
    "StoreGlobOpt",
    "StoreOpt",
    "StoresOpt",
    "TzOpt",
    "VerifyBrokerVersion",
    "VerifyJobsOpt",
    "command",
    "complete_queue_id",
    "complete_topic",
    "conf_path",
    "fail",
    "load_config",
    "no_such_topic",
    "open_store",
    "output_fault",
    "pick_store",
    "pick_stores",
    "warn_odd_files",
    "warn_store",
    "work_done",
]
