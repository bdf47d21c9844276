"""Support: cases and their comments."""
