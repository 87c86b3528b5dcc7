"""Safety of generate, expire and the broker's lock (issues 16 and 22).

generate takes its target only from an explicit --store, writes only into a new or empty
directory unless --append, holds the broker's lock while writing and never writes through a
link or outside the store; expire never deletes outside the store's write roots; a ``lock``
that is not a regular file never means "no lock held"; nothing here hangs on a FIFO.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, tree_digest

pytestmark = pytest.mark.slow  # subprocesses, locks and tmpfs mounts

NOW = 2_000_000_000_000  # a fixed "now" (2033-05-18): every generated file is long expired


def rmq(*args, timeout: float = 60, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess with a timeout: a hang on a FIFO fails the test, not the run."""
    e = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=e,
        stdin=subprocess.DEVNULL,
    )


def digest(root: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file below ``root`` (links not followed) and its sha256, links as their target.
    ``skip``: names not opened (closing any descriptor of ``lock`` drops this process's
    POSIX lock on it)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
            p = Path(dirpath, n)
            rel = str(p.relative_to(root))
            if rel in skip:
                continue
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def one_error_line(r: subprocess.CompletedProcess | object) -> str:
    err = r.stderr if isinstance(r.stderr, str) else r.stderr.decode()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqstore: error: "), err
    assert "Traceback" not in err
    return lines[0]


def append(store: Path, *extra, messages: int = 20):
    return rmq("generate", "--store", store, "--append", "--messages", messages, *SMALL, *extra)


# ------------------------------------------------------------------ 1. generate's target (#16)
def test_generate_never_takes_its_target_from_the_environment(small_store, monkeypatch):
    before = tree_digest(small_store)
    monkeypatch.setenv("RMQSTORE_STORE", str(small_store))
    r = cli("generate", "--messages", "5")
    assert r.exit_code == 2 and "--store" in r.stderr
    assert tree_digest(small_store) == before


def test_generate_ignores_a_broker_conf_from_the_environment(tmp_path):
    """RMQSTORE_BROKER_CONF's storePathCommitLog must not choose where synthetic records go."""
    prod = tmp_path / "prod-commitlog"
    prod.mkdir()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathCommitLog={prod}\n")
    r = rmq("generate", "--store", tmp_path / "new", "--messages", "5", env={"RMQSTORE_BROKER_CONF": str(conf)})
    assert r.returncode == 0, r.stderr
    assert list(prod.iterdir()) == [] and (tmp_path / "new" / "commitlog").is_dir()


def test_generate_refuses_a_non_empty_directory_without_append(small_store, tmp_path):
    before = tree_digest(small_store)
    r = rmq("generate", "--store", small_store, "--messages", "5", *SMALL)
    assert r.returncode == 4
    line = one_error_line(r)
    assert "not empty" in line and "--append" in line and str(small_store) in line
    assert tree_digest(small_store) == before
    other = tmp_path / "home"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    r = rmq("generate", "--store", other, "--messages", "5")
    assert r.returncode == 4 and "--append" in one_error_line(r)
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_generate_into_an_empty_directory_needs_no_append(tmp_path):
    (tmp_path / "empty").mkdir()
    r = rmq("generate", "--store", tmp_path / "empty", "--messages", "30", *SMALL)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "empty" / "commitlog").is_dir() and "appended" not in r.stderr


def test_generate_append_says_how_many_were_added_to_how_many(small_store):
    before = sum(1 for x in cli("dump-commitlog", "--store", small_store, "--format", "jsonl").stdout.splitlines())
    r = append(small_store, "--format", "json", messages=25)
    assert r.returncode == 0, r.stderr
    n = json.loads(r.stdout)["messages"]
    assert f"rmqstore: appended {n} to a store of {before} records" in r.stderr.splitlines()
    after = sum(1 for x in cli("dump-commitlog", "--store", small_store, "--format", "jsonl").stdout.splitlines())
    assert after == before + n


@pytest.mark.parametrize("kind", ["file", "dangling-link"])
def test_generate_store_that_is_not_a_directory_is_one_line(tmp_path, kind):
    target = tmp_path / "f"
    if kind == "file":
        target.write_bytes(b"data")
    else:
        target.symlink_to(tmp_path / "nowhere")
    r = rmq("generate", "--store", target, "--messages", "5")
    assert r.returncode == 2
    assert "not a directory" in one_error_line(r)
    assert not (tmp_path / "nowhere").exists()
    if kind == "file":
        assert target.read_bytes() == b"data"


