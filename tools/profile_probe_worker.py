"""The side of tools/profile_probe.py that runs in the toolchain's own python.

    PYTHON tools/profile_probe_worker.py RUNNER.py CASES.jsonl

Imports only the standard library, numpy and RUNNER.py (which defines
``run(model_path: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]``, the outputs in
the graph's output order, and raises to refuse; optionally ``NAME``, a string naming the
runtime and its version). Each line of CASES.jsonl is {"id", "model", "inputs", "outputs"}: the
model file, an .npz of its inputs, the .npz to write the outputs to (keys "0", "1", ...).

Protocol, one JSON object per line on the original standard output: first
{"runner": NAME, "python": ..., "numpy": ...}, then per case {"start": ID} and
{"id": ID, "ok": true, "n": N} or {"id": ID, "ok": false, "error": "..."}. Everything the runner
or the runtime prints to standard output (Python's or the C library's) goes to standard error,
so it cannot mix with the protocol. A crash of the runtime ends the process without a result
line for the case started: the probe restarts the worker after it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
import traceback
import zipfile


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write(__doc__ or "")
        return 2
    runner_path, manifest = argv
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the C library's printf goes to stderr from now on
    sys.stdout = sys.stderr

    def emit(obj: dict) -> None:
        protocol.write(json.dumps(obj) + "\n")
        protocol.flush()

    import numpy as np

    # (the runner's folder is not put on sys.path: tools/runners/rknn.py would hide the rknn package)
    spec = importlib.util.spec_from_file_location("profile_runner", runner_path)
    runner = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(runner)
        run = runner.run
    except BaseException as exc:  # noqa: BLE001 - the runner cannot start: said once, then every case is open
        emit({"runner_error": f"{type(exc).__name__}: {exc}"[:2000]})
        return 3
    emit({"runner": str(getattr(runner, "NAME", "") or ""), "python": platform.python_version(),
          "numpy": np.__version__})
    with open(manifest, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for case in lines:
        emit({"start": case["id"]})
        try:
            with np.load(case["inputs"], allow_pickle=False) as data:
                feeds = {key: data[key] for key in data.files}
            values = run(case["model"], feeds)
            if isinstance(values, dict) or values is None:
                raise TypeError(f"run() returned {type(values).__name__}, not a list of arrays")
            arrays = [np.asarray(v) for v in values]
            with zipfile.ZipFile(case["outputs"], "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for i, arr in enumerate(arrays):
                    with zf.open(f"{i}.npy", "w", force_zip64=True) as out:
                        np.lib.format.write_array(out, arr, allow_pickle=False)
        except BaseException as exc:  # noqa: BLE001 - a refusal is any exception, SystemExit too
            if isinstance(exc, KeyboardInterrupt):
                raise
            message = f"{type(exc).__name__}: {exc}".strip()
            if not str(exc):
                message += " " + traceback.format_exc(limit=2)[-300:]
            emit({"id": case["id"], "ok": False, "error": message[:2000]})
            continue
        emit({"id": case["id"], "ok": True, "n": len(arrays)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
