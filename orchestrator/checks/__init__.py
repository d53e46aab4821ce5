"""Review checks: small programs run inside a clone that pass (exit 0) or fail (exit 1)."""
