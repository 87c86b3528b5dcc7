/* generate --from-jsonl's reader (_cdump.c), registered by _ckernels.c's module. */
#ifndef RMQSTORE_CDUMP_H
#define RMQSTORE_CDUMP_H
#include <Python.h>

/* dump_cols, added to the module by PyModule_AddFunctions */
extern PyMethodDef dump_methods[];
/* DUMP_COLS: the names of dump_cols' out columns, in order (a new tuple) */
PyObject *dump_cols_names(void);

#endif
