"""`slotop tune`: the method run for the operator, one measured configuration after another.

`model` holds what a tune is made of (its plan, each configuration tried, each decision, the
choice) and their JSON; `capacity` the KV budget it plans with; `diagnose` the pure rules (the
next dial from what binds, the choice and its noise band); `runner` the loop over injected parts
(restart, sweep, quality check, clock); `wiring` those parts on a real replica; `command` the
headless command; `output` its text and JSON; `resume` reads a recorded tune back.
"""
