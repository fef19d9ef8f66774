"""``python -m rewriter``."""

from rewriter.cli.main import entry

entry()
