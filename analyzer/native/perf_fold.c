/* Placeholder: filled in by the kernel's own commit. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_perf_fold", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__perf_fold(void) { return PyModule_Create(&module); }
