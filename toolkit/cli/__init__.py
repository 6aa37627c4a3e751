"""The command line: `python -m toolkit COMMAND`."""

from toolkit.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
