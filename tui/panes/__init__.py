"""The panes of the dashboard: each draws one frozen view and repaints only when it changes."""
