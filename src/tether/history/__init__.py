"""Pure functions over message lists: check, normalize, sanitize, trim, budget, prune."""
