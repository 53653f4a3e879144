"""The concurrency sweep: its decisions, its runner, its outputs, and the `slotop sweep` command."""
