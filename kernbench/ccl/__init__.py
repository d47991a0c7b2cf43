"""ccl layer."""
