"""Output: rich tables for people, JSON Lines / JSON for scripts; store text made safe.

Text from a store is data: a topic may hold terminal escapes or rich markup. Tables get
control characters shown as ``\\xNN`` and markup escaped; JSON escapes C0/C1 controls so
even ``cat`` of the output cannot drive a terminal.
"""
from __future__ import annotations

import base64
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from rmqstore_cli.store.message import format_host, offset_msg_id, split_keys

FORMATS = ("table", "jsonl", "json")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(s: str) -> str:
    """A string that is inert on a terminal: control and bidi characters as escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", s)


def _json_safe(line: str) -> str:
    return _CONTROL.sub(lambda m: f"\\u{ord(m[0]):04x}", line)


def to_json(obj: Any) -> str:
    return to_json_bytes(obj).decode("utf-8")


#: What JSON encoders leave raw but a terminal would act on: DEL, C1 controls (UTF-8
#: C2 80..9F), line/paragraph separators and bidi overrides.
_UNSAFE_UTF8 = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _escape_utf8(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m[0].decode("utf-8"))


try:  # orjson is ~10x faster; it escapes C0 controls as json does
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        try:
            return _orjson.dumps(obj)
        except TypeError:  # e.g. lone surrogates: let json escape them
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
except ImportError:  # pragma: no cover - orjson is a dependency
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def to_json_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON that is inert on a terminal (see :data:`_UNSAFE_UTF8`)."""
    b = _dumps(obj)
    if b.isascii() and b"\x7f" not in b:
        return b
    return _UNSAFE_UTF8.sub(_escape_utf8, b)


def text_or_b64(raw: bytes) -> tuple[str, bool]:
    """(text, exact): the UTF-8 text, and whether it decoded without replacement."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), False


def encode_body(body: bytes, mode: str) -> str | None:
    if mode == "none":
        return None
    if mode == "base64":
        return base64.b64encode(body).decode()
    if mode == "hex":
        return body.hex()
    return body.decode("utf-8", "backslashreplace")


def message_dict(msg, body: str = "none", properties: bool = True, file: str | None = None) -> dict:
    """A message under DESIGN.md's field names, in the order dump-commitlog prints them."""
    try:
        topic, topic_exact = msg.topic_bytes.decode("utf-8"), True
    except UnicodeDecodeError:
        topic, topic_exact = msg.topic_bytes.decode("utf-8", "replace"), False
    d: dict[str, Any] = {
        "physical_offset": msg.physical_offset,
        "total_size": msg.total_size,
        "magic": msg.version,
        "body_crc": msg.body_crc,
        "queue_id": msg.queue_id,
        "flag": msg.flag,
        "queue_offset": msg.queue_offset,
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp,
        "born_host": format_host(msg.born_address, msg.born_port),
        "store_timestamp": msg.store_timestamp,
        "store_host": format_host(msg.store_address, msg.store_port),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "topic": topic,
    }
    if not topic_exact:
        d["topic_base64"] = base64.b64encode(msg.topic_bytes).decode()
    props = msg.properties
    if properties:
        d["properties"] = props
        text, exact = text_or_b64(msg.properties_bytes)
        if exact:
            d["properties_string"] = text
        else:
            d["properties_base64"] = base64.b64encode(msg.properties_bytes).decode()
    d["tags"] = props.get("TAGS")
    d["keys"] = split_keys(props.get("KEYS"))
    d["uniq_key"] = props.get("UNIQ_KEY")
    d["msg_id"] = offset_msg_id(msg.store_address, msg.store_port, msg.physical_offset)
    d["body_size"] = len(msg.body)
    b = encode_body(msg.body, body) if body != "none" else None
    if b is not None:
        d["body"] = b
        d["body_encoding"] = body
    d["file"] = file if file is not None else ""
    return d


