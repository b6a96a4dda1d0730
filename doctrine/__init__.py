"""doctrine."""
