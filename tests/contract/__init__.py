"""Contract tests: the released coding agents, run by the orchestrator's real CLI inside
its sandbox against a scripted model server on loopback (the full tier only)."""
