"""Run one ONNX model (or a batch) in the Apache TVM of the interpreter running this (PyPI ``apache-tvm``).

Usage and file formats: tools/runtime_run_common.py.  The model goes through TVM's Relax ONNX
frontend (``tvm.relax.frontend.onnx.from_onnx``, each input's dtype and shape as the model
declares them), is compiled by ``tvm.compile`` for target "llvm" (the default Relax pipeline
legalizes every op) and run on ``tvm.cpu()`` by a ``relax.VirtualMachine``, the inputs in the
model's input order.  Outputs are named by the model's graph outputs, in order (a ShapeTuple
result as int64).
"""

from __future__ import annotations

import sys

from runtime_run_common import Backend, main


class TVM(Backend):
    name = "tvm"

    def version(self) -> str:
        import tvm

        return tvm.__version__

    def config(self) -> dict:
        return {"frontend": "relax.frontend.onnx.from_onnx", "target": "llvm", "device": "cpu"}

    def load(self, path: str):
        import onnx
        import tvm
        from onnx import helper
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        model = onnx.load(path)
        init = {i.name for i in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in init]
        dtypes, shapes = {}, {}
        for i in inputs:
            t = i.type.tensor_type
            if i.type.HasField("tensor_type") and t.elem_type:
                dtypes[i.name] = str(helper.tensor_dtype_to_np_dtype(t.elem_type))
                if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
                    shapes[i.name] = [d.dim_value for d in t.shape.dim]
        mod = from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
        executable = tvm.compile(mod, target="llvm")
        vm = relax.VirtualMachine(executable, tvm.cpu())
        return [i.name for i in inputs], [o.name for o in model.graph.output], vm

    def run(self, prepared, feeds: dict) -> list:
        import numpy as np
        import tvm

        inputs, outputs, vm = prepared
        missing = [n for n in inputs if n not in feeds]
        if missing:
            raise KeyError(f"no input given for {missing}")
        result = vm["main"](*[tvm.runtime.tensor(np.array(feeds[n], order="C", copy=True)) for n in inputs])
        values = [result] if len(outputs) == 1 else list(result)  # one output comes bare (a ShapeTuple too)
        return [(name, _numpy(value)) for name, value in zip(outputs, values)]


def _numpy(value):
    """A VM result as numpy: a Tensor as itself, a ShapeTuple (what Shape gives when the shape is
    known) as int64, a Python scalar as a 0-d array."""
    import numpy as np

    if hasattr(value, "numpy"):
        return value.numpy()
    if isinstance(value, (bool, int, float)):
        return np.asarray(value)
    return np.asarray([int(v) for v in value], dtype=np.int64)


if __name__ == "__main__":
    sys.exit(main(TVM(), sys.argv[1:]))
