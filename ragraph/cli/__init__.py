"""The `ragraph` command line: one module per subcommand, registered in `main.COMMANDS`."""