class Output:
    """Writes records in the chosen format to stdout; tables are printed in pages so a
    long dump streams instead of piling up in memory."""

    PAGE = 200
    BATCH = 512
    FLUSH_BYTES = 1 << 20

    def __init__(self, fmt: str, columns: list[tuple[str, str]] | None = None, title: str | None = None):
        self.fmt = fmt
        self.columns = columns or []
        self.title = title
        self.count = 0
        self._rows: list[list[str]] = []
        self._json_first = True
        self._lines: list[bytes] = []
        self._pending = 0
        self._out = sys.stdout

    def emit(self, record: dict) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            self._lines.append(to_json_bytes(record))
            if len(self._lines) >= self.BATCH:
                self._flush_lines()
        elif self.fmt == "json":
            self._lines.append((b"[\n" if self._json_first else b",\n") + to_json_bytes(record))
            self._json_first = False
            if len(self._lines) >= self.BATCH:
                self._flush_lines()
        else:
            self._rows.append([_cell(record.get(key)) for key, _ in self.columns])
            if len(self._rows) >= self.PAGE:
                self._flush_table()

    def emit_lines(self, lines: bytes, count: int) -> None:
        """``count`` records already rendered as JSON (:mod:`rmqstore_cli.jsonblock`): UTF-8,
        a newline after each record."""
        self.count += count
        data = memoryview(lines)[:-1]  # a view: the lines are joined once, when written
        if self.fmt == "jsonl":
            self._lines.append(data)
        else:
            for line in lines[:-1].split(b"\n"):
                self._lines.append((b"[\n" if self._json_first else b",\n") + line)
                self._json_first = False
        self._pending += len(data)
        if self._pending >= self.FLUSH_BYTES:
            self._flush_lines()

    def emit_all(self, records: Iterable[dict]) -> int:
        for r in records:
            self.emit(r)
        return self.count

    def _flush_table(self) -> None:
        if not self._rows:
            return
        from rich.table import Table
        from rich.text import Text

        title = Text(safe_text(self.title)) if self.title and self.count <= self.PAGE else None  # data: no markup
        table = Table(title=title, show_lines=False)
        for _, header in self.columns:
            table.add_column(header, overflow="fold")
        for row in self._rows:
            table.add_row(*(Text(c) for c in row))
        console().print(table)
        self._rows = []

    def _flush_lines(self) -> None:
        """Records go out in batches, as bytes: one write per batch, not per record."""
        if not self._lines:
            return
        sep = b"\n" if self.fmt == "jsonl" else b""
        data = sep.join(self._lines)
        self._lines = []
        self._pending = 0
        buf = getattr(self._out, "buffer", None)
        if buf is None:
            self._out.write((data + sep).decode("utf-8"))
        else:
            self._out.flush()
            buf.write(data)
            buf.write(sep)
            buf.flush()

    def close(self) -> None:
        self._flush_lines()
        if self.fmt == "json":
            self._out.write("[]\n" if self._json_first else "\n]\n")
        elif self.fmt == "table":
            self._flush_table()
        self._out.flush()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return safe_text(" ".join(str(x) for x in v))
    return safe_text(str(v))


_console = None
_err_console = None


def console():
    global _console
    if _console is None:
        from rich.console import Console

        # piped tables (less, files) get room for a msgId instead of 80 folded columns
        width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
        _console = Console(highlight=False, no_color=bool(os.environ.get("NO_COLOR")), soft_wrap=False, width=width)
        _console.on_broken_pipe = _broken_pipe  # rich's own handler exits 1: `| head` is no failure
    return _console


def _broken_pipe() -> None:
    """A table written to a closed pipe stops as JSON does: the command exits 0 (commands.common)."""
    raise BrokenPipeError(32, "Broken pipe")


def err_console():
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")))
    return _err_console


def print_summary(fmt: str, summary: dict, title: str) -> None:
    """A command's summary: one JSON object, or a two-column table."""
    if fmt in ("json", "jsonl"):
        sys.stdout.write(to_json(summary) + "\n")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(safe_text(title)), show_header=False)
    table.add_column("what")
    table.add_column("value")
    for k, v in summary.items():
        table.add_row(Text(k), Text(_cell(v) if not isinstance(v, dict) else to_json(v)))
    console().print(table)


def iter_progress(items: Iterator, total: int | None, label: str, enabled: bool) -> Iterator:
    """Wrap an iterator with a progress bar on stderr, only on a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield from items
        return
    from rich.progress import Progress

    with Progress(console=err_console(), transient=True) as p:
        task = p.add_task(label, total=total)
        for it in items:
            yield it
            p.advance(task)
