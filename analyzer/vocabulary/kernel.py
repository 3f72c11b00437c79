"""Linux kernel settings dbdiag judges by name.

>>> "isolcpus" in CPU_ISOLATION_PARAMETERS
True
"""

from __future__ import annotations

# Kernel command-line parameters that keep CPUs for chosen work (no scheduler ticks, RCU callbacks or IRQs).
CPU_ISOLATION_PARAMETERS = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")
