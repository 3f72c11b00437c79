"""The C kernels (``line_scan.c``, ``perf_fold.c``; built by setup.py as ``dbdiag._line_scan`` and
``dbdiag._perf_fold``) and, beside them, the Python that calls them and does the same without them.

- ``slowlog_lines``: a slow-log piece's lines, kinds and entries, by ``_line_scan`` or polars.
- ``perf_fold``: perf script pieces read by ``_perf_fold``; ``perf_fold_polars``: the same read line by line.
- ``lazy``: numpy and pyarrow imported on first use.
"""
