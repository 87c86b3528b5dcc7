/* export's text columns as Arrow buffers (_carrow.c), registered by _ckernels.c's module. */
#ifndef RMQSTORE_CARROW_H
#define RMQSTORE_CARROW_H
#include <Python.h>

/* host_texts and hex_ranges, added to the module by PyModule_AddFunctions */
extern PyMethodDef arrow_methods[];

#endif
