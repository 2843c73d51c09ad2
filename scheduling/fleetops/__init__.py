"""Fleet operations: utilisation, idle GPUs, queue waits and capacity signals (computed in the TSDB)."""
