"""Ray placement of a run's workers."""
