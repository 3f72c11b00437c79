"""The column types every table shares."""

from __future__ import annotations

import polars as pl

UTC_TIME = pl.Datetime("us", "UTC")  # every time of every table
