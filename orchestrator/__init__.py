"""orchestrator: run coding tickets through build stages; recover with one bounded model decision."""

__version__ = "0.1.0"
