"""Run one ONNX model with whatever onnxruntime the interpreter running this has.

Meant to be run by the python of an old-release venv (see tools/ort_venvs.py), so it
imports only numpy and onnxruntime, never project code:

    python ort_run.py MODEL.onnx INPUTS.npz OUTPUTS.npz   # load, run, write outputs
    python ort_run.py MODEL.onnx                          # load only

The model is loaded in an InferenceSession with the CPU execution provider and default
session options (graph optimizations at their default level).  INPUTS.npz holds one
array per graph input, keyed by input name (unicode/bytes arrays are fed as string
tensors).  The last line printed on stdout is one JSON object:

    {"ok": true, "ort": "1.17.3", "kinds": {NAME: KIND, ...}}
    {"ok": false, "ort": "1.17.3", "stage": "load"|"run", "error": "..."}

and the exit status is 0 either way (a crash of onnxruntime itself shows as a non-zero
status with no JSON line; "stage:load" / "stage:run" lines on stderr tell how far it got).

OUTPUTS.npz encoding, per output NAME, by KIND:

* "tensor":   NAME -> the array (string tensors as a numpy unicode array).
* "sequence": a sequence of tensors; NAME#0, NAME#1, ... -> the arrays; KIND is
              "sequence:N" with N the length.
* "seq_map":  a sequence of maps (what ZipMap makes); NAME#keys -> the keys, sorted,
              as a 1-D array (int64 or unicode), NAME -> a 2-D float64 array with one
              row per map and one column per key in that order (NaN where a map
              lacks a key).
* "map":      one map; NAME#keys -> sorted keys, NAME#values -> values in that order.
* "skipped:<type>": anything else; nothing written.
"""

from __future__ import annotations

import json
import sys


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _stage(name: str) -> None:
    sys.stderr.write(f"stage:{name}\n")
    sys.stderr.flush()


def _tensor(np, value):
    arr = np.asarray(value)
    if arr.dtype == object:
        try:
            arr = arr.astype(str)
        except Exception:  # noqa: BLE001 - leave it as it is
            pass
    return arr


def _sorted_keys(np, keys):
    keys = sorted(keys)
    if keys and all(isinstance(k, str) for k in keys):
        return np.array(keys, dtype=str)
    return np.array(keys, dtype=np.int64)


def _encode(np, name: str, value, out: dict) -> str:
    if isinstance(value, dict):
        keys = _sorted_keys(np, value.keys())
        out[name + "#keys"] = keys
        out[name + "#values"] = np.array([value[k.item()] for k in keys])
        return "map"
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, dict) for v in value):
            keys = _sorted_keys(np, {k for v in value for k in v})
            rows = np.full((len(value), len(keys)), np.nan, dtype=np.float64)
            for i, v in enumerate(value):
                for j, k in enumerate(keys):
                    if k.item() in v:
                        rows[i, j] = v[k.item()]
            out[name + "#keys"] = keys
            out[name] = rows
            return "seq_map"
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            for i, v in enumerate(value):
                out[f"{name}#{i}"] = _tensor(np, v)
            return f"sequence:{len(value)}"
        return "skipped:" + type(value).__name__
    out[name] = _tensor(np, value)
    return "tensor"


def _savez(np, path: str, arrays: dict) -> None:
    """np.savez without its keyword clash (an output may be named "file")."""
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key, arr in arrays.items():
            with zf.open(key + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=True)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 3):
        sys.stderr.write(__doc__ or "")
        return 2
    model_path = argv[0]
    version = None
    stage = "load"
    try:
        _stage("load")
        import numpy as np
        import onnxruntime as ort

        version = ort.__version__
        session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        if len(argv) == 1:
            _emit({"ok": True, "ort": version})
            return 0
        stage = "run"
        _stage("run")
        with np.load(argv[1], allow_pickle=True) as data:
            feeds = {}
            for key in data.files:
                arr = data[key]
                if arr.dtype.kind in "US":
                    arr = arr.astype(str).astype(object)
                feeds[key] = arr
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, feeds)
        out: dict = {}
        kinds = {name: _encode(np, name, value, out) for name, value in zip(names, values)}
        _savez(np, argv[2], out)
    except Exception as exc:  # noqa: BLE001 - every failure is a result here
        _emit({"ok": False, "ort": version, "stage": stage, "error": f"{type(exc).__name__}: {exc}"})
        return 0
    _emit({"ok": True, "ort": version, "kinds": kinds})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
