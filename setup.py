"""Build step for dbdiag's two C kernels; everything else is declared in pyproject.toml.

The kernels do the byte-level loops of the two biggest inputs (perf script output, slow-query
logs) that no polars expression does fast enough. They are optional: without a C compiler the
package installs without them and the parsers take their polars paths (slower, same tables).
"""

from setuptools import Extension, setup

KERNELS = [
    Extension(
        f"dbdiag.{name}",
        [f"analyzer/native/{name.lstrip('_')}.c"],
        optional=True,
        extra_compile_args=["-O3", "-std=c99", "-Wall"],
    )
    for name in ("_perf_fold", "_line_scan")
]

setup(ext_modules=KERNELS)
