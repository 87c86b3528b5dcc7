/* CRC-32 of the reflected polynomial 0xEDB88320 (_ccrc.c): zlib's crc32, UtilAll#crc32. */
#ifndef RMQSTORE_CCRC_H
#define RMQSTORE_CCRC_H
#include <stdint.h>

/* The tables, and which fold this CPU runs (RMQSTORE_NO_CLMUL, RMQSTORE_NO_VPCLMUL): once, at import. */
void rmq_crc_init(void);
/* What crc32 runs on: 0 the tables, 1 128-bit carry-less multiplies, 2 512-bit ones (VPCLMULQDQ). */
int rmq_crc_clmul(void);
/* zlib's crc32(p[0:n]) (initial value 0); reads exactly [p, p + n). */
uint32_t rmq_crc32(const uint8_t *p, int64_t n);

#endif
