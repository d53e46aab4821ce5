from orchestrator.cli.main import entry

entry()
