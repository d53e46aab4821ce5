"""One module per subcommand: ``command(dependencies..., out) -> exit code``."""
