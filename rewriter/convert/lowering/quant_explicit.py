"""Standard quantized ops written out for a runtime measured to compute them otherwise than ONNX
Runtime (a release's ``quantized_forms`` in ``rewriter/targets/data/<runtime>.json``, measured by
``tools/runtime_probe_quant.py``), as integer arithmetic and one float rounding step each, which
the runtimes compute as written:

- QuantizeLinear (``MlasQuantizeLinear``): x / scale in float32 (a division, not a product with
  the reciprocal), clamped to [qmin - zp, qmax - zp], rounded half to even, + zp; NaN gives qmin.
  Form "threshold_table" (quant_table.py) decides the code by comparing x with a table of ONNX
  Runtime's thresholds, for a runtime whose float32 division is not correctly rounded.
- QLinearConv / QLinearMatMul (``MlasRequantizeOutput`` after an exact int32 sum): ConvInteger /
  MatMulInteger (+ the int32 bias), float32(acc) * (x_scale * w_scale[c] / y_scale) (float32, in
  that order), clamped, rounded half to even, + zp. A weight zero point is folded into the constant
  weight when w - zp fits 8 bits, else (one per tensor) it is the integer op's own input.
  QLinearConv / ConvInteger "double" (quant_double.py): the int32 sum as an exact Conv in double.
- DequantizeLinear "fold_blocks" / "cast_and_scale" (quant_dequant.py): blocked constants folded;
  the latter also writes every other one as Cast, Sub and Mul (ONNX Runtime's float(x - zp) * s).
- ``QDQ`` "onnx_runtime_fusion" (quant_fusion.py): the QDQ groups first fused as ONNX Runtime does.

Every such node whose inputs are not what the form needs (scales or zero points fed at run time,
types other than uint8/int8 codes and float32 values, blocks) is a blocker naming the node."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert.lowering.quant_convtranspose import FORM as SEQUENTIAL, sequential_conv_transposes
from rewriter.convert.lowering.quant_dequant import dequantize
from rewriter.convert.lowering.quant_double import Keep as _Keep, Refused as _Refused, conv_accumulator, conv_integer
from rewriter.convert.lowering.quant_dynamic import dynamic_quantize
from rewriter.convert.lowering.quant_fusion import FORM, fuse_like_onnx_runtime
from rewriter.convert.lowering.quant_table import float_reduction, nan_free, quantized_constant, write_threshold_table
from rewriter.graph import traversal
from rewriter.graph.constants import constant_value
from rewriter.graph.names import fresh_name

__all__ = ["quantized_forms", "rewrite_quantized", "meet_quantized_forms"]
_QTYPES = {TensorProto.UINT8: np.uint8, TensorProto.INT8: np.int8}
_F32, _I32 = TensorProto.FLOAT, TensorProto.INT32


def quantized_forms(target) -> dict:
    """The release's measured ``quantized_forms`` entry ({} when the data has none): ``forms``,
    op -> {"form": the form written, "measured": what showed the op computed otherwise}; ``refused``,
    op -> why no form is exact there."""
    if target is None or target.runtime is None or not target.data_release:
        return {}
    from rewriter.targets.release_tables import load_table

    release = target.data_release.split()[-1]
    entry = load_table(f"{target.runtime}.json").get("releases", {}).get(release, {})
    return entry.get("quantized_forms", {})


class _Writer:
    """Nodes and initializers for one scope (graphs only: a function gets Constant nodes)."""

    def __init__(self, scope, used: set, base: str, read=numpy_helper.to_array):
        self.scope, self.used, self.base, self.read = scope, used, base, read
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def fresh(self, hint: str) -> str:
        return fresh_name(self.used, f"{self.base}_{hint}")

    def const(self, value, hint: str) -> str:
        name = self.fresh(hint)
        tensor = numpy_helper.from_array(np.asarray(value), name)
        if self.scope.is_function:
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.fresh("Constant"), value=tensor))
        else:
            self.inits.append(tensor)
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        out = out or self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=self.fresh(op_type), **attrs))
        return out


def _const(w: _Writer, node, i: int, scope, what: str, optional: bool = False):
    if i >= len(node.input) or not node.input[i]:
        if optional:
            return None
        raise _Refused(f"{what} (input {i}) is missing")
    v = constant_value(node.input[i], scope, w.read)
    kind, producer, _ = traversal.definition(node.input[i], scope)
    if v is None and kind == "node" and producer.op_type == "QuantizeLinear" and producer.domain in ("", "ai.onnx"):
        v = _folded_codes(producer, scope, w)  # the codes of constant weights
    if v is None:
        raise _Refused(f"{what} ('{node.input[i]}') is fed at run time: the written form needs it constant")
    return v


def _scale(v, what: str, size_ok=False) -> np.ndarray:
    if v.dtype != np.float32 or (v.size != 1 and not size_ok) or v.ndim > 1:
        raise _Refused(f"{what} of {v.dtype} and shape {list(v.shape)}: one float32 value"
                       f"{' or a vector' if size_ok else ''} is written out")
    if not np.all(np.isfinite(v)) or np.any(v == 0):
        raise _Refused(f"{what} holds a non-finite or zero value")
    return v.reshape(-1)


def _zero_point(v, what: str, size_ok=False) -> tuple[int, np.ndarray]:
    """(element type, values as int64) of a uint8 / int8 zero point."""
    elem = {np.dtype(t): k for k, t in _QTYPES.items()}.get(v.dtype)
    if elem is None or (v.size != 1 and not size_ok) or v.ndim > 1:
        raise _Refused(f"zero point {what} of {v.dtype} and shape {list(v.shape)}: uint8 / int8 "
                       f"{'values' if size_ok else 'scalars'} are written out")
    return elem, v.reshape(-1).astype(np.int64)


def _requantize(w: _Writer, v: str, zp, elem: int, out: str, nan_from: str | None = None) -> None:
    """clamp(v, qmin - zp, qmax - zp), round half to even, + zp, cast; NaN in ``nan_from`` -> qmin."""
    info, zp = np.iinfo(_QTYPES[elem]), int(zp)
    c = w.op("Clip", [v, w.const(np.float32(info.min - zp), "lo"), w.const(np.float32(info.max - zp), "hi")])
    y = w.op("Add", [w.op("Round", [c]), w.const(np.float32(zp), "zp")])
    if nan_from is None:
        w.op("Cast", [y], out, to=elem)
        return
    q = w.op("Cast", [y], to=elem)
    w.op("Where", [w.op("IsNaN", [nan_from]), w.const(np.array(info.min, _QTYPES[elem]), "qmin"), q], out)


def _requantize_axis(w: _Writer, v: str, zp: np.ndarray, elem: int, out: str, shape, nan_from=None) -> None:
    """:func:`_requantize` with one zero point per element of an axis (``shape``: broadcast shape)."""
    if zp.size == 1:
        _requantize(w, v, zp.reshape(-1)[0], elem, out, nan_from)
        return
    info = np.iinfo(_QTYPES[elem])
    zpf = zp.astype(np.float32).reshape(shape)
    c = w.op("Min", [w.op("Max", [v, w.const(np.float32(info.min) - zpf, "lo")]), w.const(np.float32(info.max) - zpf, "hi")])
    y = w.op("Add", [w.op("Round", [c]), w.const(zpf, "zp")])
    if nan_from is None:
        w.op("Cast", [y], out, to=elem)
        return
    q = w.op("Cast", [y], to=elem)
    w.op("Where", [w.op("IsNaN", [nan_from]), w.const(np.array(info.min, _QTYPES[elem]), "qmin"), q], out)


def _axis_shape(size: int, axis: int, rank: int | None) -> tuple:
    if size == 1:
        return ()
    if rank is None:
        raise _Refused("a per-axis scale on an input of unknown rank")
    axis = axis % rank if -rank <= axis < rank else None
    if axis is None:
        raise _Refused("the axis is outside the input's rank")
    return tuple(size if i == axis else 1 for i in range(rank))


def _quantize_linear(node, scope, w: _Writer, ranks: dict, form: str = "divide") -> None:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("block_size", 0):
        raise _Refused("block_size: blocked quantization is not written out")
    if ranks.get(node.input[0], (None, None))[0] not in (None, _F32):
        raise _Refused("a non-float32 input: the form divides in float32 as ONNX Runtime does")
    scale = _scale(_const(w, node, 1, scope, "y_scale"), "y_scale", size_ok=True)
    zv = _const(w, node, 2, scope, "y_zero_point", optional=True)
    if zv is None:
        elem, zp = attrs.get("output_dtype", TensorProto.UINT8) or TensorProto.UINT8, np.zeros(1, np.int64)
        if elem not in _QTYPES:
            raise _Refused(f"output_dtype {elem}: uint8 / int8 are written out")
    else:
        elem, zp = _zero_point(zv, "y_zero_point", size_ok=True)
    shape = _axis_shape(max(scale.size, zp.size), int(attrs.get("axis", 1)), ranks.get(node.input[0], (None, None))[1])
    x = node.input[0]
    folded = _folded_codes(node, scope, w)
    if folded is not None:
        w.op("Identity", [w.const(folded, "codes")], node.output[0])
        return
    try:  # (a QDQ group the fusion left: OpenVINO's, tract's and LiteRT's float sums are not ONNX Runtime's, measured)
        if form in ("threshold_table", "divide_in_double", "divide_by_fed"):
            float_reduction(x, scope, upstream=form == "divide_in_double")
        if form == "threshold_table":  # comparisons with ONNX Runtime's thresholds: quant_table.py
            write_threshold_table(w, x, scale, zp, elem, node.output[0], shape)
            return
    except ValueError as e:
        raise _Refused(str(e)) from None
    scale = scale.reshape(shape) if shape else scale.reshape(())
    if form == "divide_in_double":  # x * (1 / s) in double, rounded once to float32: x / s correctly rounded
        v = w.op("Cast", [w.op("Mul", [w.op("Cast", [x], to=TensorProto.DOUBLE),
                                        w.const(1.0 / scale.astype(np.float64), "reciprocal")])], to=_F32)
    elif form == "divide_by_fed":  # a divisor the runtime cannot fold into a reciprocal: s + 0 * Sign(x)
        fed = w.op("Add", [w.op("Mul", [w.op("Sign", [x]), w.const(np.float32(0), "zero")]), w.const(scale, "scale")])
        v = w.op("Div", [x, fed])
    else:
        v = w.op("Div", [x, w.const(scale, "scale")])
    _requantize_axis(w, v, zp, elem, node.output[0], shape, nan_from=None if nan_free(x, scope, ranks, w.read) else x)


def _folded_codes(node, scope, w: _Writer) -> np.ndarray | None:
    """A QuantizeLinear's codes when x, its scale and zero point are constants (else None)."""
    if (x := constant_value(node.input[0], scope, w.read)) is None:
        return None
    try:
        scale = _scale(_const(w, node, 1, scope, "y_scale"), "y_scale", size_ok=True)
        zv = _const(w, node, 2, scope, "y_zero_point", optional=True)
        elem, zp = (TensorProto.UINT8, np.zeros(1, np.int64)) if zv is None else _zero_point(zv, "", size_ok=True)
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        shape = _axis_shape(max(scale.size, zp.size), int(attrs.get("axis", 1)), x.ndim)
    except _Refused:
        return None
    if attrs.get("block_size", 0) or (zv is None and attrs.get("output_dtype", 0) not in (0, TensorProto.UINT8)):
        return None
    return quantized_constant(x, scale, zp, elem, shape)


