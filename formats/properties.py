"""The message PROPERTIES codec (docs/format/properties.md): ``name\\x01value\\x02`` pairs."""

from __future__ import annotations

from collections.abc import Iterable

NAME_VALUE_SEPARATOR = "\x01"  # MessageDecoder.NAME_VALUE_SEPARATOR
PROPERTY_SEPARATOR = "\x02"  # MessageDecoder.PROPERTY_SEPARATOR
MAX_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE
# MessageConst names the index and the C loops read (store/records/message.py has the rest).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
KEY_SEPARATOR = " "  # MessageConst.KEY_SEPARATOR


def parse_properties(text: str) -> dict[str, str]:
    """``MessageDecoder#string2messageProperties`` (4.9.1+ and 5.x), exactly.

    Empty names and values and pairs without ``\\x01`` are dropped, a value keeps any
    later ``\\x01``, and a repeated name keeps its last value. Splitting first is
    equivalent to the broker's index walk because a ``\\x01`` found beyond the pair's
    end fails its ``k < j - 1`` test just as a ``find`` inside the pair fails.
    """
    out: dict[str, str] = {}
    for part in text.split(PROPERTY_SEPARATOR):
        name, _, value = part.partition(NAME_VALUE_SEPARATOR)
        if name and value:  # the broker's 0 < k < len(part) - 1
            out[name] = value
    return out


def serialize_properties(items: Iterable[tuple[str, str | None]], trailing_separator: bool) -> str:
    """``MessageDecoder#messageProperties2String``.

    4.9.x deletes the last character (so the last pair has no ``\\x02``); 5.x keeps it.
    Entries whose value is None are skipped, as the broker skips null values.
    """
    text = "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in items if v is not None)
    if text and not trailing_separator:
        text = text[:-1]
    return text
