"""`slotop replay`: a recording played back in its dashboard, by the code that built it live.

`app` is the live app with a replay for its feed; `feed` follows the transport (`clock`) and posts
what the live feed posted; `frames` turns the recording back into those messages, with `sweeps`
and `changes` for the sweep and the before/after panel as recorded; `goto` is the go-to prompt.
"""
