"""Where settings become the parts that reach a replica; `replica` and `restart` import apart.

Command runners, the dashboard and the command line build from here, so each part is built one
way; the two modules stay apart so a sweep, which never restarts, does not import the restart.
"""
