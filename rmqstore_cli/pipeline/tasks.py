"""Former home of the pipeline's tasks, split by concern: :mod:`.stores` (stores, file
tasks, verify of one store), :mod:`.export_tasks` and :mod:`.rebuild_tasks`. These names
stay importable from here until every caller (``commands/``) imports them from there."""
from __future__ import annotations

from rmqstore_cli.pipeline.export_tasks import export_batches, export_rows
from rmqstore_cli.pipeline.stores import FileTask, StoreSpec, expand_stores, file_tasks, verify_store

__all__ = ["FileTask", "StoreSpec", "expand_stores", "export_batches", "export_rows", "file_tasks", "verify_store"]
