"""Types that ONNX's shape inference cannot give: the values behind ``com.microsoft`` ops
(QLinearConv and the other QLinear* ops of QOperator quantization, the Tokenizer of an skl2onnx
text pipeline), which only ONNX Runtime knows.

ONNX Runtime's own type inference (the C++ inference functions of its contrib ops, run when it
resolves the graph) answers: the model is loaded in a session with graph optimizations off and
the untyped values as extra graph outputs, whose types the session then reports. When no session
can be made, ``onnxruntime.tools.symbolic_shape_infer.SymbolicShapeInference`` is asked (it
knows a few of those ops and stops at the first it cannot shape; on the QOperator models of
rapidocr, nudenet and piper it typed 0-13% of such values, a session all of them; it is run with
``guess_output_rank`` off, so that it guesses no type from input 0 for an op it does not know).
Only element types are taken, never shapes.
"""

from __future__ import annotations

import logging

import onnx

__all__ = ["ORT_DOMAINS", "makes_ort_values", "onnxruntime_types"]

logger = logging.getLogger(__name__)

ORT_DOMAINS = ("com.microsoft",)  # com.microsoft and its subdomains (com.microsoft.nchwc, ...)


def _ort_domain(domain: str) -> bool:
    return any(domain == d or domain.startswith(d + ".") for d in ORT_DOMAINS)


def makes_ort_values(graph: onnx.GraphProto) -> bool:
    """Whether some node of ``graph`` (its own, not its subgraphs') is of an ONNX Runtime domain."""
    return any(_ort_domain(n.domain) for n in graph.node)


def onnxruntime_types(model: onnx.ModelProto, names):
    """(element type of each of ``names`` (main-graph values) that ONNX Runtime's inference
    gives, what answered) or (None, why nothing could)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError as e:
        return None, f"onnxruntime, whose type inference knows such ops, is not installed ({e})"
    names = [n for n in dict.fromkeys(names) if n]
    found, why = _from_session(model, names)
    if found is not None:
        return found, "onnxruntime's type inference"
    found, why_symbolic = _from_symbolic(model, names)
    if found:
        return found, "onnxruntime's symbolic shape inference (onnxruntime.tools.symbolic_shape_infer)"
    return None, f"onnxruntime could not type them ({why}; symbolic shape inference: {why_symbolic})"


def _from_session(model, names):
    import onnxruntime as ort

    from rewriter.io import external_data_dir
    from rewriter.io.tensors import EXTERNAL, PRIVATE_PREFIX, all_tensors, set_entries

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for t, _ in all_tensors(copy):  # the loader's lazy references, as ONNX Runtime reads them (cli.runner's way)
        if t.data_location == EXTERNAL:
            set_entries(t, {e.key: e.value for e in t.external_data if not e.key.startswith(PRIVATE_PREFIX)})
    declared = {o.name for o in copy.graph.output}
    copy.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names if n not in declared)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        with external_data_dir(model):
            session = ort.InferenceSession(copy.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - any refusal only means no answer from here
        return None, " ".join(str(e).split())[:300]
    wanted = set(names)
    found = {}
    for out in session.get_outputs():
        elem = _elem_type(out.type) if out.name in wanted else None
        if elem:
            found[out.name] = elem
    return found, None


def _from_symbolic(model, names):
    try:
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference
    except ImportError as e:
        return None, f"not available ({e})"
    from rewriter.io import without_big_data

    model = without_big_data(model)  # small constants (shapes, axes) read; big weights: type and dims
    try:
        # the loop of SymbolicShapeInference.infer_shapes, without the file it writes into the
        # working directory when inference is incomplete: a partial answer is still an answer
        inference = SymbolicShapeInference(2 ** 31 - 1, True, False, 0)
        inference._preprocess(model)
        while inference.run_:
            inference._infer_impl()
        known = inference.known_vi_
    except Exception as e:  # noqa: BLE001
        return None, f"failed ({' '.join(str(e).split())[:200] or type(e).__name__})"
    found = {}
    for name in names:
        vi = known.get(name)
        if vi is not None and vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.elem_type:
            found[name] = vi.type.tensor_type.elem_type
    return found, None if found else "it typed none of them"


_ELEM = {onnx.helper.tensor_dtype_to_string(t)[len("TensorProto."):].lower(): t
         for t in onnx.TensorProto.DataType.values() if t}


def _elem_type(type_string: str) -> int | None:
    """'tensor(uint8)' -> TensorProto.UINT8; None for anything else."""
    if type_string.startswith("tensor(") and type_string.endswith(")"):
        return _ELEM.get(type_string[len("tensor("):-1])
    return None
