"""Which store a command reads (docs/conventions.md, "Which store"): --store is a path and
never a pattern; fleets are named with --store-glob on purpose; without --store, the
broker.conf's storePathRootDir (options before environment variables before ~/store),
said on stderr; a commit log elsewhere (storePathCommitLog) read by every command."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import SMALL, fast_first, generate, run

#: No store or broker.conf from the test's own environment, and a HOME of the test's own.
CLEAN = {"RMQSTORE_STORE": "", "RMQSTORE_BROKER_CONF": ""}


@pytest.fixture(scope="module")
def masters(tmp_path_factory) -> dict[str, Path]:
    """Two small stores of different sizes (so a summary tells which one was read)."""
    base = tmp_path_factory.mktemp("which")
    return {"a": generate(base / "a", messages=300), "b": generate(base / "b", messages=200, seed=9)}


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def messages(r) -> int:
    assert r.returncode == 0, r.stderr.decode()[-600:]
    return json.loads(r.stdout)["summary"]["messages"]


def env(tmp_path: Path, **extra) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return dict(CLEAN, HOME=str(home), **extra)


def conf(path: Path, **props) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


# ------------------------------------------------------------------ --store is a path


@pytest.mark.parametrize("name", fast_first(["s[1]", "s?", "s*"], ["s[1]", "s?", "s*"]))
def test_store_with_pattern_characters_is_read_as_the_path_it_is(masters, tmp_path, name):
    """`--store 's[1]'` was a glob: it read the store s1 beside it (or, without one, was refused
    as 'matches no directory'); `s?` and `s*` matched s1 too."""
    odd = copy(masters["a"], tmp_path / name)
    copy(masters["b"], tmp_path / "s1")  # what the pattern would match
    want = messages(run("verify", "--store", masters["a"], "--format", "json"))
    r = run("verify", "--store", odd, "--format", "json")
    assert messages(r) == want and json.loads(r.stdout)["summary"]["store"] == str(odd)
    out = tmp_path / "rebuilt"
    r = run("rebuild-index", "--store", odd, "--output", out, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["messages"] == want, r.stderr.decode()
    pytest.importorskip("pyarrow")
    r = run("export", "--store", odd, "--output", tmp_path / "pq", "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["rows"] == want


@pytest.mark.slow
def test_store_glob_names_a_fleet_on_purpose(masters, tmp_path):
    fleet = tmp_path / "fleet"
    for n in ("b2", "b1", "c"):
        copy(masters["b"], fleet / n)
    a = copy(masters["a"], tmp_path / "a")
    r = run("verify", "--store", a, "--store-glob", f"{fleet}/b*", "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    assert [s["store"] for s in json.loads(r.stdout)["summary"]["stores"]] == [
        str(a),
        str(fleet / "b1"),
        str(fleet / "b2"),
    ]  # --store first, then the matches sorted
    # a fleet pattern keeps the fleet's shape when it matches one store (a cron script's jq path)
    r = run("verify", "--store-glob", f"{fleet}/c", "--format", "jsonl")
    assert r.returncode == 0, r.stderr.decode()
    last = json.loads(r.stdout.splitlines()[-1])
    assert [s["store"] for s in last["summary"]["stores"]] == [str(fleet / "c")]
    r = run("verify", "--store-glob", f"{fleet}/x*")
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1
    assert f"--store-glob '{fleet}/x*' matches no directory" in r.stderr.decode()
    r = run("rebuild-index", "--store", fleet / "b1", "--store-glob", f"{fleet}/b?", "--output", tmp_path / "o")
    assert r.returncode == 2 and "named twice" in r.stderr.decode()
    pytest.importorskip("pyarrow")
    r = run("export", "--store-glob", f"{fleet}/[bc]*", "--output", tmp_path / "pq", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["stores"] == 3, r.stderr.decode()


# ------------------------------------------------------------------ the store from broker.conf

#: Every command that reads a store, with arguments and its exit code on the small store.
COMMANDS = {
    "dump-commitlog": (["--limit", "1"], 0),
    "dump-cq": (["--summary"], 0),
    "dump-timer": ([], 1),  # no timer files: a negative answer, after the store was read
    "search-offset": (["--topic", "PaymentTopic", "--time", "2020-01-01"], 0),
    "consumer-progress": ([], None),
    "stats": ([], 0),
    "index-lookup": (["order-1"], 0),
    "decode-msgid": (["0A00000500002A9F0000000000000000"], 0),
    "expire": (["--dry-run"], 0),
    "verify": ([], 0),
    "rebuild-index": (["--in-place", "--dry-run"], 0),
    "export": (["--output", "{tmp}/pq"], 0),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reads_the_store_broker_conf_names(masters, tmp_path, command):
    """`rmqstore expire --broker-conf /opt/rocketmq/conf/broker.conf --quiet` looked in ~/store
    and exited 3: storePathRootDir was ignored. One stderr line says where the store came from."""
    if command == "export":
        pytest.importorskip("pyarrow")
    store = copy(masters["a"], tmp_path / "data" / "store")
    c = conf(tmp_path / "broker.conf", storePathRootDir=store, brokerClusterName="DefaultCluster")
    args, code = COMMANDS[command]
    r = run(command, *[a.format(tmp=tmp_path) for a in args], "--broker-conf", c, env=env(tmp_path))
    err = r.stderr.decode()
    assert f"rmqstore: store {store} (storePathRootDir in {c})\n" in err, err
    assert r.returncode == code if code is not None else r.returncode in (0, 1), err
    assert not (tmp_path / "home").exists() or list((tmp_path / "home").iterdir()) == []


def test_precedence_options_then_environment_then_home(masters, tmp_path):
    """--store; --broker-conf's storePathRootDir; RMQSTORE_STORE; RMQSTORE_BROKER_CONF's
    storePathRootDir; ~/store. Each but the first said on stderr."""
    s = {n: copy(masters["a"], tmp_path / n / "store") for n in "ABCD"}  # told apart by summary.store
    conf_b = conf(tmp_path / "b.conf", storePathRootDir=s["B"])
    conf_d = conf(tmp_path / "d.conf", storePathRootDir=s["D"])
    plain = conf(tmp_path / "plain.conf", fileReservedTime=48)
    home = tmp_path / "home"
    e = env(tmp_path, RMQSTORE_STORE=str(s["C"]), RMQSTORE_BROKER_CONF=str(conf_d))

    def picked(*args, environ=e):
        r = run("stats", *args, "--format", "json", env=environ)
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)["summary"]["store"], r.stderr.decode()

    assert picked("--store", s["A"], "--broker-conf", conf_b) == (str(s["A"]), "")
    assert picked("--broker-conf", conf_b) == (
        str(s["B"]),
        f"rmqstore: store {s['B']} (storePathRootDir in {conf_b})\n",
    )
    assert picked("--broker-conf", plain) == (str(s["C"]), f"rmqstore: store {s['C']} (RMQSTORE_STORE)\n")
    assert picked() == (str(s["C"]), f"rmqstore: store {s['C']} (RMQSTORE_STORE)\n")
    only_conf = dict(e, RMQSTORE_STORE="")
    assert picked(environ=only_conf) == (
        str(s["D"]),
        f"rmqstore: store {s['D']} (storePathRootDir in {conf_d}, from RMQSTORE_BROKER_CONF)\n",
    )
    copy(masters["a"], home / "store")
    got, err = picked(environ=env(tmp_path))
    assert got == str(home / "store") and err.startswith(f"rmqstore: store {home / 'store'} (the broker's default")


def test_expire_quiet_says_nothing_about_the_store(masters, tmp_path):
    store = copy(masters["a"], tmp_path / "store")
    c = conf(tmp_path / "broker.conf", storePathRootDir=store)
    r = run("expire", "--broker-conf", c, "--quiet", env=env(tmp_path))
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")


@pytest.mark.parametrize(
    "value", fast_first(["${user.home}/store", "~/store", "store", ""], ["${user.home}/store", "~/store", "store", ""])
)
def test_relative_store_path_root_dir_is_refused_not_guessed(masters, tmp_path, value):
    """The broker substitutes nothing (MixAll#properties2Object sets the trimmed value): a
    relative root is relative to the broker's working directory, which rmqstore cannot know."""
    c = conf(tmp_path / "broker.conf", storePathRootDir=value)
    r = run("verify", "--broker-conf", c, env=env(tmp_path))
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "storePathRootDir" in err and "--store" in err, err
    r = run("verify", "--store", masters["a"], "--broker-conf", c, "--format", "json", env=env(tmp_path))
    assert r.returncode == 0, r.stderr.decode()  # with --store the conf's root is not used
    c = conf(tmp_path / "cl.conf", storePathCommitLog="commitlog")
    r = run("verify", "--store", masters["a"], "--broker-conf", c, env=env(tmp_path))
    assert r.returncode == 2 and "storePathCommitLog" in r.stderr.decode()


# ------------------------------------------------------------------ a commit log elsewhere


@pytest.fixture
def split_store(masters, tmp_path):
    """The store with its commit log moved to another directory, and the broker.conf saying so
    (storePathRootDir and storePathCommitLog), beside a plain copy to compare with."""
    plain = copy(masters["a"], tmp_path / "plain")
    root = copy(masters["a"], tmp_path / "data" / "store")
    cl = tmp_path / "disk2" / "commitlog"
    cl.parent.mkdir()
    shutil.move(root / "commitlog", cl)
    c = conf(tmp_path / "broker.conf", storePathRootDir=root, storePathCommitLog=cl)
    return plain, root, cl, c


@pytest.mark.slow
def test_a_commit_log_elsewhere_is_read_by_every_command(split_store, tmp_path):
    plain, root, cl, c = split_store
    e = env(tmp_path)
    n = messages(run("verify", "--store", plain, "--format", "json"))

    def both(*args):
        a = run(*args, "--store", plain, env=e)
        b = run(*args, "--broker-conf", c, env=e)
        assert a.returncode == b.returncode == 0, b.stderr.decode()
        assert (
            f"rmqstore: store {root} (storePathRootDir in {c}); commit log {cl} (storePathCommitLog in {c})"
            in b.stderr.decode()
        )
        return a.stdout, b.stdout

    a, b = both("dump-commitlog", "--format", "jsonl")
    assert a == b and a.count(b"\n") == n
    a, b = both("index-lookup", "order-1", "--format", "json")
    assert a == b
    a, b = both("search-offset", "--topic", "PaymentTopic", "--time", "2020-01-01", "--format", "json")
    assert a == b
    a, b = (json.loads(x)["summary"] for x in both("verify", "--format", "json"))
    assert (a["messages"], a["errors"], a["commitlog_end_offset"]) == (
        b["messages"],
        b["errors"],
        b["commitlog_end_offset"],
    )
    a, b = (json.loads(x)["summary"] for x in both("stats", "--format", "json"))
    assert a["messages"] == b["messages"]
    a, b = (json.loads(x) for x in both("rebuild-index", "--in-place", "--dry-run", "--format", "json"))
    assert a["messages"] == b["messages"] == n
    pytest.importorskip("pyarrow")
    r = run("export", "--broker-conf", c, "--output", tmp_path / "pq", "--format", "json", env=e)
    assert r.returncode == 0 and json.loads(r.stdout)["rows"] == n, r.stderr.decode()


def test_rebuild_and_expire_with_a_commit_log_elsewhere(split_store, tmp_path):
    plain, root, cl, c = split_store
    e = env(tmp_path)
    out_a, out_b = tmp_path / "out-a", tmp_path / "out-b"
    assert run("rebuild-index", "--store", plain, "--output", out_a, env=e).returncode == 0
    r = run("rebuild-index", "--broker-conf", c, "--output", out_b, env=e)
    assert r.returncode == 0, r.stderr.decode()
    from tests.helpers import tree_digest

    assert {k: v[0] for k, v in tree_digest(out_a / "consumequeue").items()} == {
        k: v[0] for k, v in tree_digest(out_b / "consumequeue").items()
    }
    old = time.time() - 30 * 86400
    for f in cl.iterdir():
        os.utime(f, (old, old))
    n = len(list(cl.iterdir()))
    r = run("expire", "--broker-conf", c, "--reserved-hours", "72", "--format", "json", env=e)
    assert r.returncode == 0, r.stderr.decode()
    assert json.loads(r.stdout)["deleted"]["commitlog"] == n - 1 and len(list(cl.iterdir())) == 1


@pytest.mark.slow
def test_spark_engine_reads_a_commit_log_elsewhere(split_store, tmp_path):
    pytest.importorskip("pyspark")
    plain, root, cl, c = split_store
    spark = ("--engine", "spark", "--spark-master", "local[2]", "--format", "json")
    a = messages(run("verify", "--store", plain, "--format", "json"))
    b = messages(run("verify", "--broker-conf", c, *spark, env=env(tmp_path)))
    assert a == b > 0


def test_store_over_the_conf_root_moves_a_commit_log_inside_it(masters, tmp_path):
    """A copy read with its broker's conf (storePathRootDir=/data/store, storePathCommitLog=
    /data/store/commitlog spelt out): the commit log is the copy's, never the original's."""
    original = copy(masters["b"], tmp_path / "data" / "store")
    snap = copy(masters["a"], tmp_path / "snap" / "store")
    c = conf(tmp_path / "broker.conf", storePathRootDir=original, storePathCommitLog=original / "commitlog")
    n = messages(run("verify", "--store", snap, "--format", "json"))
    assert n != messages(run("verify", "--store", original, "--format", "json"))
    r = run("dump-commitlog", "--store", snap, "--broker-conf", c, "--format", "jsonl", env=env(tmp_path))
    assert r.returncode == 0 and r.stdout.count(b"\n") == n and b"commit log" not in r.stderr, r.stderr.decode()
    r = run(
        "rebuild-index",
        "--store",
        snap,
        "--broker-conf",
        c,
        "--output",
        tmp_path / "o",
        "--format",
        "json",
        *SMALL[2:],
        env=env(tmp_path),
    )
    assert r.returncode == 0 and json.loads(r.stdout)["messages"] == n, r.stderr.decode()
