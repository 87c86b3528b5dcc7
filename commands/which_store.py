"""Which store a command reads (README "Which store"): options, then environment variables,
then ``~/store``; and the one stderr line saying where it came from."""

from __future__ import annotations

import os
from pathlib import Path

from rmqstore_cli.commands.lines import say

#: Where a command's store comes from when --store is not given.
STORE_ENV = "RMQSTORE_STORE"
CONF_ENV = "RMQSTORE_BROKER_CONF"
DEFAULT_STORE = Path(os.path.expanduser("~")) / "store"


def conf_path(broker_conf: Path | None) -> Path | None:
    """The broker.conf a command reads: --broker-conf, else $RMQSTORE_BROKER_CONF (empty: none)."""
    if broker_conf is not None:
        return broker_conf
    env = os.environ.get(CONF_ENV)
    return Path(env) if env else None


def pick_store(store: Path | None, broker_conf: Path | None, required: bool = True) -> tuple[Path | None, str | None]:
    """The store root a command reads and where it came from (None: --store named it).

    Explicit options before environment variables before the broker's default: --store;
    --broker-conf's ``storePathRootDir``; $RMQSTORE_STORE; $RMQSTORE_BROKER_CONF's
    ``storePathRootDir``; ``~/store`` (``MessageStoreConfig#storePathRootDir``'s default,
    ``${user.home}/store``). ``broker_conf`` is the option as given (not the environment's).
    ``required=False`` (decode-msgid, dump-cq --file, where a store is optional): None
    instead of the default."""
    from rmqstore_cli.store.layout.config import conf_root

    if store is not None:
        return store, None
    if broker_conf is not None:
        root = conf_root(broker_conf)
        if root is not None:
            return Path(root), f"storePathRootDir in {broker_conf}"
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env), STORE_ENV
    conf = os.environ.get(CONF_ENV)
    if broker_conf is None and conf:
        root = conf_root(Path(conf))
        if root is not None:
            return Path(root), f"storePathRootDir in {conf}, from {CONF_ENV}"
    if not required:
        return None, None
    return DEFAULT_STORE, "the broker's default: no --store, RMQSTORE_STORE or storePathRootDir"


def tell_store(cfg, origin: str | None, conf: Path | None, quiet: bool = False) -> None:
    """One stderr line saying where the store came from when --store did not name it, and
    where the commit log is when broker.conf's ``storePathCommitLog`` puts it outside the
    store root (nothing with ``quiet``, or when both are plain)."""
    from rmqstore_cli.store.layout.config import commit_log_paths

    parts = [] if origin is None else [f"store {cfg.root} ({origin})"]
    if cfg.store_path_commit_log:
        root = os.path.abspath(cfg.root)
        away = [
            d
            for d in commit_log_paths(cfg.store_path_commit_log)
            if os.path.commonpath([root, os.path.abspath(d)]) != root
        ]
        if away:
            parts.append(f"commit log {', '.join(away)} (storePathCommitLog in {conf})")
    if parts and not quiet:
        say(None, "; ".join(parts))


def pick_stores(
    stores: list[str] | None,
    globs: list[str] | None,
    broker_conf: Path | None,
    sizes: dict[str, int | None],
    quiet: bool = False,
) -> list:
    """verify, rebuild-index and export: the stores named by --store (paths) and --store-glob
    (patterns), or the one store :func:`pick_store` finds; as ``StoreSpec``s."""
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.store.layout.config import StoreConfig

    conf = conf_path(broker_conf)
    origin = None
    if not stores and not globs:
        root, origin = pick_store(None, broker_conf)
        stores = [str(root)]
    specs = store_specs(list(stores or []), None if conf is None else str(conf), sizes, list(globs or []))
    for s in specs:
        tell_store(StoreConfig.load(s.path, s.broker_conf), origin, conf, quiet)
    return specs
