"""Issue 16, "Honest answers": verify says what is missing and how to repair it, the end of a
torn log is where its data ends, epoch seconds are not read as milliseconds, index-lookup
finds topics without consume queues, and every command answers the same situation the same
way (usage errors, negative answers, broken pipes, unknown topics)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # every command in a subprocess


def test_pytest_says_why_tests_were_skipped(tmp_path):
    """pyproject's addopts carry -rs: whoever runs the suite without an optional dependency is
    told why a test skipped, not just how many."""
    (tmp_path / "test_skip.py").write_text(
        "import pytest\n\ndef test_x():\n    pytest.skip('needs the spark extra')\n", encoding="utf-8"
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ROOT / "pyproject.toml"),
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(tmp_path),
            "--basetemp",  # its own: not the cleanup of the suite's old numbered temp dirs
            str(tmp_path / "basetemp"),
            str(tmp_path / "test_skip.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED" in r.stdout and "needs the spark extra" in r.stdout, r.stdout


# ---------------------------------------------------------------- verify: what is missing, and its repair


def _verify(store, *extra):
    import json

    from tests.helpers import SMALL, cli

    r = cli("verify", "--store", store, *SMALL, "--format", "jsonl", "--max-findings", "1000", *extra)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert lines and "summary" in lines[-1], r.stdout + r.stderr
    return r, lines[:-1], lines[-1]["summary"]


def _walk_end(store: Path) -> int:
    """The end of the last whole record, by the plain struct walk of
    docs/format/commitlog.md#reading-a-commit-log-file."""
    import struct

    end = 0
    for p in sorted((store / "commitlog").iterdir()):
        data = p.read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic not in (0xDAA320A7, 0xDAA320AB) or pos + total > len(data):
                break
            pos += total
            end = int(p.name) + pos
    return end


def test_verify_index_gone_is_an_error_with_its_repair(small_store):
    """messageIndexEnable=true (the default), index/ gone: not "consistent" but index.missing,
    whose detail ends with the command that rebuilds it."""
    import shutil

    from tests.helpers import SMALL, cli

    shutil.rmtree(small_store / "index")
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 1
    miss = [f for f in findings if f["check"] == "index.missing"]
    assert len(miss) == 1 and miss[0]["severity"] == "error" and miss[0]["file"] == "index"
    sizes = " ".join(SMALL)  # the sizes verify was given: the repair must not fall back to the defaults
    assert miss[0]["detail"].endswith(f"rebuild-index --store {small_store} {sizes} --in-place --only index")
    assert summary["findings"] == {"index.missing": 1}
    t = cli("verify", "--store", small_store, *SMALL)
    assert t.exit_code == 1 and "consistent" not in t.stdout and "index.missing" in t.stdout


def test_verify_index_without_entries_is_an_error(small_store):
    """index/ still there but emptied (its files deleted): the same finding."""
    for p in (small_store / "index").iterdir():
        p.unlink()
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1 and [f["check"] for f in findings] == ["index.missing"]
    assert "index/ holds no index file" in findings[0]["detail"]


def test_verify_no_index_is_fine_when_the_broker_builds_none(small_store, tmp_path):
    """messageIndexEnable=false: the broker never writes index/, so its absence is no finding."""
    import shutil

    shutil.rmtree(small_store / "index")
    conf = tmp_path / "broker.conf"
    conf.write_text("messageIndexEnable=false\n", encoding="utf-8")
    r, findings, _ = _verify(small_store, "--broker-conf", conf)
    assert r.exit_code == 0 and findings == []


def test_cq_missing_unit_ends_with_its_repair(small_store):
    import shutil

    from tests.helpers import SMALL

    topic = sorted(p.name for p in (small_store / "consumequeue").iterdir())[0]
    shutil.rmtree(small_store / "consumequeue" / topic / "0")
    r, findings, _ = _verify(small_store)
    miss = [f for f in findings if f["check"] == "cq.missing-unit"]
    assert r.exit_code == 1 and miss
    for f in miss:
        assert f["detail"].endswith(
            f"repair: rmqstore rebuild-index --store {small_store} {' '.join(SMALL)} "
            f"--in-place --only cq --topic {f['topic']}"
        )


def test_verify_torn_last_file_ends_at_its_last_valid_record(small_store):
    """A last commit-log file cut inside a record: commitlog_end_offset is the end of the last
    whole record (CommitLog#recoverNormally's processOffset), not 0; units beyond it say so."""
    import os

    last = sorted((small_store / "commitlog").iterdir())[-1]
    cut = _walk_end(small_store) - int(last.name) - 20  # inside the last record
    os.truncate(last, cut)
    end = _walk_end(small_store)
    assert int(last.name) < end < int(last.name) + cut
    r, findings, summary = _verify(small_store)
    assert summary["commitlog_end_offset"] == end
    assert summary["messages"] > 0
    assert any(f["check"] == "commitlog.truncated" for f in findings)
    targets = [f for f in findings if f["check"] == "cq.unit-target"]
    assert targets and all(f"beyond the end of the commit log's data ({end})" in f["detail"] for f in targets)


