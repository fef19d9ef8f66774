"""Running one command on one model file: the path shared by single-file and directory mode.

Exit status: 0 success; 1 verification found a problem; 2 bad input, bad usage or an
impossible rewrite (one ``error: ...`` line on stderr, no output file written).
"""

from __future__ import annotations

import sys
import time

from rewriter.errors import RewriterError

__all__ = ["EXIT_OK", "EXIT_PROBLEM", "EXIT_ERROR", "UsageError", "VerificationFailed", "load_input",
           "preflight", "run_one", "one_line"]

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage (reported as one ``error:`` line, exit 2)."""


class VerificationFailed(Exception):
    """A rewrite's result failed verification (exit 1, nothing written)."""


def load_input(path: str):
    """Load and validate an input model (RewriterError naming the file and node when bad)."""
    from rewriter.io import load_model
    from rewriter.verify.validate import validate_model

    model = load_model(path)
    validate_model(model, path)
    return model


def preflight(args) -> None:
    """Refuse bad usage and bad input before any handler runs, so nothing is written."""
    import os

    output = getattr(args, "output", None)
    if output is not None:
        if os.path.isdir(output):
            raise UsageError(f"-o {output}: is a directory")
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            raise UsageError(f"-o {output}: directory {parent} does not exist")
    if getattr(args, "jobs", 1) < 1:
        raise UsageError(f"-j must be at least 1, got {args.jobs}")
    # loaded before any handler runs, so bad input is refused before anything is written
    args.input_model = load_input(args.model)


def run_one(args) -> int:
    """Run one command on one model file; errors become one ``error:`` line."""
    args.started = time.perf_counter()
    try:
        preflight(args)
        return args.handler(args)
    except UsageError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except VerificationFailed as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_PROBLEM
    except RewriterError as e:
        print(f"error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR


def one_line(text: str) -> str:
    return " ".join(text.split())
