"""Run one ONNX model (or a batch) through onnx2tf into the LiteRT interpreter of the interpreter
running this (PyPI ``onnx2tf`` and ``ai-edge-litert``).

Usage and file formats: tools/runtime_run_common.py.  The model is converted the way onnx2tf's
README shows, with its default ``flatbuffer_direct`` backend (no TensorFlow; the legacy
``tf_converter`` path is not installed and not measured): ``onnx2tf.convert(input_onnx_file_path,
output_folder_path, keep_shape_absolutely_input_names=[every input], non_verbose=True)``, and
its ``*_float32.tflite`` (float32 weights and compute; the float16 file beside it is ignored) runs
in ``ai_edge_litert.interpreter.Interpreter`` (its default op resolver and XNNPACK delegate, as a
deployment gets them; ``num_threads`` 1 unless REWRITER_RUNTIME_THREADS says otherwise).

Layout: ``keep_shape_absolutely_input_names`` keeps every input in the ONNX shape (onnx2tf
otherwise makes rank 3-5 inputs channel-last).  Outputs have no such option: onnx2tf leaves an
output channel-last (NWC / NHWC / NDHWC) when the op before it computes that way.  So an output
whose shape is not the ONNX output's (from onnx shape inference at the fed shapes) but is its
channel-last permutation is transposed back; any other shape is returned as it is (and judged so).
Where both shapes coincide (C equal to every spatial dim, e.g. LRN's [5, 5, 5, 5]), the LiteRT
graph decides: the TRANSPOSE ops on the path from an input to the output (through each op's first
non-constant input of the output's rank) are composed, and a composition that is the channel-last
permutation is undone (onnx2tf's own tensor layout labels were found wrong for such outputs).

Shapes: a model whose inputs all have static shapes is converted at "load"; one with a dynamic
dim is converted when it is run, from a copy whose input dims are the fed shapes (LiteRT models
are deployed static; a failure then shows at stage "run").  onnx2tf's ``overwrite_input_shape``
does not serve: with ``flatbuffer_direct`` the .tflite keeps the dims dynamic (-1), and XNNPACK
then fails to prepare many such graphs ("failed to reshape runtime").  Inputs are fed by name in the dtype
the interpreter asks (an int64 input onnx2tf made int32 is cast; strings as UTF-8 bytes, and string
outputs decoded).  onnx2tf's console output goes
to stderr; when conversion fails, its last lines are the error.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import tempfile

from runtime_run_common import Backend, main

CHANNEL_LAST = {3: (0, 2, 1), 4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


class LiteRT(Backend):
    name = "litert"

    def version(self) -> str:
        import onnx2tf

        return onnx2tf.__version__

    def config(self) -> dict:
        import ai_edge_litert

        return {"converter": "onnx2tf.convert (tflite_backend flatbuffer_direct, keep_shape_absolutely_input_names "
                             "= every input, *_float32.tflite)",
                "interpreter": f"ai_edge_litert {ai_edge_litert.__version__} Interpreter (default resolver, XNNPACK)",
                "num_threads": _threads(),
                "outputs": "channel-last outputs transposed back to the ONNX layout"}

    def load(self, path: str):
        import onnx

        model = onnx.load(path, load_external_data=False)
        init = {i.name for i in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in init]
        static = all(d.HasField("dim_value") for i in inputs for d in i.type.tensor_type.shape.dim) and all(
            i.type.HasField("tensor_type") and i.type.tensor_type.HasField("shape") for i in inputs)
        prepared = {"path": path, "inputs": [i.name for i in inputs], "outputs": [o.name for o in model.graph.output],
                    "converted": {}}
        if static:
            _converted(prepared, None)
        return prepared

    def run(self, prepared, feeds: dict) -> list:
        import numpy as np

        missing = [n for n in prepared["inputs"] if n not in feeds]
        if missing:
            raise KeyError(f"no input given for {missing}")
        shapes = {n: tuple(np.shape(feeds[n])) for n in prepared["inputs"]}
        interpreter, onnx_shapes = _converted(prepared, None if None in prepared["converted"] else shapes)
        details = interpreter.get_input_details()
        by_name = {d["name"]: d for d in details}
        for i, name in enumerate(prepared["inputs"]):
            d = _detail(details, by_name, prepared["inputs"], i, "input")
            arr = np.asarray(feeds[name])
            if tuple(d["shape"]) != arr.shape:
                interpreter.resize_tensor_input(d["index"], list(arr.shape), strict=False)
        interpreter.allocate_tensors()
        for i, name in enumerate(prepared["inputs"]):
            d = by_name.get(name) or details[i]
            interpreter.set_tensor(d["index"], _feed(np.asarray(feeds[name]), d["dtype"]))
        interpreter.invoke()
        out = []
        outputs = interpreter.get_output_details()
        by_out = {d["name"]: d for d in outputs}
        for i, name in enumerate(prepared["outputs"]):
            d = _detail(outputs, by_out, prepared["outputs"], i, "output")
            value = np.array(interpreter.get_tensor(d["index"]), copy=True)
            if value.dtype.kind == "S":  # LiteRT's strings are bytes
                value = np.char.decode(value, "utf-8")
            out.append((name, _onnx_layout(value, onnx_shapes.get(name), lambda: _path_perm(interpreter, d["index"]))))
        return out


def _feed(arr, dtype):
    """``arr`` as the interpreter's input type (strings as UTF-8 bytes)."""
    import numpy as np

    if arr.dtype.kind in "OUS":
        return np.char.encode(arr.astype(str), "utf-8")
    return np.array(arr, dtype=dtype, order="C")  # (np.ascontiguousarray would make a scalar 1-d)


