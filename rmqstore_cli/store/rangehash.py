"""Temporary re-export (issue #17): :func:`java_range_hashes` lives in
:mod:`~rmqstore_cli.store.javahash.bulk` now, with every other ``String#hashCode`` routine."""
from rmqstore_cli.store.javahash.bulk import java_range_hashes  # noqa: F401
