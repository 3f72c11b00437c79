"""Rules about the host's memory: swapping, reclaim and the stalls they cost."""