def _threads() -> int:
    return int(os.environ.get("REWRITER_RUNTIME_THREADS") or 1)


def _converted(prepared: dict, shapes: dict | None):
    """(interpreter, {output: ONNX shape}) of the model converted at ``shapes`` (None: as declared)."""
    key = None if shapes is None else tuple(sorted(shapes.items()))
    if key not in prepared["converted"]:
        prepared["converted"][key] = _convert(prepared["path"], prepared["inputs"], shapes)
    return prepared["converted"][key]


def _detail(details: list, by_name: dict, names: list, i: int, what: str) -> dict:
    """The interpreter's detail of the ONNX ``what`` (input / output) ``names[i]``: by its name,
    else by its position when the counts agree; KeyError when neither finds it."""
    d = by_name.get(names[i]) or (details[i] if len(details) == len(names) else None)
    if d is None:
        raise KeyError(f"the LiteRT model has no {what} {names[i]!r} (has {sorted(by_name)})")
    return d


def _convert(path: str, inputs: list, shapes: dict | None):
    import onnx2tf
    from ai_edge_litert.interpreter import Interpreter

    folder = tempfile.mkdtemp(prefix="onnx2tf-")
    log = io.StringIO()
    source = _static_copy(path, shapes or {}, folder)  # a copy always: onnx2tf rewrites the file it is given
    kwargs = {"input_onnx_file_path": source, "output_folder_path": os.path.join(folder, "out"), "non_verbose": True,
              "keep_shape_absolutely_input_names": list(inputs) or None}
    here = os.getcwd()
    try:
        os.chdir(folder)  # onnx2tf writes scratch external-data files (uuid names) to the working directory
        with contextlib.redirect_stdout(log):
            try:
                onnx2tf.convert(**kwargs)
            except SystemExit as e:  # onnx2tf exits on some conversion errors
                raise RuntimeError(f"onnx2tf exited ({e.code})") from None
        found = [f for f in os.listdir(kwargs["output_folder_path"]) if f.endswith("_float32.tflite")]
        if not found:
            raise RuntimeError("onnx2tf wrote no float32 tflite")
        with open(os.path.join(kwargs["output_folder_path"], found[0]), "rb") as f:
            content = f.read()
    except Exception as e:
        tail = " | ".join(ln.strip() for ln in _plain(log.getvalue()).splitlines() if ln.strip())[-1500:]
        raise RuntimeError(f"{type(e).__name__}: {e}" + (f"; onnx2tf said: {tail}" if tail else "")) from None
    finally:
        os.chdir(here)
        sys.stderr.write(log.getvalue()[-4000:])
        shutil.rmtree(folder, ignore_errors=True)
    interpreter = Interpreter(model_content=content, num_threads=_threads())
    return interpreter, _onnx_output_shapes(path, shapes)


