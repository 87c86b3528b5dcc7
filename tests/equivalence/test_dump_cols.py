"""generate --from-jsonl's C reader (``dump_cols``, ``_cdump.c``) against its twin of the same name
(store/write/replay_cols.py: orjson's dict per line) on a real dump and on hostile lines.

The C loop may give up on a block (None): the twin then reads it. Whenever it does not give up,
its columns, topics, host texts, bodies and PROPERTIES are the twin's, to the bit; and on the
dump lines dump-commitlog writes it never gives up (else it would never run).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from rmqstore_cli.store.files.kernels import DUMP_COLS
from rmqstore_cli.store.write import replay_cols
from tests.helpers import cli, generate, needs_c


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


@pytest.fixture(scope="module")
def dump_lines(tmp_path_factory) -> list[bytes]:
    """A dump of a store with every kind of record the generator writes (IPv6 hosts,
    compressed bodies, transactions, delays, retries, non-ASCII keys)."""
    d = tmp_path_factory.mktemp("dumpcols")
    src = generate(d / "s", "--ipv6-ratio", "0.3", messages=600)
    r = cli("dump-commitlog", "--store", src, "--format", "jsonl", "--body", "base64")
    assert r.exit_code == 0, r.stderr
    return [line.encode() + b"\n" for line in r.stdout.splitlines()]


def both(K, lines: list) -> tuple:
    """The C loop's result and the twin's (None, or the exception type it raised), with their outs."""
    out_c = np.full(len(DUMP_COLS) * len(lines), -7, np.int64)
    out_t = np.full(len(DUMP_COLS) * len(lines), -7, np.int64)
    got = K.dump_cols(lines, out_c)
    try:
        want = replay_cols.dump_cols(lines, out_t)
    except Exception as e:  # what the caller catches and goes line by line for
        want = type(e)
    return got, out_c, want, out_t


def assert_same_or_none(K, lines: list) -> bool:
    """The C loop gave up, or gave the twin's result; whether it gave one."""
    got, out_c, want, out_t = both(K, lines)
    if got is None:
        return False
    assert not isinstance(want, type), (lines, want)
    assert got == want, lines
    assert np.array_equal(out_c, out_t), lines
    return True


def test_the_columns_are_named_alike(K):
    assert K._EXT.DUMP_COLS == DUMP_COLS


def test_a_real_dump_is_read_by_the_c_loop_as_the_twin_reads_it(K, dump_lines):
    assert assert_same_or_none(K, dump_lines)
    for i in range(0, len(dump_lines), 97):  # blocks of one line too
        assert assert_same_or_none(K, dump_lines[i : i + 1])


#: lines the C loop must read as the twin does, or give up on
HOSTILE = [
    b'{"topic":"t","queue_id":1,"store_timestamp":2,"born_timestamp":3,"born_host":"1.2.3.4:5",'
    b'"store_host":"[::1]:9","properties_string":"A\\u0001b\\u0002","body":"QQ=="}',
    b'{"topic":"t\\u00e9\\ud83d\\ude00","queue_id":-1,"store_timestamp":0,"born_timestamp":-0,'
    b'"born_host":"1.2.3.4:5","store_host":"1.2.3.4:5","properties_string":"\\"\\\\\\/\\b\\f\\n\\r\\t"}',
    b'  {"topic" : "t" , "queue_id" : 1 ,"store_timestamp":2,"born_timestamp":3,"born_host":"a:1",'
    b'"store_host":"b:2","properties_string":"","body":"","x":[1,{"topic":[]},null,true,false,"\\u1234"]} \r\n',
    b'{"topic":"t","queue_id":1,"store_timestamp":2,"born_timestamp":3,"born_host":"a:1","store_host":"b:2",'
    b'"properties_string":"p","magic":"v2","queue_offset":null,"physical_offset":0,"body_encoding":"base64",'
    b'"body":"QUJD","flag":-5,"sys_flag":123456789012345678,"reconsume_times":0,"prepared_transaction_offset":9}',
]


#: host texts at the edges of ``split_host`` (the C loop takes only ASCII-digit ports)
HOSTS = [
    b"[::1]:9",
    b"[::ffff:10.0.0.1]:9",
    b"a:b:5",
    b"[x]:1]:2",
    b"[x]:",
    b"[",
    b"1.2.3.4:+5",
    b"1.2.3.4: 5",
    b"1.2.3.4:\\u0665",
    b"1.2.3.4:\\u0035",
    b"1.2.3.4",
    b"[::1]",
    b":5",
    b"1.2.3.4:0005",
    b"1.2.3.4:123456789",
    b"1.2.3.4:1234567890",
    b"\\u00e9:1",
    "\u00e9:1".encode(),
]


