"""Directory mode: run convert / fold / optimize on every ``.onnx`` file below a directory.

The output directory mirrors the input one. Files run in ``-j`` worker processes through
the same per-file path as a single-file command (``rewriter.cli.runner.run_one``); a bad file is reported and
the run goes on. ``check`` takes a directory too (it writes nothing; ``-j`` as well). Exit status 0
when every file succeeded, 1 when any failed, 2 when the run cannot start (e.g. OUT cannot be
created), 130 when interrupted (Ctrl-C): the files already written stay written, those in progress
are not; the lines of the files that ended are printed, and the message counts the files written
(a file is written when a new file is in place at its output path, which the run tracks) and
those that failed.

An interrupt raises ``KeyboardInterrupt`` only inside one file's run
(:mod:`rewriter.cli.interrupts`); one that arrives anywhere else (between files, while a
worker hands back its result) is held until the next file would start, which then does not.
So every file whose output is in place has a result that says so, the count in the message is
the files written, and no worker is ever stopped inside the pool's own machinery (a worker
stopped while holding its queue's lock is how a run would hang).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import io
import json
import multiprocessing
import os
import signal
import sys

from rewriter.cli import interrupts
from rewriter.cli.run_state import RunState
from rewriter.cli.runner import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEM, UsageError, run_one

__all__ = ["find_models", "run_directory", "FileResult"]


@dataclasses.dataclass
class FileResult:
    relpath: str
    status: int
    stdout: str
    stderr: str
    completed: bool = True  # its output is in place (a command that writes), or it ran to its end (check)

    headline: str = ""  # the command's summary line (it names the file: the name is cut off)

    @property
    def message(self) -> str:
        """One line for the file: its error, else its summary line (check: its verdict)."""
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        if self.status and (lines or not self.headline):  # (check's failures are its verdict, on stdout)
            errors = [ln for ln in lines if ln.startswith("error:")]
            text = (errors or lines or [""])[-1].strip()
            return text[len("error: "):] if text.startswith("error: ") else text
        if self.headline:
            return self.headline
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else ""


def find_models(root: str, exclude: str | None = None) -> list[str]:
    """Relative paths of every ``.onnx`` file below ``root`` (sorted), outside ``exclude``."""
    root = os.path.abspath(root)
    exclude = os.path.abspath(exclude) if exclude else None
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if os.path.join(dirpath, d) != exclude)
        for name in filenames:
            if name.endswith(".onnx") and not name.startswith(".rewriter-"):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found)


def _run_one(args: argparse.Namespace, relpath: str) -> FileResult:
    """One file's run; an interrupt during it (or before it) gives a result with status 130 that
    says whether the output was already in place."""
    one = argparse.Namespace(**vars(args))
    one.run = RunState()  # this file's own
    one.model = os.path.join(args.model, relpath)
    if getattr(args, "output", None) is not None:
        one.output = os.path.join(args.output, relpath)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            with interrupts.armed():  # raises at once when Ctrl-C came between files
                if getattr(one, "output", None) is not None:
                    os.makedirs(os.path.dirname(one.output), exist_ok=True)
                status = run_one(one)
        except KeyboardInterrupt:  # temporary files are removed on the way out
            status = EXIT_INTERRUPTED
        except OSError as e:
            print(f"error: {getattr(one, 'output', None) or one.model}: {e.strerror or e}", file=sys.stderr)
            status = EXIT_ERROR
        except Exception as e:  # a bug on one file must not stop the others; say what it was
            print(f"error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
            status = EXIT_ERROR
    output = getattr(one, "output", None)  # what was written, not when: the file in place is a new one
    completed = one.run.output_written(output) if output is not None else status != EXIT_INTERRUPTED
    prefix = one.model + ": "  # the summary line names the file already
    headline = one.run.verdict or next((ln[len(prefix):].strip() for ln in out.getvalue().splitlines()
                                        if ln.startswith(prefix) and ln[len(prefix):].strip()), "")
    return FileResult(relpath, status, out.getvalue().replace(prefix, ""), err.getvalue().replace(prefix, ""),
                      completed, headline)


def _worker_init() -> None:
    """A worker stops at an interrupt only inside a file, never in the pool's machinery."""
    interrupts.install(armed=False)


def _work(args: argparse.Namespace, relpath: str) -> FileResult:
    return _run_one(args, relpath)


