"""How the store's bytes are reached, safely: every open, map, write and delete, the SIGBUS
guard, the lock, and the compiled loops' loader."""