def _mutations(rnd: random.Random, line: bytes) -> list[bytes]:
    """Edits of a line at the edges of what the C loop takes."""
    swaps = [
        (b'"queue_id":', b'"queue_id":1.0,"x":'),
        (b'"queue_id":', b'"queue_id":"1","x":'),
        (b'"queue_id":', b'"queue_id":true,"x":'),
        (b'"queue_id":', b'"queue_id":1234567890123456789,"x":'),
        (b'"flag":', b'"flag":null,"y":'),
        (b'"flag":', b'"flag":1e3,"y":'),
        (b'"queue_offset":', b'"queue_offset":-1,"y":'),
        (b'"queue_offset":', b'"queue_offset":-0,"y":'),
        (b'"physical_offset":', b'"physical_offset":null,"y":'),
        (b'"topic":', b'"topic":5,"z":'),
        (b'"topic":', b'"to\\u0070ic":'),
        (b'"topic":', b'"topic":"dup","topic":'),
        (b'"magic":"v', b'"magic":"\\u0076'),
        (b'"magic":"v1"', b'"magic":"v2"'),
        (b'"magic":"v1"', b'"magic":null'),
        (b'"body":"', b'"body":"A'),
        (b'"body":"', b'"body":"\\/'),
        (b'"body":"', b'"body":"===='),
        (b'"body_encoding":"base64"', b'"body_encoding":"hex"'),
        (b'"body_encoding":"base64"', b'"body_encoding":"bas\\u0065"'),
        (b'"body":', b'"body_base64":"QQ==","b":'),
        (b'"properties_string":"', b'"properties_string":"\\ud800'),
        (b'"properties_string":"', b'"properties_string":"\\udc00x'),
        (b'"properties_string":"', b'"properties_string":"\xc3\xa9\xf0\x9f\x98\x80'),
        (b'"properties_string":"', b'"properties_string":"\xed\xa0\x80'),
        (b'"properties_string":"', b'"properties_string":"\xc0\xaf'),
        (b'"properties_string":"', b'"properties_string":"\x01'),
        (b'"properties_string":', b'"properties_string":null,"q":'),
        (b'"properties_string":', b'"properties_base64":"QQ==","q":'),
        (b'"born_host":', b'"born_host":null,"h":'),
        (b'"born_host":"', b'"born_host":"nowhere'),
        *((b'"born_host":', b'"born_host":"' + h + b'","h":') for h in HOSTS),
        *((b'"store_host":', b'"store_host":"' + h + b'","h":') for h in HOSTS),
        (b'"keys":', b'"keys":NaN,"k":'),
        (b'"keys":', b'"keys":' + b"[" * 70 + b"1" + b"]" * 70 + b',"k":'),
        (b'"keys":', b'"keys":01,"k":'),
        (b'"keys":', b'"keys":tru,"k":'),
        (b"{", b"["),
        (b"}\n", b"}x\n"),
        (b"}\n", b"},\n"),
        (b"}\n", b"\n"),
    ]
    out = [line.replace(a, b, 1) for a, b in swaps if a in line]
    for _ in range(40):  # random byte edits
        b = bytearray(line)
        for _ in range(rnd.randint(1, 3)):
            at = rnd.randrange(len(b))
            op = rnd.random()
            if op < 0.4:
                b[at] = rnd.choice(b'"\\{}[],:0123456789-.eE \x00\x7f\x80\xff')
            elif op < 0.7:
                del b[at]
            else:
                b[at:at] = bytes([rnd.randrange(256)])
        out.append(bytes(b))
    return out


def test_hostile_lines_are_read_as_the_twin_reads_them_or_left_to_it(K, dump_lines):
    rnd = random.Random(35)
    taken = 0
    for line in HOSTILE:
        taken += assert_same_or_none(K, [line])
    assert taken == len(HOSTILE)  # each is one the C loop takes
    for line in rnd.sample(dump_lines, 30):
        for m in _mutations(rnd, line):
            assert_same_or_none(K, [m])
            assert_same_or_none(K, [dump_lines[0], m])


def test_what_it_gives_up_on(K, dump_lines):
    """Lines the twin reads (or refuses) in ways the C loop leaves to it: None, not a guess."""
    line = dump_lines[0]
    for bad in (
        line.replace(b'"topic":', b'"topic":"a","topic":', 1),  # a key twice: orjson keeps the last
        line.replace(b'"body":"', b'"body":"\\u0041', 1),  # an escape in base64
        line.replace(b'"queue_id":', b'"queue_id":2.0,"x":', 1),  # int(2.0) is 2: left to the twin
        b'{"topic":"t"}\n',
        b"[]\n",
        b"",
    ):
        assert K.dump_cols([bad], np.empty(len(DUMP_COLS), np.int64)) is None, bad
    assert K.dump_cols([line.decode()], np.empty(len(DUMP_COLS), np.int64)) is None  # str: the twin's


def test_argument_checks(K, dump_lines):
    with pytest.raises(ValueError, match="out holds"):
        K.dump_cols(dump_lines[:2], np.empty(len(DUMP_COLS), np.int64))
    with pytest.raises(TypeError):
        K.dump_cols(tuple(dump_lines[:1]), np.empty(len(DUMP_COLS), np.int64))
    with pytest.raises((TypeError, BufferError, ValueError)):
        K.dump_cols(dump_lines[:1], np.empty(2 * len(DUMP_COLS), np.int64)[::2])
    with pytest.raises(TypeError, match="int64"):
        K.dump_cols(dump_lines[:1], np.empty(len(DUMP_COLS), np.float64))
    assert K.dump_cols([], np.empty(0, np.int64)) == ([], [], [], [], [])
