"""The dashboard's actions as flows: load, sweep and restart, each talking to the app through `FlowHost`."""
