"""Restarting a replica with new dials: plan, apply, verify, the quality check, before/after."""
