"""rmqstore's tests (ARCHITECTURE.md, Tests): a package, so helpers import as ``tests.helpers``."""
