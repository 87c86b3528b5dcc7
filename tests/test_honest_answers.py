"""Issue 16, "Honest answers": verify says what is missing and how to repair it, the end of a
torn log is where its data ends, epoch seconds are not read as milliseconds, index-lookup
finds topics without consume queues, and every command answers the same situation the same
way (usage errors, negative answers, broken pipes, unknown topics)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_pytest_says_why_tests_were_skipped(tmp_path):
    """pyproject's addopts carry -rs: a fresh clone without ../shared/fixtures is told why the
    real-broker tests skip, not just how many."""
    (tmp_path / "test_skip.py").write_text(
        "import pytest\n\ndef test_x():\n    pytest.skip('real-broker fixture is absent')\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "-p", "no:cacheprovider",
                        "--rootdir", str(tmp_path), str(tmp_path / "test_skip.py")],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED" in r.stdout and "real-broker fixture is absent" in r.stdout, r.stdout
