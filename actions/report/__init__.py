"""The session report: `slotop report FILE --out DIR` turns a recording into files a person reads.

`build` assembles the report from a recording (pure: the markdown, the CSV, what each PNG draws),
its sections in `replica`, `sweeps`, `restarts`, `configurations` and `timeline`; `write` puts it in
a folder and says what went wrong where. The PNGs are drawn by `slotop.actions.plots`.
"""
