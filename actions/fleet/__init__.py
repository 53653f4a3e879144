"""The fleet view's rules: which replica is worst, a model's row, who stands out, what is stale.

`tracker` keeps each replica's last good figures across polls, `table` turns them into rows
(verdicts by the SLO's one home, worst first, a row per model), `outliers` names the slow or
skewed replica, `report` writes the table as JSON, and `wiring` builds a source from settings.
"""
