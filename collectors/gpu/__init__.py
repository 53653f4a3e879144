"""GPUs through NVML: the calls behind a protocol, which devices a process sees, typed snapshots."""
