"""The ``rewriter`` command line: argument parsing, commands, the runner shared by single-file
and directory mode, and directory (batch) mode."""

from rewriter.cli.main import main

__all__ = ["main"]
