"""What the disk measures mean, shared by derive (``derive/disks.py``) and the disk rules.

>>> BUSY_IOPS, SATURATED_UTIL_PCT
(5.0, 90.0)
"""

from __future__ import annotations

# An iostat report counts as busy when the device completed this many requests per second in it: the
# latency of a few requests of an idle device says nothing of the device.
BUSY_IOPS = 5.0
# A report in which the device had a request in flight this share of the time (%util): saturated, for a
# device that serves one request at a time (a parallel device is judged by its wait, not by this).
SATURATED_UTIL_PCT = 90.0
