"""The Textual app. Nothing outside it imports it."""