def _weight_inputs(w: _Writer, wv: np.ndarray, zw: np.ndarray, axis_shape: tuple, hint: str) -> list[str]:
    """ConvInteger's / MatMulInteger's weight: w - zero point when it fits 8 bits, else (one zero point:
    ppocr's uint8 weights) w and its zero point, the op's last input."""
    if not np.any(zw):
        return [w.const(wv, hint)]
    folded = wv.astype(np.int64) - zw.reshape(axis_shape)
    for t in (np.int8, np.uint8):
        if folded.min() >= np.iinfo(t).min and folded.max() <= np.iinfo(t).max:
            return [w.const(folded.astype(t), hint)]
    if zw.size > 1:
        raise _Refused("w - w_zero_point does not fit 8 bits: ConvInteger / MatMulInteger take one zero point per tensor")
    return [w.const(wv, hint), w.const(wv.dtype.type(zw[0]), f"{hint}_zero_point")]


def _qlinear_conv(node, scope, w: _Writer, ranks: dict, form: str = "integer") -> None:
    sx = _scale(_const(w, node, 1, scope, "x_scale"), "x_scale")
    ex, zx = _zero_point(_const(w, node, 2, scope, "x_zero_point"), "x_zero_point")
    wv = _const(w, node, 3, scope, "w")
    sw = _scale(_const(w, node, 4, scope, "w_scale"), "w_scale", size_ok=True)
    _, zw = _zero_point(_const(w, node, 5, scope, "w_zero_point"), "w_zero_point", size_ok=True)
    sy = _scale(_const(w, node, 6, scope, "y_scale"), "y_scale")
    ey, zy = _zero_point(_const(w, node, 7, scope, "y_zero_point"), "y_zero_point")
    if wv.dtype not in (np.uint8, np.int8) or wv.ndim < 3:
        raise _Refused(f"w of {wv.dtype} and rank {wv.ndim}")
    cout, attrs = wv.shape[0], {a.name: helper.get_attribute_value(a) for a in node.attribute}
    per_c = (1, cout) + (1,) * (wv.ndim - 2)
    if form == "double":  # ConvInteger's int32 sum as a Conv in double (quant_double.py: TVM has no ConvInteger)
        acc = conv_accumulator(w, node.input[0], int(zx[0]), wv, zw, attrs)
    else:
        inputs = _weight_inputs(w, wv, zw, (-1,) + (1,) * (wv.ndim - 1) if zw.size > 1 else (), "w")
        acc = w.op("ConvInteger", [node.input[0], inputs[0], node.input[2], *inputs[1:]], **attrs)
    if len(node.input) > 8 and node.input[8]:
        bias = _const(w, node, 8, scope, "B")
        if bias.dtype != np.int32:
            raise _Refused(f"B of {bias.dtype}: int32 is written out")
        acc = w.op("Add", [acc, w.const(bias.reshape(per_c), "bias")])
    scales = ((sx[0] * sw) / sy[0]).astype(np.float32)  # ONNX Runtime: X_scale * W_scale[i] / Y_scale
    v = w.op("Mul", [w.op("Cast", [acc], to=_F32), w.const(scales.reshape(per_c) if scales.size > 1 else scales[0], "scale")])
    _requantize(w, v, zy[0], ey, node.output[0])


