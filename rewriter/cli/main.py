"""The ``rewriter`` command line's entry point. The CLI is the only part that prints or sets up logging."""

from __future__ import annotations

import logging
import sys

from rewriter.cli.parser import build_parser, check_usage
from rewriter.cli.runner import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, UsageError, one_line, run_one

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 problem, 2 bad input/usage, 130 interrupted)."""
    import os

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        directory = os.path.isdir(args.model)
        check_usage(args, directory)
    except UsageError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    _setup_logging(args)
    try:
        if directory:
            from rewriter.cli.batch import run_directory

            return run_directory(args)
        return run_one(args)
    except UsageError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `rewriter check model.onnx | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK


def _setup_logging(args) -> None:
    """warning lines on stderr; with -v also every INFO message of rewriter.* (each step taken)."""
    handler = logging.StreamHandler()
    handler.setFormatter(_LowercaseLevel("%(levelname)s: %(message)s"))  # "warning: ..." like ours
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logging.getLogger("rewriter").setLevel(logging.INFO if getattr(args, "verbose", False) else logging.WARNING)


class _LowercaseLevel(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace(record.levelname, record.levelname.lower(), 1)