# ------------------------------------------------------------------ 2. the broker's lock (#22)
def test_a_second_generate_is_refused_while_the_first_writes(small_store, monkeypatch):
    """Two concurrent generates left 180 verify errors: the first holds the lock, the
    second is refused (exit 4) and changes no byte (DefaultMessageStore#start tryLock)."""
    from rmqstore_cli.store.write.writer import StoreWriter

    seen = []
    real_append = StoreWriter.append_blocks  # the write path's entry, per record or a block at a time

    def spy(self, blocks):
        if not seen:  # mid-run: the first generate has written nothing yet, but holds the lock
            before = digest(small_store, skip=("lock",))
            seen.append(append(small_store, messages=5))
            seen.append(before == digest(small_store, skip=("lock",)))
        return real_append(self, blocks)

    monkeypatch.setattr(StoreWriter, "append_blocks", spy)
    r = cli("generate", "--store", small_store, "--append", "--messages", "50", *SMALL)
    assert r.exit_code == 0, r.stderr
    second, unchanged = seen
    assert second.returncode == 4 and "lock" in one_error_line(second)
    assert unchanged
    from rmqstore_cli.store.files.lock import lock_holder

    assert lock_holder(small_store) is None  # released at the end
    assert cli("verify", "--store", small_store, "--format", "json").exit_code == 0


@pytest.mark.parametrize("cmd", ["generate", "expire", "rebuild-index"])
@pytest.mark.parametrize("kind", ["dangling-link", "link-to-file", "directory", "fifo"])
def test_a_lock_that_is_not_a_regular_file_is_refused(small_store, tmp_path, cmd, kind):
    lock = small_store / "lock"
    lock.unlink()
    outside = tmp_path / "outside-lock"
    if kind == "dangling-link":
        lock.symlink_to(outside)
    elif kind == "link-to-file":
        outside.write_bytes(b"theirs")
        lock.symlink_to(outside)
    elif kind == "directory":
        lock.mkdir()
    else:
        os.mkfifo(lock)
    before = digest(small_store)
    if cmd == "generate":
        r = append(small_store)
    elif cmd == "expire":
        r = rmq("expire", "--store", small_store, *SMALL, "--now", NOW, "--reserved-hours", "0")
    else:  # StoreLock is shared: the same rules for rebuild-index --in-place
        r = rmq("rebuild-index", "--store", small_store, "--in-place", *SMALL)
    assert r.returncode == 4
    assert "lock" in one_error_line(r)
    assert digest(small_store) == before
    if kind == "dangling-link":
        assert not outside.exists()  # the target of a dangling link is never created
    elif kind == "link-to-file":
        assert outside.read_bytes() == b"theirs"


def test_a_missing_lock_is_created_as_a_regular_file_and_held(small_store):
    (small_store / "lock").unlink()
    r = append(small_store)
    assert r.returncode == 0, r.stderr
    lock = small_store / "lock"
    assert lock.is_file() and not lock.is_symlink() and lock.read_bytes() == b"lock"
    (small_store / "lock").unlink()
    r = rmq("expire", "--store", small_store, *SMALL, "--now", NOW, "--reserved-hours", "0", "--max-files", "1")
    assert r.returncode == 0, r.stderr
    assert lock.is_file() and not lock.is_symlink()


# ------------------------------------------------------------------ 3. no writes through links (#22)
def _move_out(p: Path, outside: Path) -> Path:
    """Move ``p`` to ``outside`` and leave a symlink to it in its place."""
    outside.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(p), str(outside))
    p.symlink_to(outside, target_is_directory=outside.is_dir())
    return outside


def _plant(store: Path, what: str) -> Path:
    last_cq = sorted((store / "consumequeue").glob("*/*/*"))[-1]
    targets = {
        "commitlog-file": sorted((store / "commitlog").iterdir())[-1],
        "commitlog-dir": store / "commitlog",
        "consumequeue-dir": store / "consumequeue",
        "topic-dir": last_cq.parent.parent,
        "cq-file": last_cq,
        "index-dir": store / "index",
        "index-file": sorted((store / "index").iterdir())[-1],
        "config-dir": store / "config",
    }
    p = targets[what]
    return _move_out(p, store.parent / "outside" / what)


@pytest.mark.parametrize(
    "what",
    [
        "commitlog-file",
        "commitlog-dir",
        "consumequeue-dir",
        "topic-dir",
        "cq-file",
        "index-dir",
        "index-file",
        "config-dir",
    ],
)
def test_generate_never_appends_through_a_symlink_out_of_the_store(small_store, what):
    outside = _plant(small_store, what)
    out_before = digest(outside.parent)
    before = digest(small_store)
    r = append(small_store, messages=200)
    assert r.returncode == 4, r.stderr
    line = one_error_line(r)
    assert "outside the store" in line or "symbolic link" in line
    assert digest(outside.parent) == out_before
    assert digest(small_store) == before  # refused before the first byte


