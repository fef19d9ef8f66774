"""What one command learns about one model as it runs: set by the runner and the commands,
read by the checks and the summary. One object per model (a directory run makes one per file),
instead of attributes added to the argparse namespace."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

__all__ = ["RunState", "file_identity"]


@dataclasses.dataclass
class RunState:
    started: float | None = None  # perf_counter at the process's (or the command's) start
    process_started: float | None = None  # perf_counter of the interpreter's start, when main() is the process
    startup_s: float | None = None  # interpreter and imports, before the command began
    warnings: list[str] | None = None  # what --json reports under "warnings"
    input_model: Any = None  # the model as loaded
    frozen_inputs: list[str] | None = None  # --freeze-input-defaults: the inputs made constants (None: not asked)
    frozen_ir_before: int | None = None  # the input's IR version before freezing raised it
    input_inferred: Any = None  # a LazyInference of the input, when a check needs one
    input_invalid: bool = False  # the checker refused the input (--allow-invalid-input)
    input_complaint: str | None = None  # what the checker said of it
    input_layout: Any = None  # where the input's tensors live (external data files)
    rank_checks: list | None = None  # rank checks to finish before writing
    result_checked: bool = False  # the result passed the checker already
    result_strict_ok: bool = False  # the result passed strict shape inference already
    result_ort_ok: bool = False  # ONNX Runtime ran the result already
    half_result: str | None = None  # the half type of a --dtype result (a missing CPU kernel is not a defect)
    double_convs: str | None = None  # why a runtime target's result holds Conv in double (no CPU kernel: not a defect)
    verify_feeds: dict | None = None  # --verify's inputs when not random (the first --calibration-data sample)
    reordered_sums: list[str] = dataclasses.field(default_factory=list)  # ops decomposed with reordered sums
    # the identity (device, inode) of -o's file when its write began, () when there was none; None: not begun
    output_before: tuple | None = None
    verdict: str | None = None  # check: why the model fails, in one line (a directory run's per-file line)

    def output_written(self, path: str | None) -> bool:
        """Whether the write of ``path`` put its file in place (the rename, its last step, is done):
        the file there now is not the one there when the write began. What was written, not when."""
        return self.output_before is not None and path is not None and \
            file_identity(path) not in (None, self.output_before)


def file_identity(path: str) -> tuple | None:
    """(device, inode) of the file at ``path`` (symlinks followed), None when there is none. An
    atomic write renames a new file into place, so the identity changes with every write."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
