"""What runs on a Spark executor, and how its failure gets back to the driver.

Both the classic Spark engine (:mod:`~rmqstore_cli.pipeline.spark`) and Spark Connect
(:mod:`~rmqstore_cli.pipeline.connect`) wrap their tasks in :class:`OnExecutor`: an executor's
error becomes one marked line that names its host, and a store file that shrank under a task
comes back as the same ShrunkError the local engine would raise.
"""

from __future__ import annotations

#: A file scan with at most this many marks comes back to the driver whole (else by shuffle).
SHIP_MARKS = 4096
EXECUTOR_SAID = "rmqstore-executor: "  # marks the line an executor's error is told in
#: marks a ShrunkError an executor met (JSON: message, path, offset, hint): the driver raises it
SHRUNK_SAID = "rmqstore-shrunk: "


class OnExecutor:
    """A task's function, whose failure names the host it ran on: on a cluster the usual
    cause is a store or output path that this executor does not see (not mounted there)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        from rmqstore_cli.store.files import mapguard

        try:
            got = self.fn(*args)
            mapguard.check_all()  # a store file that shrank under the task (the guard left zeros)
            return got
        except Exception as e:
            import socket

            from rmqstore_cli.errors import RmqstoreError

            said = str(e) if isinstance(e, RmqstoreError) else f"{type(e).__name__}: {e}"
            if isinstance(e, OSError) and e.filename is not None:
                said = f"{e.strerror}: {e.filename}"
            said = tell_shrunk(e) or said
            raise RuntimeError(f"{EXECUTOR_SAID}on host {socket.gethostname()}: {said}".replace("\n", " ")) from None


def tell_shrunk(e: BaseException) -> str | None:
    """A ShrunkError (a store file truncated while a task read it) as one line the driver
    turns back into the same error (:func:`shrunk_told`); None for any other error."""
    import json

    from rmqstore_cli.errors import ShrunkError

    if not isinstance(e, ShrunkError):
        return None
    return SHRUNK_SAID + json.dumps([e.message, None if e.path is None else str(e.path), e.offset, e.hint])


def shrunk_told(text: str):
    """The ShrunkError an executor told (:func:`tell_shrunk`) somewhere in a failed job's
    text, or None: the driver reports it as if it had read the file itself."""
    import json

    from rmqstore_cli.errors import ShrunkError

    at = text.find(SHRUNK_SAID)
    if at < 0:
        return None
    try:
        message, path, offset, hint = json.JSONDecoder().raw_decode(text, at + len(SHRUNK_SAID))[0]
    except (ValueError, TypeError):
        return None
    return ShrunkError(message, path=path, offset=offset, hint=hint)
