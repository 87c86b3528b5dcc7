"""KeyedRows gives back the rows it was given, by index, slice and iteration."""

from rmqstore_cli.store.answers.keyed_rows import KeyedRows


def test_rows_come_back_as_given():
    rows = [{"a": i, "b": str(i), "c": None if i % 2 else [i]} for i in range(5)]
    kept = KeyedRows()
    for r in rows:
        kept.append(r)
    assert len(kept) == 5
    assert list(kept) == rows
    assert kept[3] == rows[3] and kept[-1] == rows[-1]
    assert kept[1:3] == rows[1:3]
    assert list(next(iter(kept))) == ["a", "b", "c"]  # the keys' order, as JSON prints it


def test_empty():
    kept = KeyedRows()
    assert len(kept) == 0 and list(kept) == [] and not kept
