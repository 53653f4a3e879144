"""What each pane shows, worked out by pure functions from what the dashboard knows.

`inputs` is what the dashboard knows at one instant; `dashboard` builds every pane's view from it
(`build_views`); `header`, `slo`, `load` (the probe and the curve) and `change` (the
before/after) are the larger views, `verdict` the judgements the panes share. Panes draw views;
nothing here draws.
"""
