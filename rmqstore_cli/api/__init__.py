"""The library: :func:`open_store` and what it returns (re-exported by ``rmqstore_cli``)."""
