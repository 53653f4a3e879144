"""The simulated vLLM replica. It imports nothing else of slotop, so it stands alone."""
