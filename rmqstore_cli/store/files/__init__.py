"""How the store's bytes are reached, safely: every open, map, write and delete, the SIGBUS
guard, the lock, a RocksDB database opened read-only, and the compiled loops' loader. The
lowest of store/'s layers: it imports from no other sub-package."""