@pytest.mark.parametrize("name", ["checkpoint.tmp", "config/topics.json.tmp"])
def test_planted_temp_names_are_never_written_through(small_store, tmp_path, name):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (small_store / name).symlink_to(victim)
    r = append(small_store)
    assert r.returncode == 0, r.stderr
    assert victim.read_bytes() == b"precious"
    assert (small_store / "checkpoint").stat().st_size == 4096 and not (small_store / "checkpoint").is_symlink()
    json.loads((small_store / "config" / "topics.json").read_text())


def test_a_checkpoint_or_topics_json_link_is_replaced_not_followed(small_store, tmp_path):
    for name in ("checkpoint", "config/topics.json"):
        victim = tmp_path / name.replace("/", "_")
        shutil.copy(small_store / name, victim)
        (small_store / name).unlink()
        (small_store / name).symlink_to(victim)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    r = append(small_store)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert not (small_store / "checkpoint").is_symlink()


# ------------------------------------------------------------------ 4. crafted topics.json and index headers
def _topics(store: Path) -> dict:
    return json.loads((store / "config" / "topics.json").read_text())


def _craft_topics(store: Path, kind: str) -> None:
    path = store / "config" / "topics.json"
    t = sorted(_topics(store)["topicConfigTable"])[0]  # a topic the run writes to again
    if kind == "list":
        path.write_text("[1, 2]")
    elif kind == "table-list":
        path.write_text('{"topicConfigTable": [1]}')
    elif kind == "number-config":
        path.write_text(json.dumps({"topicConfigTable": {t: 5}}))
    elif kind == "string-queues":
        path.write_text(json.dumps({"topicConfigTable": {t: {"topicName": t, "readQueueNums": "4"}}}))
    elif kind == "nested":
        path.write_text("[" * 200_000 + "]" * 200_000)
    elif kind == "huge":
        path.unlink()
        with open(path, "wb") as fh:
            fh.truncate(300 << 20)  # sparse: costs no disk
    elif kind == "dev-zero":
        path.unlink()
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        path.unlink()
        os.mkfifo(path)


@pytest.mark.parametrize(
    "kind", ["list", "table-list", "number-config", "string-queues", "nested", "huge", "dev-zero", "fifo"]
)
def test_generate_on_a_crafted_topics_json_is_one_line_and_writes_nothing(small_store, kind):
    _craft_topics(small_store, kind)
    before = digest(small_store)
    r = append(small_store)
    assert r.returncode == 3, r.stderr
    assert "topics.json" in one_error_line(r)
    assert digest(small_store) == before


@pytest.mark.parametrize(
    "field,value", [(4, (1 << 31) - 1), (5, 399), (5, -5), (0, (1 << 63) - 1), (3, (1 << 63) - 1), (2, -(1 << 63))]
)
def test_generate_on_crafted_index_headers_never_tracebacks(small_store, field, value):
    import struct

    from rmqstore_cli.formats.index import HEADER_FORMAT

    p = sorted((small_store / "index").iterdir())[-1]
    with open(p, "r+b") as fh:
        h = list(struct.unpack(HEADER_FORMAT, fh.read(40)))
        h[field] = value
        fh.seek(0)
        fh.write(struct.pack(HEADER_FORMAT, *h))
    r = rmq("generate", "--store", small_store, "--append", "--messages", "50")  # sizes inferred, as a user would
    assert r.returncode in (0, 3), r.stderr
    if r.returncode:
        one_error_line(r)
    else:
        assert "Traceback" not in r.stderr


# ------------------------------------------------------------------ 5. expire: symlinked data directories
def _age(store: Path) -> None:
    for p in (store / "commitlog").iterdir():
        os.utime(p, (1, 1))


@pytest.mark.parametrize("what", ["commitlog-dir", "consumequeue-dir", "index-dir"])
def test_expire_refuses_a_data_directory_linked_out_of_the_store(small_store, what):
    _age(small_store)
    outside = _plant(small_store, what)
    out_before = digest(outside)
    before = digest(small_store)
    for dry in ([], ["--dry-run"]):
        r = rmq("expire", "--store", small_store, *SMALL, "--now", NOW, "--reserved-hours", "0", *dry)
        assert r.returncode == 4, r.stderr
        line = one_error_line(r)
        assert f"{what.split('-')[0]}/ is a symbolic link to {outside}" in line and "outside the store" in line
        if what == "commitlog-dir":
            assert "--broker-conf" in line and "storePathCommitLog" in line
    assert digest(outside) == out_before  # nothing outside the store was deleted
    assert digest(small_store) == before


