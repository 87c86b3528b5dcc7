"""bench/compare_revisions.py: the verdict and output logic on fixed numbers, and a case
that one revision cannot run being skipped with a note. No timing is asserted."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
_spec = importlib.util.spec_from_file_location("compare_revisions", ROOT / "bench" / "compare_revisions.py")
cr = importlib.util.module_from_spec(_spec)
sys.modules["compare_revisions"] = cr  # dataclasses look their module up by name
_spec.loader.exec_module(cr)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1.00, 1.02, 0.99], [1.01, 1.03, 1.00], "same"),  # +1 %
        ([1.00, 1.01, 0.99], [1.10, 1.12, 1.09], "SLOWER"),  # +10 %, every B run above every A run
        ([1.00, 1.20, 0.99], [1.10, 1.12, 0.98], "slower?"),  # +10 % on the medians, the runs overlap
        ([1.00, 1.01, 0.99], [0.80, 0.82, 0.81], "faster"),
        ([1.00, 0.80, 0.99], [0.90, 0.91, 1.05], "faster?"),
        ([1.00, 1.00, 1.00], [1.05, 1.05, 1.05], "same"),  # exactly the threshold is not flagged
    ],
)
def test_verdict(a, b, expected):
    assert cr.verdict(a, b, 0.05) == expected


def test_ratio_is_of_the_medians_and_survives_zero():
    assert cr.ratio([1.0, 2.0, 9.0], [3.0, 4.0, 0.5]) == 1.5
    assert cr.ratio([0.0], [0.0]) == 1.0 and cr.ratio([0.0], [0.1]) == float("inf")


def test_output_verdict():
    assert cr.output_verdict(["x", "x"], ["x", "x"]) == "same"
    assert cr.output_verdict(["x", "y"], ["x", "x"]) == "varies"  # A's own runs disagree: not comparable
    assert cr.output_verdict(["x", "x"], ["y", "y"]) == "DIFFERS"


def test_table_rows_and_skipped_note():
    done = cr.Row(
        "verify",
        cpu_a=[2.0, 2.2, 2.1],
        cpu_b=[2.4, 2.5, 2.3],
        wall_a=[3.0] * 3,
        wall_b=[3.0] * 3,
        rss_a=[102400] * 3,
        rss_b=[102400] * 3,
        output="stdout same",
    )
    skipped = cr.Row("export (local)", note="pyarrow not installed in B")
    lines = cr.table([done, skipped]).splitlines()
    assert lines[2].startswith("| verify | 2.100 | 2.400 | 1.143 | SLOWER |") and "| 100 | 100 |" in lines[2]
    assert lines[3] == "| export (local) | | | | skipped | | | | | | | | pyarrow not installed in B |"
    assert all(ln.count("|") == lines[0].count("|") for ln in lines)


def test_tree_digest_sees_names_bytes_and_links(tmp_path):
    def tree(root, body, link):
        (root / "d").mkdir(parents=True)
        (root / "d" / "f").write_bytes(body)
        (root / "l").symlink_to(link)
        return cr.tree_digest(root)

    base = tree(tmp_path / "a", b"x", "/s")
    assert base == tree(tmp_path / "b", b"x", "/s")
    assert base != tree(tmp_path / "c", b"y", "/s") and base != tree(tmp_path / "e", b"x", "/t")
    (tmp_path / "empty").mkdir()
    assert cr.tree_digest(tmp_path / "empty") == "" == cr.tree_digest(tmp_path / "absent")


def _fake_side(tmp_path: Path, label: str, script: str) -> cr.Side:
    bin_dir = tmp_path / label
    bin_dir.mkdir()
    (bin_dir / "rmqstore").write_text("#!/bin/sh\n" + script)
    (bin_dir / "rmqstore").chmod(0o755)
    return cr.Side(label, label, "0" * 40, tmp_path, bin_dir)


def test_a_command_only_one_revision_has_is_skipped_with_a_note(tmp_path):
    a = _fake_side(tmp_path, "A", 'echo "{\\"store\\": \\"$3\\"}"\n')
    b = _fake_side(tmp_path, "B", "echo \"Error: No such command '$1'.\" >&2; exit 2\n")
    opts = argparse.Namespace(rounds=2, timeout=60)
    case = cr.Case("new-cmd", ("new-cmd", "--store", "{store}"))
    work = tmp_path / "work"
    work.mkdir()
    spawner = cr.Spawner()
    try:
        row = cr.bench_case(case, [a, b], {"store": "/s", "out": str(work / "out")}, opts, spawner, work)
        assert row.skipped and row.verdict() == "skipped"
        assert row.note == "B: exit 2: Error: No such command 'new-cmd'. (only A runs it)"
        a2 = _fake_side(tmp_path, "A2", 'echo "{\\"store\\": \\"$3\\"}"\n')
        a2.label = "B"
        row = cr.bench_case(case, [a, a2], {"store": "/s", "out": str(work / "out")}, opts, spawner, work)
        assert not row.skipped and len(row.cpu_a) == len(row.cpu_b) == 2
        assert row.output == "stdout same"
        # a summary whose timings change from run to run: blanked before the digest
        timed = 'echo "{\\"messages\\": 5, \\"seconds\\": 0.$(date +%N)}"\n'
        t1, t2 = _fake_side(tmp_path, "T1", timed), _fake_side(tmp_path, "T2", timed)
        t2.label = "B"
        t1.label = "A"
        row = cr.bench_case(case, [t1, t2], {"store": "/s", "out": str(work / "out")}, opts, spawner, work)
        assert row.output == "stdout same"
        other = _fake_side(tmp_path, "O", timed.replace("5", "6"))
        other.label = "B"
        row = cr.bench_case(case, [t1, other], {"store": "/s", "out": str(work / "out")}, opts, spawner, work)
        assert row.output == "stdout DIFFERS"
    finally:
        spawner.close()


def test_options_a_side_lacks_are_dropped_for_that_side_alone(tmp_path):
    """``if_accepted`` (``--jobs 1``): kept by the side whose command has it, dropped (not a
    skip) by the side that answers "no such option"; each side's argv is what it then runs."""
    log = tmp_path / "argv.log"
    a = _fake_side(
        tmp_path,
        "A",
        f'case "$*" in *--jobs*) echo "Error: No such option: --jobs" >&2; exit 2;; esac\necho "A $*" >> {log}\n',
    )
    b = _fake_side(tmp_path, "B", f'echo "B $*" >> {log}\n')
    b.label = "B"
    opts = argparse.Namespace(rounds=1, timeout=60)
    case = cr.Case("verify, one process", ("verify", "--store", "{store}"), if_accepted=("--jobs", "1"))
    work = tmp_path / "work"
    work.mkdir()
    spawner = cr.Spawner()
    try:
        row = cr.bench_case(case, [a, b], {"store": "/s", "out": str(work / "out")}, opts, spawner, work)
    finally:
        spawner.close()
    assert not row.skipped and len(row.cpu_a) == len(row.cpu_b) == 1
    lines = log.read_text().splitlines()
    assert set(lines) == {"A verify --store /s", "B verify --store /s --jobs 1"}


def test_every_command_of_the_cli_has_a_case():
    from rmqstore_cli.app import COMMANDS

    benched = {c.argv[0] for c in cr.cases(1000)}
    assert {name for name, _, _ in COMMANDS} <= benched
    names = [c.name for c in cr.cases(1000)]
    assert len(names) == len(set(names))  # --only picks one case by its name


def test_a_commit_subjects_absolute_paths_stay_out_of_the_results():
    text = "every import rewritten (tools: /srv/x/regroup.py, not in the repo); files/ layout/ (a/b)"
    assert cr.ABSOLUTE_PATH.sub("<path>", text) == (
        "every import rewritten (tools: <path>, not in the repo); files/ layout/ (a/b)"
    )
