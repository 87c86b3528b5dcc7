"""verify's checks of ``config/``: every file the broker loads with ``ConfigManager#load``, judged
as that method and ``#loadBak`` judge it (:mod:`rmqstore_cli.store.layout.configfiles`).

``ConfigManager#load`` (4.9.7 and 5.3.3 alike): a file that is missing or empty
(``MixAll#file2String`` returns null or "") goes to ``#loadBak``; so does one whose
``#decode`` throws ("load <file> failed, and try to load backup file"). ``#loadBak`` decodes
``<file>.bak``, the text the file held before its last persist (``MixAll#string2File``); a
missing or empty ``.bak`` returns true (the manager starts empty); one that throws returns
false, and ``BrokerController#initialize`` (5.x ``#initializeMetadata``, or
``DefaultMessageStore#load`` for delayOffset.json, ``TimerMessageStore#load`` for timermetrics)
fails: the broker does not start. So:

- ``config.backup-loaded`` (warning): the broker runs on the ``.bak``, without what changed
  since the last persist. A 4.9.x crash between ``string2File``'s delete and rename leaves the
  file missing and the newest text complete in ``<file>.tmp``: the repair is renaming it.
- ``config.lost`` (error): the file is empty or does not decode and no ``.bak`` has text: the
  broker starts with that table empty (every topic, offset or group in it gone); so it does
  when neither decodes for the two 5.x managers whose ``#load`` result is ignored
  (``MessageRequestModeManager``, ``TransactionMetrics``).
- ``config.load-fails`` (error): neither decodes: the broker does not start.
- ``config.unreadable`` (warning): not a regular file, or larger than any config file: what the
  broker makes of it cannot be told.
"""

from __future__ import annotations

from rmqstore_cli.store.checks.findings import CHECKS, check_table
from rmqstore_cli.store.layout.configfiles import ConfigLoad, config_repair, load_broker_configs

CHECKS.update(
    check_table(
        """
config.backup-loaded  warning  a config/ file is missing, empty or torn and the broker loads its .bak
                               (ConfigManager#loadBak): what changed since the last persist is lost
config.lost           error    a config/ file is empty or torn and has no .bak: the broker starts with that table empty
                               (ConfigManager#loadBak finds nothing)
config.load-fails     error    a config/ file and its .bak both fail to decode: ConfigManager#loadBak returns false and
                               the broker does not start
config.unreadable     warning  a config/ file is not a regular file or too large to be one: what the broker loads cannot
                               be told
"""
    )
)


class ConfigChecks:
    """The ``config/`` part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_configs(self) -> None:
        """One finding per config file the broker would not simply load (module docstring)."""
        from rmqstore_cli.store.checks.startup import family, resolve_version

        version = family(resolve_version(self.config.root, self.opt.broker_version)[0])
        for ld in load_broker_configs(self.root / "config", version, self.config.enable_lmq):
            self.files["config"] += sum(1 for p in (ld.path, ld.bak) if p.is_file())
            self._config_finding(ld)

    def _config_finding(self, ld: ConfigLoad) -> None:
        name, bak = self.rel(ld.path), self.rel(ld.bak)
        manager, why = ld.config.manager, "; ".join(ld.notes)
        said, command = config_repair(ld)
        repair = said + (f"; repair: {command}" if command else "")
        at = ld.file_error.offset if ld.file_error is not None else None
        if ld.source == "unreadable":
            self._add("config.unreadable", name, None, f"{why}: cannot tell what {manager}#load makes of it")
        elif ld.source == "fails" and not ld.config.gates_start:
            self._add(
                "config.lost",
                bak,
                ld.error.offset,
                f"{why}: '{manager}#load' falls back to the .bak, which fails too; its caller ignores the "
                "false, so the broker starts with it empty; " + repair,
            )
        elif ld.source == "fails":
            self._add(
                "config.load-fails",
                bak,
                ld.error.offset,
                f"{why}: '{manager}#load' falls back to the .bak, which fails too ('load {ld.path.name}.bak "
                f"Failed'): the broker does not start; " + repair,
            )
        elif ld.source == "bak":
            how = {"absent": "MixAll#file2String returns null for the missing file", "empty": "the file is empty"}.get(
                ld.file_state, "'load ... failed, and try to load backup file'"
            )
            self._add(
                "config.backup-loaded",
                name,
                at,
                f"{why}: {how}, so {manager} loads {ld.bak.name}: the broker runs on the text before the last "
                "persist; " + repair,
            )
        elif ld.source == "none" and ld.file_state in ("empty", "torn"):
            self._add(
                "config.lost",
                name,
                at,
                f"{why}: no backup, so {manager} starts empty (ConfigManager#loadBak "
                "returns true with nothing loaded); " + repair,
            )
