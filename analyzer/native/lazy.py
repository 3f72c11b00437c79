"""numpy and pyarrow imported when an attribute is first read: they take a tenth of a second to
import, which a run that reads no big log need not pay.

>>> np.zeros(2).tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import importlib
import sys


class _OnFirstUse:
    """A module imported when an attribute is first read: numpy and pyarrow take a tenth of a second
    to import, which runs without a MySQL slow log need not pay."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        module = sys.modules.get(self._name)  # a dict lookup once imported
        if module is None or getattr(module.__spec__, "_initializing", False):  # another thread may be importing it
            module = importlib.import_module(self._name)
        return getattr(module, attr)


np = _OnFirstUse("numpy")
pa = _OnFirstUse("pyarrow")