def test_expire_follows_a_commitlog_elsewhere_that_broker_conf_names(small_store, tmp_path):
    """storePathCommitLog is the broker's own layout for a commit log on another disk: with
    --broker-conf saying so, it is a write root and expire deletes there."""
    _age(small_store)
    outside = _plant(small_store, "commitlog-dir")
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathCommitLog={outside}\n")
    n = len(list(outside.iterdir()))
    r = rmq(
        "expire",
        "--store",
        small_store,
        "--broker-conf",
        conf,
        *SMALL,
        "--now",
        NOW,
        "--reserved-hours",
        "0",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["deleted"]["commitlog"] == n - 1  # all but the newest
    assert len(list(outside.iterdir())) == 1


def test_expire_never_unlinks_outside_the_roots_even_if_the_plan_says_so(small_store, tmp_path):
    """The executor re-checks containment: a plan entry whose directory became a link out of
    the store between planning and deleting is refused, the file outside kept."""
    from rmqstore_cli.errors import RefusedError
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write import cleanup

    _age(small_store)
    cfg = StoreConfig.load(small_store, None)
    cfg.infer_sizes()
    plan = cleanup.plan_expiry(cfg, NOW, 0)
    assert plan.actions
    _move_out(small_store / "commitlog", tmp_path / "moved")
    out_before = digest(tmp_path / "moved")
    res = cleanup.execute_plan(plan)
    assert isinstance(res.error, RefusedError) and "outside the store" in str(res.error)
    assert res.deleted == [] and digest(tmp_path / "moved") == out_before


@pytest.mark.parametrize("where", ["checkpoint", "cq-kept", "cq-condemned", "index-kept"])
def test_expire_never_hangs_on_a_fifo(small_store, where):
    _age(small_store)
    queues = sorted(
        {p.parent for p in (small_store / "consumequeue").glob("*/*/*")}, key=lambda q: -len(list(q.iterdir()))
    )
    files = sorted(queues[0].iterdir())
    p = {
        "checkpoint": small_store / "checkpoint",
        "cq-kept": files[-1],
        "cq-condemned": files[0],
        "index-kept": sorted((small_store / "index").iterdir())[-1],
    }[where]
    p.unlink()
    os.mkfifo(p)
    r = rmq("expire", "--store", small_store, *SMALL, "--now", NOW, "--reserved-hours", "0", timeout=60)
    assert r.returncode in (0, 3), r.stderr
    if r.returncode:
        one_error_line(r)
    assert p.exists() and not p.is_file()  # the FIFO itself is never deleted


def test_verify_does_not_hang_on_a_fifo_lock(small_store):
    """lock_holder opens ``lock`` non-blocking: a FIFO there blocked even read-only verify."""
    (small_store / "lock").unlink()
    os.mkfifo(small_store / "lock")
    r = rmq("verify", "--store", small_store, "--format", "json", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("where", ["checkpoint", "commitlog-file", "cq-file", "index-file"])
def test_generate_never_hangs_on_a_fifo_and_writes_nothing(small_store, where):
    p = {
        "checkpoint": small_store / "checkpoint",
        "commitlog-file": sorted((small_store / "commitlog").iterdir())[-1],
        "cq-file": sorted((small_store / "consumequeue").glob("*/*/*"))[-1],
        "index-file": sorted((small_store / "index").iterdir())[-1],
    }[where]
    p.unlink()
    os.mkfifo(p)
    before = digest(small_store)
    r = append(small_store)
    assert r.returncode in (3, 4), r.stderr
    assert "FIFO" in one_error_line(r)
    assert digest(small_store) == before


def test_generate_at_the_end_of_a_long_offset_is_one_line(small_store):
    """A commit-log file named 09223372036854775807 (Long.MAX_VALUE) leaves no room for a
    record: generate --append said ``struct.error: int too large to convert`` (plantfuzz)."""
    files = sorted((small_store / "commitlog").iterdir())
    files[-1].rename(files[-1].with_name(f"{(1 << 63) - 1:020d}"))
    before = digest(small_store, skip=("lock",))
    line = one_error_line(append(small_store))
    assert "Long.MAX_VALUE" in line and f"{(1 << 63) - 1:020d}" in line
    assert digest(small_store, skip=("lock",)) == before
