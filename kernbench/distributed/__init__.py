"""distributed layer."""
