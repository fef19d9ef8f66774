"""The ``rewriter`` command line's entry point. The CLI is the only part that prints or sets up logging."""

from __future__ import annotations

import logging
import sys

from rewriter.cli.parser import build_parser
from rewriter.cli.runner import EXIT_ERROR, EXIT_OK, UsageError, one_line, run_one

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    handler = logging.StreamHandler()
    handler.setFormatter(_LowercaseLevel("%(levelname)s: %(message)s"))  # "warning: ..." like ours
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[handler])
    try:
        import os

        if args.command in ("convert", "fold", "optimize") and os.path.isdir(args.model):
            from rewriter.cli.batch import run_directory

            return run_directory(args)
        return run_one(args)
    except UsageError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rewriter check model.onnx | head`: the reader left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK


class _LowercaseLevel(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace(record.levelname, record.levelname.lower(), 1)
