"""Message ids as bytes before their hex text: the offset msgId and the client UNIQ_KEY.

Plain ``struct`` formats, no construct (like :mod:`formats.sysflag`): decode-msgid imports
them for free. ``tests/test_formats.py`` checks them against construct declarations.
"""

#: ``MessageDecoder#createMessageId``: the store address (4 or 16 bytes), then the store
#: port (int) and the physical offset (long).
OFFSET_MSG_ID_TAIL_FORMAT = ">iq"

#: ``MessageClientIDSetter``: the client's address (4 or 16 bytes), then pid (short,
#: read back unsigned), class-loader hash (int), time in month (unsigned int) and counter
#: (unsigned short).
UNIQ_KEY_TAIL_FORMAT = ">HiIH"
UNIQ_KEY_TAIL_SIZE = 12
