"""Names the dead-code check (tests/docs/test_codeshape.py, vulture) cannot see used, and why.

Each bare name below counts as a use for vulture; this file is never imported.
"""

v49, v5, v531  # commands/options.py BrokerVersion, VerifyBrokerVersion: enum members typer offers as choices
rolled_back, discard  # commands/transactions.py State: enum members typer offers as choices
revived, invisible, overdue  # commands/pop.py State: enum members typer offers as choices
max_check_times  # api/incident_records.py TransactionGroup: a field as_dict reads through dataclasses.fields
revive_processed, ck_offset, retry_offset, retry_store_timestamp  # api/incident_records.py PopMessage: as_dict's fields
behind, checkpoints, unprocessed_checkpoints, in_timer  # api/incident_records.py ReviveQueue: as_dict's fields
CheckpointV4  # formats/checkpoint.py: the 4.9.x checkpoint, declared beside V5 (the reader takes a prefix)
BlankRecord  # formats/commitlog.py: the END_FILE blank declared with the record (tests build it)
ConsumeQueueExtUnit, CQ_EXT_HEADER_SIZE  # formats: declared for the 5.x files (#20)
NEED_UNWRAP_FLAG  # formats/sysflag.py: MessageSysFlag, the whole set as the broker declares it
__getattr__  # module-level lazy attributes (PEP 562): numpy dtypes made on first use
_global, format_commands  # app.py: the typer callback of the global options; click calls the group's format_commands
export_rows  # pipeline/export_tasks.py: the per-record reference the bulk export is tested against
_jvm  # pipeline/spark.py: PySpark's own API (the gateway)
master_flushed_offset, confirm_phy_offset, min_timestamp_index  # store/layout/checkpoint.py: the broker's fields
max_message_size, delete_when  # store/layout/config.py: broker.conf keys parsed and shown
index_hashes  # store/javahash/bulk.py: the bulk IndexService#buildKey hash, tested against the per-key one
_topic_table, _kern  # verify: per-run caches stored in __dict__ and read back with .get
(
    __dir__,
    errors,
    broker_starts,
    message_at,
    message_by_id,
    timer_slots,
    timer_units,
    timer_next,
    timer_summary,
    completed,
    roll,
    delete,
    message_status,
    real_queue_id,
    timer_out_ms,
    consume_queue_units,
    dispatch_end,
    unreadable,
    compare_consume_queues,
)  # the public library (rmqstore_cli.__all__): called by scripts; tests/library
(
    first_byte,
    past_a,
    past_b,
    min_offset_a,
    max_offset_a,
    min_offset_b,
    max_offset_b,
    messages_only_a,
    messages_only_b,
    units_changed,
    first_changed,
    files_added,
    files_removed,
    files_changed,
    files_same,
    commitlog_divergence,
    queues_differing,
    offsets_backwards,
    offsets_forward,
    offsets_removed,
    offsets_added,
)  # api/incident_records.py Diff* fields: the JSON keys of rmqstore diff, read by scripts (as_dict walks them)
(
    late_ms,
    timer_pos,
    max_late_ms,
    not_enqueued,
)  # api/incident_records.py Overdue* and store/answers/overdue.py TimerState fields: dump-timer --overdue's JSON keys
traces  # api/store.py Store.traces: the public library (rmqstore_cli.__all__), called by scripts; tests/commands
(
    region_id,
    client_host,
    cost_time,
    msg_type,
    success,
    retry_times,
    context_code,
    transaction_id,
    transaction_state,
    from_transaction_check,
    trace_offset,
    trace_store_timestamp,
)  # api/trace_records.py TraceRecord fields: dump-commitlog --trace's JSON keys (as_dict walks them)
__signature__, __annotations__  # commands/source_options.py store_options: what typer reads (inspect, typing)
discard_reason, oldest_pending_born_timestamp  # api/incident_records.py Transaction*: JSON keys (as_dict walks fields)
store_a, store_b  # api/incident_records.py DiffSummary: diff's JSON keys, read by scripts (as_dict walks the fields)
body_length  # api/trace_records.py TraceRecord: a JSON key of dump-commitlog --trace (as_dict walks the fields)
search_offset  # api/store.py Store.search_offset: the public library (rmqstore_cli.__all__), called by scripts
# engine functions the commands call (commands/ is the top-level package this check does not scan):
check_options  # pipeline/rebuild_job.py, store/answers/offset_query.py: commands/rebuild_index.py, search_offset.py
outputs  # pipeline/rebuild_job.py: commands/rebuild_index.py
compaction_log, stop_warnings  # store/answers/log_range.py: commands/dump_commitlog.py
search_topics, find_key, not_found  # store/answers/lookup.py: commands/index_lookup.py, commands/decode_msgid.py
read_ids  # store/answers/msgid.py: commands/decode_msgid.py
store_version, command_queues, no_queue  # store/answers/offset_query.py: commands/search_offset.py, consumer_progress
(
    quick_verify,
    run_pad,
    failure,
    prepare,
    body_sizes,
    epoch_file,
)  # store/verify/quick.py, store/write/{repair,expire_run,generate_run}.py: the engine halves of
# commands/verify_local.py, repair.py, expire.py and generate.py, which call them (commands/ is not scanned)
age_ms  # api/incident_records.py Transaction: a field as_dict reads; commands/transactions.py prints it
bytes_freed, commitlog_files, unreadable_ranges  # api/job_records.py ExpireAction, ExportReport: as_dict's fields
next_store_timestamp, consumer_offset  # store/answers/progress.py ConsumerProgress: JSON keys as_dict reads
timer_log_files  # api/timer_records.py TimerSummary: a field as_dict reads through dataclasses.fields
writeable  # numpy ndarray.flags.writeable = False (store/verify/marks.py): a numpy setting, read by numpy