def _static_copy(path: str, shapes: dict, folder: str) -> str:
    """A copy of the model in ``folder`` whose graph inputs have the dims of ``shapes``. onnx2tf 2.6
    saves its simplified model over the file it converts (a model whose initializers are also graph
    inputs loses those inputs), so it is never given the caller's file."""
    import onnx

    model = onnx.load(path)
    for i in model.graph.input:
        if i.name in shapes:
            for d, n in zip(i.type.tensor_type.shape.dim, shapes[i.name]):
                d.Clear()
                d.dim_value = int(n)
    copy = os.path.join(folder, os.path.basename(path))
    onnx.save(model, copy, save_as_external_data=model.ByteSize() > 1_800_000_000)
    return copy


def _plain(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _onnx_output_shapes(path: str, shapes: dict | None) -> dict:
    """{output name: [dim or None]} by onnx shape inference, the inputs at ``shapes``."""
    import onnx

    try:
        model = onnx.load(path)
        for i in model.graph.input:
            if shapes and i.name in shapes:
                dims = i.type.tensor_type.shape.dim
                for d, n in zip(dims, shapes[i.name]):
                    d.Clear()
                    d.dim_value = int(n)
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # noqa: BLE001 - then the declared shapes are all there is
        inferred = onnx.load(path, load_external_data=False)
    out = {}
    for o in inferred.graph.output:
        t = o.type.tensor_type
        if t.HasField("shape"):
            out[o.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return out


def _matches(shape, onnx_shape) -> bool:
    return len(shape) == len(onnx_shape) and all(o is None or o == s for s, o in zip(shape, onnx_shape))


def _onnx_layout(value, onnx_shape, path_perm):
    """``value`` in the ONNX output's layout: a channel-last output transposed back (``path_perm()``
    decides when the shape cannot)."""
    import numpy as np

    perm = CHANNEL_LAST.get(value.ndim)
    if onnx_shape is None or perm is None:
        return value
    as_is, last = _matches(value.shape, onnx_shape), _matches(value.shape, [onnx_shape[p] for p in perm])
    if last and (not as_is or path_perm() == perm):
        return np.ascontiguousarray(np.transpose(value, np.argsort(perm)))
    return value


def _path_perm(interpreter, tensor: int):
    """The composed permutation of the TRANSPOSE ops between a graph input and ``tensor``:
    axis i of ``tensor`` is axis result[i] of the input (None: no such path of one rank)."""
    ops = interpreter._get_ops_details()
    producer = {t: op for op in ops if op["op_name"] != "DELEGATE" for t in op["outputs"]}  # XNNPACK's stand-ins
    ranks = {t["index"]: len(t["shape"]) for t in interpreter.get_tensor_details()}
    rank = ranks.get(tensor)
    axes = list(range(rank or 0))
    for _ in range(len(ops) + 1):
        op = producer.get(tensor)
        if op is None:
            return tuple(axes) if tensor in {d["index"] for d in interpreter.get_input_details()} else None
        if op["op_name"] == "TRANSPOSE":
            p = [int(v) for v in interpreter.get_tensor(op["inputs"][1])]
            axes = [p[a] for a in axes]
        sources = [t for t in op["inputs"] if t >= 0 and ranks.get(t) == rank
                   and (t in producer or t in {d["index"] for d in interpreter.get_input_details()})]
        if not sources:
            return None
        tensor = sources[0]
    return None


if __name__ == "__main__":
    sys.exit(main(LiteRT(), sys.argv[1:]))
