"""Modal screens: confirmations and help."""
