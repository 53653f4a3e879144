"""Changing the world: probe steps, managed replica restarts, the sweep, the KV budget."""
