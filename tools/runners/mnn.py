"""Run an ONNX model in MNN (PyPI ``MNN``) for ``tools/profile_probe.py``.

MNN takes ONNX through its converter: the model becomes a .mnn file (what ``mnnconvert -f ONNX``
writes), which ``MNN.nn`` loads and runs on the CPU. The converter is called through ``_tools``, the
extension behind ``mnnconvert``: ``MNN.tools.mnnconvert`` also imports MNN's usage logger, which
runs ``pip install aliyun-log-python-sdk`` with whatever ``pip`` is first on PATH when that package
is absent. The converter reports an op it cannot convert by printing and writing no file; a file
that is not written is a refusal here, and so is a run that returns fewer outputs than the
model has (MNN's way of failing at run time: "Don't support type [Dropout]", an unsupported
element type). MNN keeps int64 as int32, bool as int32 and float64 or
float16 as float32: each input is given in the type of its placeholder.

The venv (the tests and tools/profile_probe.py examples look for it there):

    python -m venv ~/.cache/rewriter/runtime-venvs/mnn
    ~/.cache/rewriter/runtime-venvs/mnn/bin/pip install MNN==3.6.1 numpy
"""

import os
import tempfile

import numpy as np

import _tools  # noqa: I001  (MNN's converter; installed by the MNN wheel)
import MNN
import MNN.expr as F
import MNN.nn as nn

NAME = f"MNN {MNN.version()}"

_NUMPY = {"float": np.float32, "double": np.float64, "int": np.int32, "int64": np.int64, "int8": np.int8,
          "uint8": np.uint8}


def run(model_path, inputs):
    with tempfile.TemporaryDirectory() as tmp:
        converted = os.path.join(tmp, "model.mnn")
        _tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", model_path, "--MNNModel", converted,
                           "--bizCode", "rewriter"])
        if not os.path.exists(converted):
            raise RuntimeError("MNN's converter wrote no model (see its output for the ops it does not support)")
        module = nn.load_module_from_file(converted, [], [])
        info = module.get_info()
        feeds = []
        for name, var in zip(info["inputNames"], info["inputs"]):
            if name not in inputs:
                raise RuntimeError(f"MNN's model wants an input {name!r} the ONNX model does not have")
            kind = str(var.dtype).split(".")[-1]
            arr = np.ascontiguousarray(np.asarray(inputs[name]).astype(_NUMPY[kind]))
            feeds.append(F.const(arr, list(arr.shape), F.NCHW, getattr(F, kind)))
        outputs = module.forward(feeds)
        if len(outputs) != len(info["outputNames"]):  # MNN's way of failing at run time: it logs why
            raise RuntimeError(f"MNN computed {len(outputs)} of the model's {len(info['outputNames'])} outputs")
        return [np.array(F.convert(y, F.NCHW).read()) for y in outputs]
