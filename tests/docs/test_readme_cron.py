"""The crontab lines of docs/cron.md, run exactly as printed (`rmqstore expire
--broker-conf /opt/rocketmq/conf/broker.conf --quiet` must read the store the broker.conf
names, not ~/store).

Each line's command text runs verbatim under /bin/sh, with cron's bare environment, in a
private mount namespace where a temporary directory holding a broker.conf (naming the store
root) and a generated store is bind-mounted at /opt/rocketmq. Nothing outside the
namespace sees the mounts. Namespaces are how this test reaches /opt/rocketmq without
touching the machine's /opt: where they cannot be made the test fails, saying why (it
must run in CI, which is root on Debian)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, SMALL, generate, run

PREFIX = Path("/opt/rocketmq")


def crontab_lines() -> list[str]:
    """The command text of every docs/cron.md line marked as a crontab line (``# crontab``)."""
    text = (ROOT / "docs" / "cron.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.+?)\n```", text, flags=re.S)
    lines = [ln for b in blocks for ln in b.splitlines() if re.search(r"#\s*crontab", ln)]
    return [ln.split("#", 1)[0].strip() for ln in lines]


def test_the_cron_page_has_crontab_lines_and_the_expire_help_shows_them():
    lines = crontab_lines()
    assert lines and all(ln.startswith("rmqstore ") for ln in lines), lines
    from rmqstore_cli.commands.expire import EPILOG

    assert any(ln in EPILOG for ln in lines)


def _namespace_prefix() -> list[str]:
    """``unshare -m`` as root, ``unshare -rm`` (a user namespace) otherwise; a test failure
    naming the reason when neither works here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is not installed: the crontab lines need a private mount namespace")
    cmd = [unshare, "-m"] if os.geteuid() == 0 else [unshare, "-rm"]
    probe = subprocess.run([*cmd, "--", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.fail(f"cannot make a private mount namespace ({' '.join(cmd)}): {probe.stderr.strip()}")
    return cmd


def _broker_home(tmp_path: Path) -> Path:
    """What /opt/rocketmq holds on a broker host: conf/broker.conf naming the store root (and
    the sizes and fileReservedTime the broker writes with) and the store, its commit log old."""
    home = tmp_path / "rocketmq"
    store = generate(home / "store", messages=2000)
    (home / "conf").mkdir()
    sizes = dict(
        zip(
            ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum"),
            SMALL[1::2],
            strict=True,
        )
    )
    (home / "conf" / "broker.conf").write_text(
        "brokerClusterName=DefaultCluster\nbrokerName=broker-a\n"
        f"storePathRootDir={PREFIX}/store\nstorePathCommitLog={PREFIX}/store/commitlog\n"
        + "".join(f"{k}={v}\n" for k, v in sizes.items())
        + "fileReservedTime=72\ndeleteWhen=04\n"
    )
    old = time.time() - 30 * 86400
    for f in (store / "commitlog").iterdir():
        os.utime(f, (old, old))
    return home


def _run_as_cron(line: str, home: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """``line`` under /bin/sh with cron's environment (PATH, HOME, SHELL, LOGNAME; here PATH
    also holds the installed rmqstore), /opt/rocketmq being ``home`` in a private namespace."""
    bindir = Path(sys.executable).parent
    if not (bindir / "rmqstore").is_file():
        pytest.fail(f"no rmqstore console script beside {sys.executable}: install the package (pip install -e .)")
    user_home = tmp_path / "cron-home"
    user_home.mkdir()
    env = ["env", "-i", f"PATH={bindir}:/usr/bin:/bin", f"HOME={user_home}", "SHELL=/bin/sh", "LOGNAME=root"]
    setup = (
        f"mount -t tmpfs -o size=1m rmqstore-test {shlex.quote(str(PREFIX.parent))} && "
        f"mkdir {shlex.quote(str(PREFIX))} && mount --bind {shlex.quote(str(home))} {shlex.quote(str(PREFIX))} "
        f"&& exec {shlex.join(env)} /bin/sh -c {shlex.quote(line)}"
    )
    r = subprocess.run([*_namespace_prefix(), "--", "/bin/sh", "-c", setup], capture_output=True, timeout=300)
    assert list(user_home.iterdir()) == []  # nothing written under HOME
    return r


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


@pytest.mark.parametrize("line", crontab_lines())
def test_cron_page_crontab_line_runs_as_printed(line, tmp_path):
    home = _broker_home(tmp_path)
    store = home / "store"
    files = sorted(p.name for p in (store / "commitlog").iterdir())
    before = {d: _files(store / d) for d in ("consumequeue", "index")}
    assert len(files) > 2 and before["index"]
    r = _run_as_cron(line, home, tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    if " expire " in f" {line} ":
        # --quiet: no note of where the store came from; the report only because files went
        assert err == "" and r.stdout, (r.stdout, err)
        assert sorted(p.name for p in (store / "commitlog").iterdir()) == files[-1:]  # all but the newest
        after = {d: _files(store / d) for d in ("consumequeue", "index")}
        assert len(after["consumequeue"]) < len(before["consumequeue"]) and len(after["index"]) < len(before["index"])
    v = run("verify", "--store", store, "--broker-conf", home / "conf" / "broker.conf", "--format", "json")
    assert v.returncode == 0, v.stderr.decode()
    summary = json.loads(v.stdout)["summary"]
    assert summary["errors"] == 0 and summary["commitlog_min_offset"] > 0