class _Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.enabled = sys.stderr.isatty()

    def step(self, name: str) -> None:
        self.done += 1
        if self.enabled:
            width = 30
            filled = width * self.done // max(self.total, 1)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} {name[:40]:<40}")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_directory(args: argparse.Namespace) -> int:
    """Run ``args.command`` on every model below ``args.model`` (into ``args.output`` when it writes)."""
    writes = args.command != "check"
    if writes and getattr(args, "output", None) is None:
        raise UsageError(f"{args.model} is a directory: -o OUT (a directory) is needed"
                         + (" (--plan takes one model file)" if getattr(args, "plan", False) else ""))
    if writes:
        if os.path.exists(args.output) and not os.path.isdir(args.output):
            raise UsageError(f"{args.model} is a directory, so -o must be one too: {args.output} is a file")
        if not os.path.exists(args.output) and args.output.endswith(".onnx"):
            raise UsageError(f"{args.model} is a directory, so -o must be one too: {args.output} looks like a model "
                             "file (a directory of that name would be made); give a directory name")
        parent = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(parent):
            raise UsageError(f"-o {args.output}: directory {parent} does not exist")
    files = find_models(args.model, exclude=args.output if writes else None)
    if not files:
        raise UsageError(f"{args.model}: no .onnx files below this directory")
    if writes:
        try:
            os.makedirs(args.output, exist_ok=True)
        except OSError as e:
            raise UsageError(f"-o {args.output}: cannot create the directory: {e.strerror or e}") from None
    progress = _Progress(len(files))
    results: dict[str, FileResult] = {}
    try:
        if getattr(args, "jobs", 1) == 1:
            with interrupts.disarmed():  # armed per file: a result is never lost to an interrupt
                for rel in files:
                    results[rel] = _run_one(args, rel)
                    if results[rel].status == EXIT_INTERRUPTED:
                        raise KeyboardInterrupt
                    progress.step(rel)
        else:
            _run_parallel(args, files, results, progress)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the count below is being made: not again
        progress.close()
        return _report(args, files, results, writes, interrupted=True)
    progress.close()
    return _report(args, files, results, writes)


def _report(args, files: list[str], results: dict, writes: bool, interrupted: bool = False) -> int:
    """One line (or JSON entry) per file that ran to its end, then the count; interrupted, the
    count on stderr is of the files whose output is in place (what was written, not what ended)
    and the files cut short have no line. Returns the exit status."""
    ended = [rel for rel in files if rel in results and results[rel].status != EXIT_INTERRUPTED]
    failed = [rel for rel in ended if results[rel].status != EXIT_OK]
    status = EXIT_INTERRUPTED if interrupted else EXIT_PROBLEM if failed else EXIT_OK
    if getattr(args, "json", False):
        docs = []
        for rel in ended:
            r = results[rel]
            try:
                doc = json.loads(r.stdout) if r.stdout.strip() else None
            except ValueError:
                doc = None
            docs.append({"file": rel, "exit_status": r.status, "result": doc,
                         "error": r.message if r.status else None})
        print(json.dumps({"schema": "rewriter.batch/1", "command": args.command, "ok": status == EXIT_OK,
                          "exit_status": status, **({"interrupted": True} if interrupted else {}), "files": docs},
                         indent=2))
    else:
        for rel in ended:
            r = results[rel]
            print(f"{'ok  ' if r.status == EXIT_OK else 'FAIL'}  {rel}: {r.message}")
    sys.stdout.flush()
    if interrupted:
        done = sum(1 for r in results.values() if r.completed)
        print(f"error: interrupted: {done} of {len(files)} file(s) "
              + (f"written below {args.output}" if writes else "checked") + (f", {len(failed)} failed" if failed else "")
              + ("; the file(s) in progress were not written" if writes else ""), file=sys.stderr)
    elif not getattr(args, "json", False):
        print(f"{args.command}: {len(files) - len(failed)} of {len(files)} file(s) succeeded, "
              f"{len(failed)} failed" + (f"; written below {args.output}" if writes else ""))
    return status


def _run_parallel(args, files: list[str], results: dict, progress: _Progress) -> None:
    futures: dict = {}
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs, initializer=_worker_init)
    try:
        with interrupts.disarmed():  # workers are forked here: they start with a handler that holds
            futures = {pool.submit(_work, args, rel): rel for rel in files}
        for future in concurrent.futures.as_completed(futures):
            rel = futures[future]
            try:
                results[rel] = future.result()
            except Exception as e:  # the worker process died (e.g. out of memory)
                results[rel] = FileResult(rel, EXIT_ERROR, "", f"error: worker failed: {type(e).__name__}: {e}")
            if results[rel].status == EXIT_INTERRUPTED:
                raise KeyboardInterrupt
            progress.step(rel)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in multiprocessing.active_children():  # also when only this process got it
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGINT)
        pool.shutdown(wait=True, cancel_futures=True)  # files in progress end at their interrupt
        for future, rel in futures.items():
            if rel not in results and future.done() and not future.cancelled() and future.exception() is None:
                results[rel] = future.result()
        raise
    pool.shutdown(wait=True)
