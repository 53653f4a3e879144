"""`slotop web`: the dashboard served to browsers, one app shared by every viewer.

The app runs once, as a process of its own under Textual's web driver; each browser gets what it
draws, and only the viewer holding the control reaches it with keys. This package imports neither
Textual nor the dashboard: it speaks to the app through its pipes.
"""