def _qlinear_matmul(node, scope, w: _Writer, ranks: dict, form: str = "integer") -> None:
    sa = _scale(_const(w, node, 1, scope, "a_scale"), "a_scale")
    _, za = _zero_point(_const(w, node, 2, scope, "a_zero_point"), "a_zero_point")
    sb = _scale(_const(w, node, 4, scope, "b_scale"), "b_scale", size_ok=True)
    _, zb = _zero_point(_const(w, node, 5, scope, "b_zero_point"), "b_zero_point", size_ok=True)
    sy = _scale(_const(w, node, 6, scope, "y_scale"), "y_scale")
    ey, zy = _zero_point(_const(w, node, 7, scope, "y_zero_point"), "y_zero_point")
    bv = constant_value(node.input[3], scope, w.read)
    if bv is not None:
        weight = _weight_inputs(w, bv, zb, (1, -1) if zb.size > 1 else (), "b")
        inputs = [node.input[0], weight[0], node.input[2], *weight[1:]]
    elif zb.size == 1:
        inputs = [node.input[0], node.input[3], node.input[2], node.input[5]]
    else:
        raise _Refused("b fed at run time with per-column zero points")
    acc = w.op("MatMulInteger", inputs)
    scales = ((sa[0] * sb) / sy[0]).astype(np.float32)
    v = w.op("Mul", [w.op("Cast", [acc], to=_F32), w.const(scales if scales.size > 1 else scales[0], "scale")])
    _requantize(w, v, zy[0], ey, node.output[0])


