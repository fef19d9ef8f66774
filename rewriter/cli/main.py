"""The ``rewriter`` command line's entry point. The CLI is the only part that prints or sets up logging."""

from __future__ import annotations

import os
import sys
import time

from rewriter.cli import interrupts, lazy_imports

__all__ = ["main", "entry"]


def main(argv: list[str] | None = None, *, as_process: bool = False) -> int:
    """Run the command line; returns the exit status (0 ok, 1 problem, 2 bad input/usage, 130 interrupted).

    ``as_process``: this call is the whole process (the console script, ``python -m rewriter``),
    so the times printed count its start-up too."""
    interrupts.install(armed=True)  # first: Ctrl-C while the libraries load is one line too
    # ONNX Runtime (1.29 and newer) starts telemetry on import, which warns when the home directory
    # is not writable and connects out; a model converter has no business with either. Setting the
    # variable to 0 before running rewriter keeps ONNX Runtime's own default.
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    # this process is the command's own: sympy (onnx_ir's symbolic dims, about 0.4 s) loads only
    # if a symbolic dim's arithmetic needs it; a library user's process is left as it is
    lazy_imports.defer_sympy()
    parsed: list = []
    try:
        return _main(argv, parsed, as_process)
    except KeyboardInterrupt:
        args = parsed[0] if parsed else None
        output = getattr(args, "output", None)
        words = sys.argv[1:] if argv is None else argv  # what was asked, when it was not parsed yet
        command = getattr(args, "command", None) or next((w for w in words if not w.startswith("-")), None)
        writes = command in ("convert", "fold", "optimize") and not getattr(args, "plan", "--plan" in words)
        message = "interrupted"
        if args is not None and getattr(args, "run", None) is not None and args.run.output_written(output):
            message += f" after {output} was written"  # it came as the write ended: the output is complete
        elif writes:
            message += "; nothing was written"
        print(f"error: {message}", file=sys.stderr)
        if args is not None and getattr(args, "json", False):
            from rewriter.cli.summary import error_document, print_json

            print_json(error_document(args.command, args.model, message, 130))
        return 130


def _main(argv: list[str] | None, parsed: list, as_process: bool) -> int:
    from rewriter.cli.parser import build_parser, check_usage
    from rewriter.cli.runner import EXIT_ERROR, EXIT_OK, UsageError, one_line, run_one
    from rewriter.cli.run_state import RunState

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.run = RunState()  # what the run learns as it goes (one per file in a directory)
        parsed.append(args)
        directory = os.path.isdir(args.model)
        check_usage(args, directory)
        if not directory and as_process:  # the times printed are the process's, start-up included
            args.run.process_started = time.perf_counter() - (time.time() - _process_start())
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
    except BrokenPipeError:  # e.g. `rewriter check model.onnx | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK


_IMPORTED = time.time()


def _process_start() -> float:
    """When this process started (seconds since the epoch): from /proc on Linux, else when this
    module was imported."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        started = time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
        return started if 0 <= _IMPORTED - started < 30 else _IMPORTED  # a clock step: not trusted
    except (OSError, ValueError, IndexError):
        return _IMPORTED


def _setup_logging(args) -> None:
    """warning lines on stderr; with -v also every INFO message of rewriter.* (each step taken)."""
    import logging
    import warnings

    # the keys rewriter adds to tensors it reads lazily are its own (they are never written):
    # onnx's loader, handed such a tensor, is told nothing it needs to say
    warnings.filterwarnings("ignore", message=r"Ignoring unknown external data key")
    class LowercaseLevel(logging.Formatter):  # "warning: ..." like rewriter's own lines
        def format(self, record: logging.LogRecord) -> str:
            return super().format(record).replace(record.levelname, record.levelname.lower(), 1)

    handler = logging.StreamHandler()
    handler.setFormatter(LowercaseLevel("%(levelname)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logging.getLogger("rewriter").setLevel(logging.INFO if getattr(args, "verbose", False) else logging.WARNING)


def entry() -> None:
    """The ``rewriter`` console script and ``python -m rewriter``: :func:`main`, then exit with its
    status; an interrupt after the command ended does not change the status."""
    import signal

    status = main(as_process=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if status == 130:
        # A KeyboardInterrupt that passed through code a C extension ran (pybind11 modules being
        # imported) leaves CPython's "unhandled interrupt" flag set, and the interpreter would then
        # end the process by SIGINT (status -2) though it was handled: leave without finalizing.
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)
    sys.exit(status)
