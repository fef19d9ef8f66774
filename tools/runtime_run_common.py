"""What every runtime runner (tools/runtime_run_<runtime>.py) shares: the command line, the
batch loop and the files it reads and writes.

A runner is run by the python of that runtime's venv (tools/runtime_venvs.py) in a subprocess,
so it imports only numpy, the runtime and this file (the runner's own folder is on sys.path),
never project code:

    python runtime_run_X.py MODEL.onnx INPUTS.npz OUTPUTS.npz   # load, run, write outputs
    python runtime_run_X.py MODEL.onnx                          # load only
    python runtime_run_X.py --batch CASES.jsonl                 # many, one JSON line each

INPUTS.npz holds one array per graph input, keyed by input name (an input of a type numpy
lacks, bfloat16 or float8, as its raw bits under "NAME@TYPE"; the backend's ``exotic`` decides).  OUTPUTS.npz holds one array
per output (an ml_dtypes array, bfloat16 or float8, as its raw bits), keyed by the name the runtime gives it (the ONNX name where the runtime keeps it),
and the result line lists them in the runtime's order ("outputs").  The last line printed for a
model is one JSON object:

    {"ok": true, "runtime": "2026.4.1", "outputs": [NAME, ...]}
    {"ok": false, "runtime": "2026.4.1", "stage": "load"|"feed"|"run", "error": "..."}

and the exit status is 0 either way (a crash of the runtime itself shows as a non-zero status
with no JSON line; "stage:..." lines on stderr tell how far it got).  In --batch mode each line
of CASES.jsonl is {"id": ..., "model": PATH, "inputs": PATH|null, "outputs": PATH|null, "want":
[ONNX output names]}; the
runner first prints {"runtime": VERSION, "config": {...}}, then per case {"start": ID} and the
result line with "id" added, so that a caller can restart it after a case that crashed or hung.
"""

from __future__ import annotations

import json
import sys
import zipfile


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def stage(name: str) -> None:
    sys.stderr.write(f"stage:{name}\n")
    sys.stderr.flush()


def savez(np, path: str, arrays: dict) -> None:
    """np.savez without its keyword clash (an output may be named "file")."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=True)


def load_inputs(np, path: str) -> dict:
    with np.load(path, allow_pickle=True) as data:
        return {key: data[key] for key in data.files}


class FeedError(Exception):
    """The runner has no way to give the runtime this input (reported as stage "feed")."""


class Backend:
    """One runtime: ``load(path)`` makes something ``run(prepared, feeds)`` runs; ``run`` returns
    [(names, array), ...] in the runtime's output order, ``names`` the tensor names the runtime
    gives that output (several for OpenVINO; the one in the case's "want" list names it)."""

    name = "?"

    def version(self) -> str:
        raise NotImplementedError

    def config(self) -> dict:
        return {}

    def load(self, path: str):
        raise NotImplementedError

    def run(self, prepared, feeds: dict) -> list:
        raise NotImplementedError

    def exotic(self, bits, type_name: str):
        """What to feed for an input of a type numpy lacks (``type_name`` as ml_dtypes names it:
        bfloat16, float8_e4m3fn, int4, ...), given its raw bits (uint8 / uint16, one element
        each); FeedError when the runner cannot."""
        raise FeedError(f"the runner cannot feed a {type_name} input")


def _one(np, backend: Backend, model: str, inputs: str | None, outputs: str | None, version,
         want=()) -> dict:
    stage_ = "load"
    try:
        stage("load")
        prepared = backend.load(model)
        if inputs is None:
            return {"ok": True, "runtime": version}
        stage_ = "feed"
        feeds = {}
        for key, arr in load_inputs(np, inputs).items():
            name, _, type_name = key.partition("@")
            feeds[name] = backend.exotic(arr, type_name) if type_name else arr
        stage_ = "run"
        stage("run")
        values = backend.run(prepared, feeds)
        arrays, keys = {}, []
        for i, (names, value) in enumerate(values):
            names = [names] if isinstance(names, str) else sorted(n for n in names if n)
            name = next((n for n in want if n in names), names[0] if names else "")
            key = name if name and name not in arrays and not name.startswith("#") else f"#{i}"
            value = np.asarray(value)
            if value.dtype.kind == "V" or value.dtype.type.__module__.startswith("ml_dtypes"):
                value = value.view(np.uint16 if value.dtype.itemsize == 2 else np.uint8)  # raw bits
            arrays[key] = value
            keys.append(key)
        savez(np, outputs, arrays)
    except Exception as exc:  # noqa: BLE001 - every failure is a result here
        message = f"{type(exc).__name__}: {exc}"
        return {"ok": False, "runtime": version, "stage": stage_, "error": message[:4000]}
    return {"ok": True, "runtime": version, "outputs": keys}


def main(backend: Backend, argv: list[str]) -> int:
    import numpy as np

    if argv[:1] == ["--batch"] and len(argv) == 2:
        version = backend.version()
        emit({"runtime": version, "config": backend.config()})
        with open(argv[1], encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                case = json.loads(line)
                emit({"start": case["id"]})
                result = _one(np, backend, case["model"], case.get("inputs"), case.get("outputs"), version,
                              case.get("want") or ())
                emit({**result, "id": case["id"]})
        return 0
    if len(argv) not in (1, 3):
        sys.stderr.write(__doc__ or "")
        return 2
    try:
        version = backend.version()
    except Exception as exc:  # noqa: BLE001
        emit({"ok": False, "runtime": None, "stage": "import", "error": f"{type(exc).__name__}: {exc}"})
        return 0
    emit(_one(np, backend, argv[0], argv[1] if len(argv) == 3 else None, argv[2] if len(argv) == 3 else None,
              version))
    return 0
