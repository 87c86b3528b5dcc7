/* generate's record join (_cencode.c), registered by _ckernels.c's module. */
#ifndef RMQSTORE_CENCODE_H
#define RMQSTORE_CENCODE_H
#include <Python.h>
#include <stdint.h>

/* encode_join, added to the module by PyModule_AddFunctions */
extern PyMethodDef encode_methods[];

#endif
