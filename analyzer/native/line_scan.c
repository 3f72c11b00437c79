/* Placeholder: filled in by the kernel's own commit. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_line_scan", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__line_scan(void) { return PyModule_Create(&module); }
