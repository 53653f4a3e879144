"""`slotop fleet`: every replica of a fleet on one screen, and a replica's dashboard from it.

`app` is the fleet screen, `view` its table's cells (pure), `run` the entry point that runs the
screen and opens the dashboard of the replica chosen.
"""
