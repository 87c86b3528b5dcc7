"""Message ids as bytes before their hex text: the offset msgId and the client UNIQ_KEY.

Plain ``struct`` formats, no construct (like :mod:`formats.sysflag`): decode-msgid imports
them for free. ``tests/engine/test_formats.py`` checks them against construct declarations.
"""

import struct

#: ``MessageDecoder#createMessageId``: the store address (4 or 16 bytes), then the store
#: port (int) and the physical offset (long).
OFFSET_MSG_ID_TAIL_FORMAT = ">iq"
OFFSET_MSG_ID_TAIL_SIZE = 12

#: An address is 4 bytes (IPv4) or 16 (IPv6), as in the record's hosts.
ADDRESS_SIZES = (4, 16)

#: ``MessageClientIDSetter``: the client's address (4 or 16 bytes), then pid (short,
#: read back unsigned), class-loader hash (int), time in month (unsigned int) and counter
#: (unsigned short).
UNIQ_KEY_TAIL_FORMAT = ">HiIH"
UNIQ_KEY_TAIL_SIZE = 12

#: Both ids have the same lengths in hex digits: 32 with an IPv4 address, 56 with IPv6.
ID_HEX_LENGTHS = tuple(2 * (a + OFFSET_MSG_ID_TAIL_SIZE) for a in ADDRESS_SIZES)
assert ID_HEX_LENGTHS == tuple(2 * (a + UNIQ_KEY_TAIL_SIZE) for a in ADDRESS_SIZES)

#: The sizes in bytes of a UNIQ_KEY's time in month and counter (the last two fields of
#: :data:`UNIQ_KEY_TAIL_FORMAT`), which generate's bulk workload writes as hex digits.
UNIQ_KEY_TIME_COUNTER_SIZES = tuple(struct.calcsize(">" + c) for c in UNIQ_KEY_TAIL_FORMAT[-2:])
