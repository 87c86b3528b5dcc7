"""Fixtures of the pipeline tests (helpers: tests/helpers/pipeline.py)."""

from __future__ import annotations

import pytest

from tests.helpers.pipeline import make_two_stores


@pytest.fixture(scope="module")
def two_stores(tmp_path_factory):
    """Two generated multi-file stores, the second with a damaged middle file (read-only by
    convention)."""
    return make_two_stores(tmp_path_factory.mktemp("fleet"))