# ---------------------------------------------------------------- times: seconds are seconds


def test_epoch_numbers_are_read_by_their_digits():
    """10 digits (date +%s) are seconds, 13 or more milliseconds, 0 the epoch; anything else
    is refused with the rule, never read as 1970 without a word."""
    import pytest

    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.times import parse_time

    assert parse_time("1795317680", "--begin") == 1795317680000
    assert parse_time("1795317680123", "--begin") == 1795317680123
    assert parse_time("9223372036854775807", "--end") == (1 << 63) - 1
    assert parse_time("0", "--begin") == 0
    for bad in ("179531768", "17953176801", "179531768012", "42"):
        with pytest.raises(UsageError, match="10 digits") as e:
            parse_time(bad, "--begin")
        assert "--begin" in str(e.value) and "13" in str(e.value)
    with pytest.raises(UsageError, match="Long.MAX_VALUE"):
        parse_time("99999999999999999999", "--end")


def test_begin_in_epoch_seconds_selects_what_the_same_time_in_ms_selects(small_store_master):
    """dump-commitlog and index-lookup: --begin 1767225600 (seconds) is 2026-01-01, not 1970."""
    import json

    from tests.helpers import SMALL, cli

    recs = [
        json.loads(x)
        for x in cli(
            "dump-commitlog", "--store", small_store_master, *SMALL[:2], "--format", "jsonl"
        ).stdout.splitlines()
    ]
    mid = recs[len(recs) // 2]["store_timestamp"]
    sec = str(mid // 1000 + 1)  # 10 digits
    by_s = cli("dump-commitlog", "--store", small_store_master, *SMALL[:2], "--begin", sec, "--format", "jsonl")
    by_ms = cli(
        "dump-commitlog", "--store", small_store_master, *SMALL[:2], "--begin", sec + "000", "--format", "jsonl"
    )
    assert by_s.exit_code == 0 and by_s.stdout == by_ms.stdout
    assert 0 < len(by_s.stdout.splitlines()) < len(recs)
    last_seen: dict = {}
    for x in recs:
        for k in x["keys"]:
            last_seen[(x["topic"], k)] = max(last_seen.get((x["topic"], k), 0), x["store_timestamp"])
    key = next(r for r in recs if r["keys"] and last_seen[(r["topic"], r["keys"][0])] < mid)
    r = cli(
        "index-lookup",
        key["keys"][0],
        "--topic",
        key["topic"],
        "--store",
        small_store_master,
        "--begin",
        sec,
        "--format",
        "jsonl",
    )
    assert r.exit_code == 1  # the key's message lies before the window: nothing, not everything since 1970
    r = cli("dump-commitlog", "--store", small_store_master, *SMALL[:2], "--begin", "179531768")
    assert r.exit_code == 2 and r.stderr.startswith("rmqstore: error: --begin: '179531768'")


# ---------------------------------------------------------------- index-lookup without consume queues


def test_index_lookup_takes_topics_from_the_commit_log_when_nothing_else_names_them(small_store):
    """consumequeue/ and topics.json gone: exactly when index-lookup is needed. The topics come
    from the commit log's records (said on stderr), and the hits are those of the whole store."""
    import json
    import shutil

    from tests.helpers import SMALL, cli

    recs = [
        json.loads(x)
        for x in cli("dump-commitlog", "--store", small_store, *SMALL[:2], "--format", "jsonl").stdout.splitlines()
    ]
    key = next(r["keys"][0] for r in recs if r["keys"])
    want = cli("index-lookup", key, "--store", small_store, "--format", "jsonl")
    assert want.exit_code == 0 and want.stdout
    shutil.rmtree(small_store / "consumequeue")
    shutil.rmtree(small_store / "config")
    got = cli("index-lookup", key, "--store", small_store, "--format", "jsonl")
    assert got.exit_code == 0, got.stderr
    assert got.stdout == want.stdout
    assert "topic(s) named in the commit log" in got.stderr
    uniq = next(r["uniq_key"] for r in recs if r["uniq_key"])
    r = cli("decode-msgid", uniq, "--store", small_store, "--format", "jsonl", "--now", "2026-01-02")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["kind"] == "uniq_key" and "named in the commit log" in r.stderr


# ---------------------------------------------------------------- one rule for the same situation


def _lines(r) -> list[str]:
    err = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
    return [ln for ln in err.splitlines() if not ln.startswith("rmqstore: note: ")]


def test_a_reversed_window_is_a_usage_error_everywhere(small_store_master):
    from tests.helpers import run

    s = small_store_master
    for args in (
        ("dump-commitlog", "--store", s, "--begin", "2026-01-01T01:00", "--end", "2026-01-01T00:00"),
        ("index-lookup", "order-1", "--store", s, "--begin", "2026-01-01T01:00", "--end", "2026-01-01T00:00"),
        ("dump-commitlog", "--store", s, "--from-offset", "200", "--to-offset", "100"),
    ):
        r = run(*args)
        assert r.returncode == 2 and r.stdout == b"", args
        assert _lines(r) and _lines(r)[0].startswith("rmqstore: error: --") and "lies after --" in _lines(r)[0], args


def test_an_offset_past_the_end_answers_as_the_exact_end(small_store_master):
    """dump-commitlog --from-offset and dump-cq --from: the end of the data, a byte past it,
    past the last file: one answer (and with a filter, one negative answer)."""
    import json

    from tests.helpers import SMALL, cli

    s = small_store_master
    end = _walk_end(s)
    last = sorted((s / "commitlog").iterdir())[-1]
    answers = set()
    for off in (end, end + 1, int(last.name) + 65536 + 7, 10**12):
        for extra in ((), ("--topic", "OrderTopic")):
            r = cli("dump-commitlog", "--store", s, *SMALL[:2], "--from-offset", off, "--format", "jsonl", *extra)
            answers.add(
                (extra, r.exit_code, r.stdout, tuple(ln.replace(str(off), "N") for ln in r.stderr.splitlines()))
            )
    assert {a[:2] for a in answers} == {((), 0), (("--topic", "OrderTopic"), 1)}
    assert len(answers) == 2, answers  # the same words, whatever the offset
    summary = json.loads(cli("dump-cq", "--summary", "OrderTopic", "0", "--store", s, "--format", "jsonl").stdout)
    got = {
        (r.exit_code, r.stdout, r.stderr)
        for r in (
            cli("dump-cq", "OrderTopic", "0", "--store", s, "--from-offset", n, "--format", "jsonl")
            for n in (summary["max_offset"], summary["max_offset"] + 1, 10**9)
        )
    }
    assert len(got) == 1 and next(iter(got))[0] == 1


def test_an_offset_inside_a_blank_record_names_the_starts_around_it(small_store_master):
    """A --from-offset inside a full file's BLANK end record: a usage error naming the nearest
    starts (it was a traceback: the BLANK record has no .offset)."""
    from tests.helpers import SMALL, cli

    first = sorted((small_store_master / "commitlog").iterdir())[0]
    r = cli("dump-commitlog", "--store", small_store_master, *SMALL[:2], "--from-offset", int(first.name) + 65535)
    assert r.exit_code == 2 and r.stderr.startswith("rmqstore: error: offset ") and "nearest starts" in r.stderr


def test_a_closed_pipe_exits_0_in_every_format_and_command(small_store_master, tmp_path):
    """`… | head -1`: the reader goes away; every command stops quietly with 0, in table, jsonl
    and json alike, never the negative answer's 1 (a real pipe, closed before any write) —
    except verify, whose exit status is its answer: it stops printing and still says 1 for a
    store with errors, as a cron script under `set -o pipefail` needs (issue 31)."""
    import shutil
    import subprocess

    damaged = tmp_path / "damaged"  # verify would exit 1: errors found
    shutil.copytree(small_store_master, damaged)
    shutil.rmtree(damaged / "index")
    s = small_store_master
    commands = [
        ("dump-commitlog", "--store", s),
        ("dump-cq", "OrderTopic", "0", "--store", s),
        ("dump-cq", "--summary", "--store", s),
        ("index-lookup", "order-1", "--store", s, "--limit", "1000000"),
        ("decode-msgid", "0A00000500002A9F0000000040001000"),
        ("verify", "--store", damaged),
        ("verify", "--list-checks"),
        ("expire", "--store", s, "--dry-run", "--reserved-hours", "0", "--now", "2030-01-01T00:00"),
    ]
    for args in commands:
        for fmt in ("table", "jsonl", "json"):
            p = subprocess.Popen(
                [sys.executable, "-m", "rmqstore_cli", *map(str, args), "--format", fmt],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            p.stdout.close()
            err = p.stderr.read()
            assert p.wait(timeout=300) == (1 if args[:3] == ("verify", "--store", damaged) else 0), (args, fmt, err)
            assert b"Traceback" not in err and b"error" not in err, (args, fmt, err)
    for args in (("--help",), ("dump-cq", "--help"), ("--version",)):
        p = subprocess.Popen(
            [sys.executable, "-m", "rmqstore_cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        p.stdout.close()
        assert p.wait(timeout=60) == 0 and p.stderr.read() == b"", args


def test_click_usage_errors_are_one_documented_line():
    """Unknown option or command, bad choice or range, missing argument: exit 2 and one line
    `rmqstore: error: …`, not click's usage block; --help is what it was."""
    from tests.helpers import run

    for args, what in (
        (("dump-commitlog", "--bogus"), "no such option: --bogus"),
        (("dump-commitlog", "--format", "xml"), "'xml' is not one of"),
        (("dump-commitlog", "--limit", "-3"), "--limit"),
        (("index-lookup",), "missing argument"),
        (("no-such-command",), "no such command"),
    ):
        r = run(*args)
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 2 and r.stdout == b"", args
        assert len(lines) == 1 and lines[0].startswith("rmqstore: error: ") and what in lines[0], (args, lines)
        assert "--help" in lines[0]
    for args in (("--help",), ("dump-cq", "--help"), ("verify", "-h")):
        r = run(*args)
        plain = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from rmqstore_cli.app import app; app(sys.argv[1:], prog_name='rmqstore')",
                *args,
            ],
            capture_output=True,
            timeout=60,
        )
        assert r.returncode == 0 and r.stdout == plain.stdout and b"Usage: rmqstore" in r.stdout, args
    r = run()  # no command: the help, as before
    assert r.returncode == 2 and b"Usage: rmqstore" in r.stdout + r.stderr


def test_not_found_is_a_plain_negative_answer(small_store_master):
    """Exit 1 with one plain line (no `error:`) for every command's nothing-found."""
    from tests.helpers import run

    s = small_store_master
    for args in (
        ("dump-commitlog", "--store", s, "--key", "no-such-key"),
        ("dump-cq", "OrderTopic", "0", "--store", s, "--from-offset", "100000"),
        ("dump-cq", "OrderTopic", "99", "--store", s),
        ("index-lookup", "no-such-key", "--store", s),
        ("decode-msgid", "0A00000500002A9F00000000FFFF1000", "--store", s),
    ):
        r = run(*args)
        lines = _lines(r)
        assert r.returncode == 1, (args, lines)
        assert lines and lines[-1].startswith("rmqstore: ") and not any("error:" in ln for ln in lines), (args, lines)


def test_an_unknown_topic_says_so_and_suggests(small_store_master):
    from tests.helpers import run

    s = small_store_master
    for args in (
        ("dump-commitlog", "--store", s, "--topic", "PaymentTopc"),
        ("dump-cq", "PaymentTopc", "0", "--store", s),
        ("dump-cq", "--summary", "PaymentTopc", "--store", s),
        ("index-lookup", "order-1", "--topic", "PaymentTopc", "--store", s),
    ):
        r = run(*args)
        assert r.returncode == 1, args
        assert _lines(r) == ["rmqstore: no topic 'PaymentTopc' in the store; did you mean PaymentTopic?"], args


def test_a_key_with_spaces_is_explained(small_store_master):
    """KEYS "a b" is indexed as a and b (IndexService#buildIndex splits at spaces): looking up
    "a b" can never find it, and the answer says why."""
    import json

    from tests.helpers import SMALL, cli, run

    recs = [
        json.loads(x)
        for x in cli(
            "dump-commitlog", "--store", small_store_master, *SMALL[:2], "--format", "jsonl"
        ).stdout.splitlines()
    ]
    m = next(r for r in recs if len(r["keys"]) >= 1)
    r = run("index-lookup", " ".join(m["keys"] + ["x"]), "--store", small_store_master)
    assert r.returncode == 1 and "split on spaces" in r.stderr.decode() and b"error:" not in r.stderr
    assert run("index-lookup", m["keys"][0], "--store", small_store_master).returncode == 0


def test_the_repair_commands_in_findings_repair_the_store(small_store):
    """Run what index.missing and cq.missing-unit say, as written: verify then finds nothing."""
    import shlex
    import shutil

    from tests.helpers import cli

    shutil.rmtree(small_store / "index")
    topic = sorted(p.name for p in (small_store / "consumequeue").iterdir())[0]
    shutil.rmtree(small_store / "consumequeue" / topic)
    _, findings, _ = _verify(small_store)
    commands = {f["detail"].split("; repair: ", 1)[1] for f in findings}
    assert {f["check"] for f in findings} == {"index.missing", "cq.missing-unit"} and len(commands) == 2
    for c in sorted(commands):
        argv = shlex.split(c)
        assert argv[0] == "rmqstore"
        r = cli(*argv[1:], "--no-backup")
        assert r.exit_code == 0, (c, r.stderr)
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 0 and findings == []
