"""plog.cli: the Typer command tree; thin layer over plog.engine and plog.formats."""
