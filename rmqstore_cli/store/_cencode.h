/* generate's record join (_cencode.c), registered by _ckernels.c's module. */
#ifndef RMQSTORE_CENCODE_H
#define RMQSTORE_CENCODE_H
#include <Python.h>
#include <stdint.h>

/* encode_join, added to the module by PyModule_AddFunctions */
extern PyMethodDef encode_methods[];
/* CRC-32 (zlib's) of n bytes: _ckernels.c's, carry-less multiplies where the CPU has them */
uint32_t rmq_crc32(const uint8_t *p, int64_t n);

#endif
