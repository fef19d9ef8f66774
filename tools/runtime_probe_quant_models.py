"""QuantizeLinear's threshold table inside real models (rewriter/convert/lowering/quant_table.py):
each model of the quant corpus is converted with every QuantizeLinear of constant scales written
as the table (``convert --target openvino==R`` with the form asked for), run in the release with
every such node's input x and output codes exposed, and the release's codes are compared with ONNX
Runtime's codes of the release's own x (numpy's correctly rounded float32 division, what
``MlasQuantizeLinear`` computes). What the whole models compute is bench/bench_runtime_targets.py's.

    python tools/runtime_probe_quant_models.py 2026.4 magika_qdq nudenet_320n_qop ...

(models: /work/corpus/quant/NAME.onnx with its sample NAME.npz; the release's venv as
tools/runtime_venvs.py made it). One line a model: nodes, codes compared, codes that differ.
"""
import os
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rewriter.convert import for_target
from rewriter.convert.lowering import quant_explicit
from rewriter.convert.lowering.quant_table import onnx_runtime_codes
from tests.targets.runtime_runs import run_in

CORPUS = Path(os.environ.get("QUANT_CORPUS", "/work/corpus/quant"))


quant_explicit_forms = quant_explicit.quantized_forms  # the data's own entry


def table_forms(target) -> dict:
    """The release's quantized_forms with QuantizeLinear as the threshold table (not refused)."""
    entry = dict(quant_explicit_forms(target))
    entry["forms"] = {**entry.get("forms", {}), "QuantizeLinear": {"form": "threshold_table"}}
    entry["refused"] = {k: v for k, v in entry.get("refused", {}).items() if k != "QuantizeLinear"}
    return entry



def measure(name: str, release: str) -> str:
    model = onnx.load(CORPUS / f"{name}.onnx")
    with np.load(CORPUS / f"{name}.npz") as data:
        feeds = {k: data[k] for k in data.files}
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[1] in inits]
    with mock.patch.object(quant_explicit, "quantized_forms", table_forms):
        converted, _ = for_target.convert_for(model, runtime=f"openvino=={release}")
    values = {o for n in converted.graph.node for o in n.output} | {i.name for i in converted.graph.input}
    nodes = [n for n in nodes if n.input[0] in values and n.output[0] in values]
    typed = onnx.shape_inference.infer_shapes(converted).graph
    types = {v.name: v.type for v in [*typed.value_info, *typed.input, *typed.output]}
    exposed = {o.name for o in converted.graph.output}
    for v in {v for n in nodes for v in n.input[:1] + n.output[:1]} - exposed:
        out = helper.make_tensor_value_info(v, 0, None)
        if v in types:
            out.type.CopyFrom(types[v])
        converted.graph.output.append(out)
    ran = run_in("openvino", release, converted, feeds, timeout=900)
    if not ran.get("ok"):
        return f"{name} openvino {release}: refused: {str(ran.get('error'))[:200]}"
    got = dict(zip(ran["outputs"], ran["values"]))
    compared = differ = 0
    for n in nodes:
        x, y = np.asarray(got[n.input[0]], np.float32), np.asarray(got[n.output[0]])
        scale = inits[n.input[1]]
        zp = inits[n.input[2]] if len(n.input) > 2 and n.input[2] else np.uint8(0)
        elem = onnx.TensorProto.UINT8 if zp.dtype == np.uint8 else onnx.TensorProto.INT8
        zp = zp.astype(np.int64)
        if scale.size > 1:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % x.ndim
            shape = [-1 if i == axis else 1 for i in range(x.ndim)]
            scale, zp = scale.reshape(shape), zp.reshape(shape)
        want = onnx_runtime_codes(x, scale, zp, elem)
        compared += want.size
        differ += int(np.count_nonzero(want != y.reshape(want.shape).astype(np.int64)))
    return (f"{name} openvino {release}: {len(nodes)} QuantizeLinear nodes as the table, {differ} of {compared} codes "
            f"differ from ONNX Runtime's codes of OpenVINO's own input")


if __name__ == "__main__":
    for model_name in sys.argv[2:]:
        print(measure(model_name, sys.argv[1]), flush=True)
