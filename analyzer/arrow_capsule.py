"""Arrow arrays handed to polars through the Arrow PyCapsule interface.

``pl.Series(pyarrow_array)`` and ``pl.from_arrow`` import ``pyarrow.compute`` on first use, a fifth
of a second; polars takes an object with ``__arrow_c_array__`` without it.
"""

from __future__ import annotations

from typing import Any

import polars as pl


class ArrowArray:
    """Wraps an Arrow array so that polars sees only its C data interface."""

    def __init__(self, array: Any) -> None:
        self.array = array

    def __arrow_c_array__(self, requested_schema: Any = None) -> Any:
        return self.array.__arrow_c_array__(requested_schema)


def series(array: Any, name: str = "") -> pl.Series:
    """A polars Series of the Arrow ``array`` (no copy where polars can share the buffers)."""
    return pl.Series(ArrowArray(array)).alias(name)  # the constructor ignores a name given beside a capsule
