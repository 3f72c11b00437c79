"""Rules about NUMA placement: memory on the wrong node, processes not bound to a node."""
