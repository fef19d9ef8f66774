"""Directory mode: run convert / fold / optimize on every ``.onnx`` file below a directory.

The output directory mirrors the input one. Files run in ``-j`` worker processes through
the same per-file path as a single-file command (``rewriter.cli.runner.run_one``); a bad file is reported and
the run goes on. Exit status 0 when every file succeeded, 1 when any failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import io
import os
import sys

from rewriter.cli.runner import EXIT_ERROR, EXIT_OK, EXIT_PROBLEM, UsageError, run_one

__all__ = ["find_models", "run_directory", "FileResult"]


@dataclasses.dataclass
class FileResult:
    relpath: str
    status: int
    stdout: str
    stderr: str

    @property
    def message(self) -> str:
        lines = [ln for ln in (self.stderr if self.status else self.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("error:")]
        return (errors or lines or [""])[-1 if errors else 0].strip()


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
    one = argparse.Namespace(**vars(args))
    one.model = os.path.join(args.model, relpath)
    one.output = os.path.join(args.output, relpath)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            os.makedirs(os.path.dirname(one.output), exist_ok=True)
            status = run_one(one)
        except OSError as e:
            print(f"error: {one.output}: {e.strerror or e}", file=sys.stderr)
            status = EXIT_ERROR
        except Exception as e:  # a bug on one file must not stop the others; say what it was
            print(f"error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
            status = EXIT_ERROR
    prefix = one.model + ": "  # the summary line names the file already
    return FileResult(relpath, status, out.getvalue().replace(prefix, ""), err.getvalue().replace(prefix, ""))


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
    """Run ``args.command`` on every model below ``args.model`` into ``args.output``."""
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"{args.model} is a directory, so -o must be one too: {args.output} is a file")
    if args.jobs < 1:
        raise UsageError(f"-j must be at least 1, got {args.jobs}")
    parent = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(parent):
        raise UsageError(f"-o {args.output}: directory {parent} does not exist")
    files = find_models(args.model, exclude=args.output)
    if not files:
        raise UsageError(f"{args.model}: no .onnx files below this directory")
    os.makedirs(args.output, exist_ok=True)
    progress = _Progress(len(files))
    results: dict[str, FileResult] = {}
    if args.jobs == 1:
        for rel in files:
            results[rel] = _run_one(args, rel)
            progress.step(rel)
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {pool.submit(_run_one, args, rel): rel for rel in files}
            for future in concurrent.futures.as_completed(futures):
                rel = futures[future]
                try:
                    results[rel] = future.result()
                except Exception as e:  # the worker process died (e.g. out of memory)
                    results[rel] = FileResult(rel, EXIT_ERROR, "",
                                              f"error: worker failed: {type(e).__name__}: {e}")
                progress.step(rel)
    progress.close()
    failed = [r for r in results.values() if r.status != EXIT_OK]
    for rel in files:
        r = results[rel]
        print(f"{'ok  ' if r.status == EXIT_OK else 'FAIL'}  {rel}: {r.message}")
    print(f"{args.command}: {len(files) - len(failed)} of {len(files)} file(s) succeeded, "
          f"{len(failed)} failed; written below {args.output}")
    return EXIT_PROBLEM if failed else EXIT_OK

