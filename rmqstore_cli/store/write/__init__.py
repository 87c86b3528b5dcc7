"""Everything that writes a store: the reput dispatch, the writer, generate's workload,
rebuild-index, repair and expiry."""