_FORMS = {"QuantizeLinear": _quantize_linear, "QLinearConv": _qlinear_conv, "QLinearMatMul": _qlinear_matmul,
          "DequantizeLinear": dequantize, "ConvInteger": conv_integer, "DynamicQuantizeLinear": dynamic_quantize}


def _value_ranks(model: onnx.ModelProto) -> dict:
    """name -> (element type, rank) from ONNX shape inference of the model (main graph)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 (a model inference cannot follow: ranks stay unknown)
        inferred = model
    g = inferred.graph
    return {v.name: (v.type.tensor_type.elem_type or None, len(v.type.tensor_type.shape.dim)
                     if v.type.tensor_type.HasField("shape") else None) for v in [*g.input, *g.output, *g.value_info]}


def rewrite_quantized(model: onnx.ModelProto, forms: dict, release: str,
                      read_tensor=numpy_helper.to_array) -> tuple[int, list[tuple]]:
    """Write every node of an op in ``forms`` (op -> form name: QuantizeLinear "divide",
    "divide_in_double", "divide_by_fed" or "threshold_table", QLinearConv / QLinearMatMul
    "integer", QLinearConv / ConvInteger "double", DequantizeLinear "fold_blocks" or "cast_and_scale",
    DynamicQuantizeLinear "exact_residual" or, kept as it is,
    "kept_if_exact_input") in ``model`` (in place) as that explicit form,
    reading constants with ``read_tensor`` (the model's external data relative to its directory:
    ``io.load.tensor_reader``). Returns (nodes rewritten, blockers as (node label, op, None,
    reason)); nothing is changed when there is a blocker."""
    ops = [o for o in forms if o in _FORMS]
    if not ops:
        return 0, []
    ranks = _value_ranks(model)
    used = {n for s in traversal.iter_scopes(model) for node in s.body.node for n in [*node.input, *node.output, node.name]}
    used |= {t.name for s in traversal.iter_scopes(model) if not s.is_function for t in s.body.initializer}
    used |= {v.name for v in model.graph.input}
    plans, blockers = [], []
    for scope in traversal.iter_scopes(model):
        for at, node in enumerate(scope.body.node):
            if node.domain not in ("", "ai.onnx") or node.op_type not in ops:
                continue
            w = _Writer(scope, used, node.name or node.op_type, read_tensor)
            try:
                if scope.opset is None or scope.opset < 11:
                    raise _Refused(f"opset {scope.opset}: the form's Clip and Round need opset 11")
                _FORMS[node.op_type](node, scope, w, ranks if scope.parent is None and not scope.is_function else {},
                                     forms[node.op_type])
            except _Keep:
                continue
            except _Refused as e:
                blockers.append((traversal.node_label(node, scope), node.op_type, node.name or None,
                                 f"{release} computes {node.op_type} otherwise than ONNX Runtime (measured), and "
                                 f"its explicit form cannot be written: {e}"))
                continue
            for written in w.nodes if node.name else []:  # the node writing the value keeps the name: convert's
                if node.output[0] in written.output:    # shape check matches the input's problems by node name
                    written.name = node.name
            plans.append((scope, at, w))
    if blockers:
        return 0, blockers
    replaced = {i for scope, at, _ in plans for i in scope.body.node[at].input if i}
    by_scope: dict[int, tuple] = {}
    for scope, at, w in plans:
        by_scope.setdefault(id(scope), (scope, {}))[1][at] = w
    for scope, writers in by_scope.values():
        body = []
        for at, node in enumerate(scope.body.node):
            body.extend(writers[at].nodes if at in writers else [node])
        del scope.body.node[:]
        scope.body.node.extend(body)
        if not scope.is_function:
            scope.body.initializer.extend(t for w in writers.values() for t in w.inits)
        scope.invalidate()
    from rewriter.graph import unused_values

    unused_values.remove_unused(model, only=replaced)  # a folded DequantizeLinear's codes (tract has no uint4)
    return len(plans), []


def _refusals(model: onnx.ModelProto, refused: dict, release: str) -> list[tuple]:
    """Nodes of an op the release computes otherwise with no exact form known (float inputs)."""
    found = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.domain in ("", "ai.onnx") and node.op_type in refused:
                found.append((traversal.node_label(node, scope), node.op_type, node.name or None,
                              f"{release} computes {node.op_type} otherwise than ONNX Runtime (measured: "
                              f"{refused[node.op_type]}), and no form it computes as written is known"))
    return found


def meet_quantized_forms(result: onnx.ModelProto, report, target, plan_only: bool, base_dir: str | None = None) -> None:
    """What the target's ``quantized_forms`` ask of ``result`` (converted, in place; external data
    relative to ``base_dir``): each op's explicit form, or its nodes blocked (listed in ``report``
    when ``plan_only``, else raised)."""
    entry = quantized_forms(target)
    if not entry:
        return
    from rewriter.convert.blockers import Blocker
    from rewriter.convert.planner import ConversionBlocked
    from rewriter.io.load import tensor_reader

    forms = {op: v["form"] for op, v in entry.get("forms", {}).items()}
    fused, why = (fuse_like_onnx_runtime(result, base_dir) if forms.get("QDQ") == FORM
                  else (0, ""))  # first
    if fused:
        report.rewrote_for_target([f"QDQ groups fused as ONNX Runtime fuses them: {fused} integer node(s)"])
    if forms.get("ConvTranspose") == SEQUENTIAL:  # (before the QuantizeLinear after it is looked at)
        done = sequential_conv_transposes(result)
        if done:
            report.rewrote_for_target([f"{done} QDQ group(s)' float ConvTranspose written as ONNX Runtime sums it "
                                       f"(one multiply-add per input channel, in double), which {target.name} "
                                       f"then computes as ONNX Runtime does (measured)"])
    found = _refusals(result, entry.get("refused", {}), target.name)
    if not plan_only or not found:
        count, more = rewrite_quantized(result, forms, target.name, tensor_reader(base_dir)) if not found else (0, [])
        found += more
        if count:
            report.rewrote_for_target([f"{count} quantized node(s) written as integer arithmetic with one "
                                       f"rounding step, which {target.name} computes as ONNX Runtime does (measured)"])
    blocked = [Blocker(label, op, "form", reason + (why if "a QDQ group's" in reason else ""),
                       "a runtime that computes it as ONNX Runtime does", name=name) for label, op, name, reason in found]
    if plan_only:
        report.blockers.extend(blocked)
    elif blocked:
        raise ConversionBlocked(blocked, f"for {target.name}")
