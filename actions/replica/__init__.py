"""The replica slotop restarts: its recipe and state file, its process group, or its restart command."""
