"""Numerical verification: run the original and the rewritten model on the same random
inputs and compare every output.

Inputs are drawn per graph input from its type and shape (symbolic and unknown dims bound
to 2 unless ``input_shapes`` pins them; the same symbol gets the same size everywhere). Rank-0
inputs (an If condition) are fed as 0-d arrays. Floats are drawn from
±[0.5, 1.5) so products stay in range; signed integers from [-3, 3], unsigned from [0, 3],
booleans uniformly.

Backend: ONNX Runtime (CPU, its own logging off) when it can load both models (opset >= 7), else
``onnx.reference.ReferenceEvaluator`` for both (opset < 7, or types ORT's CPU kernels lack
such as bfloat16, uint32, uint64 for ReduceProd). When only one backend runs a model, each
model runs on the backend that can. A model with external data (of any size) is written to a
temporary directory with :func:`rewriter.io.save_model` and both backends load it from there.

A graph input that gives a ReduceProd its axes cannot be stood in for by random values (most
random axes are invalid, so whether a run works would depend on the seed): such a model is
refused with a RewriterError, whatever the seed.

Comparison: integers, booleans and strings exactly; floats element-wise with
``|a - b| <= atol + rtol * |b|`` (NaN must match NaN, infinities must match), with these
defaults (``rtol`` / ``atol`` override them for every float type):

======== ======== ========
type     rtol     atol
======== ======== ========
float16  1e-2     1e-3
bfloat16 4e-2     1e-2
float    1e-4     1e-6
double   1e-10    1e-12
======== ======== ========

Not verified (``report.status``, not a pass, not a mismatch; see :mod:`.degenerate`): a float
output within tolerance whose reference is all zero, constant or all NaN/infinite, and random
inputs whose every dynamic dim took the default size.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile

import numpy as np
import onnx

from rewriter.errors import RewriterError
from rewriter.verify.numerics.rel_l2 import cast_feeds, compare_rel_l2
from rewriter.io.base_dir import proto_of
from rewriter.io.tensors import EXTERNAL, all_tensors
from rewriter.verify.numerics.degenerate import defaulted_dims, degenerate_reference
from rewriter.verify.numerics.int_floor import (compare_integers, floor_checks_nothing, integer_floors,
                                                   is_exact_kind)
from rewriter.verify.numerics.isolated import run_isolated
from rewriter.verify.numerics.random_inputs import SYMBOL_SIZE, axes_from_inputs, random_feeds, random_inputs
from rewriter.verify.numerics.report import NumericsReport, OutputComparison
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.passthrough_outputs import scans_written

__all__ = ["OutputComparison", "NumericsReport", "verify_numerics", "random_inputs", "runnable_model", "TOLERANCES"]

logger = logging.getLogger(__name__)

TOLERANCES = {  # elem_type -> (rtol, atol)
    onnx.TensorProto.FLOAT16: (1e-2, 1e-3),
    onnx.TensorProto.BFLOAT16: (4e-2, 1e-2),
    onnx.TensorProto.FLOAT: (1e-4, 1e-6),
    onnx.TensorProto.DOUBLE: (1e-10, 1e-12),
}


def _default_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if is_default_domain(o.domain):
            return o.version
    return 0


def _quiet_ort():
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # fatal only: a failure becomes our message, not a red log line
    return ort


def _run_ort(model, feeds: dict) -> list[np.ndarray]:
    ort = _quiet_ort()
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    # each model as ONNX defines it: ORT's fusions (QDQ into integer kernels, say) change a
    # quantized model's numbers by more than any tolerance, and differently for each side
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    run_options = ort.RunOptions()
    run_options.log_severity_level = 4
    return session.run(None, {k: v for k, v in feeds.items() if k in names}, run_options)


def _run_reference(model, feeds: dict) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(model)
    names = set(evaluator.input_names)
    with np.errstate(all="ignore"):  # numpy's overflow warnings are not findings: the comparison says
        return evaluator.run(None, {k: v for k, v in feeds.items() if k in names})


def _has_external_data(model: onnx.ModelProto) -> bool:
    return any(t.data_location == EXTERNAL for t, _ in all_tensors(model))


@contextlib.contextmanager
def runnable_model(model: onnx.ModelProto, base_dir: str | None, directory: str, name: str):
    """What the backends load: the proto itself, or for external data a file written with
    rewriter.io.save_model (ORT and onnx.reference resolve its data beside it)."""
    if not _has_external_data(model):
        yield model
        return
    from rewriter.io import save_model

    path = os.path.join(directory, name)
    save_model(model, path, external_data=None, base_dir=base_dir or os.getcwd())
    yield path


def _cut(text: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters, cut between words."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def _run_ort_isolated(model, feeds: dict) -> list[np.ndarray]:
    """ONNX Runtime in a child process: random inputs can make it crash (an integer division
    by zero is SIGFPE), which then is a reason the check names, not the end of the command."""
    return run_isolated(_run_ort, model, feeds)


_BACKENDS = {"onnxruntime": _run_ort_isolated, "reference": _run_reference}


def _try(model, feeds, backend, cache, opset) -> list | None:
    key = (id(model), backend)
    if key not in cache:
        if backend == "onnxruntime" and opset < 7:
            cache[key] = (None, "ONNX Runtime needs opset >= 7")
        else:
            try:
                cache[key] = ([np.asarray(o) for o in _BACKENDS[backend](model, feeds)], "")
            except Exception as e:  # noqa: BLE001 - any runtime failure means "cannot run here"
                logger.info("%s cannot run the model: %s", backend, e)
                cache[key] = (None, _cut(str(e)))
    return cache[key]


def _elem_of(array: np.ndarray) -> int:
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    except (KeyError, TypeError, ValueError):
        return 0


def _compare(name: str, elem: int, a: np.ndarray, b: np.ndarray, rtol: float | None = None,
             atol: float | None = None, scale_atol: float = 0.0) -> OutputComparison:
    dtype = onnx.TensorProto.DataType.Name(elem).lower() if elem else str(a.dtype)
    default_rtol, default_atol = TOLERANCES.get(elem, (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    scaled = ""
    if scale_atol and elem in TOLERANCES and a.size and a.dtype.kind == "f":
        finite = np.abs(a[np.isfinite(a)].astype(np.float64))
        largest = float(finite.max()) if finite.size else 0.0
        if scale_atol * largest > atol:
            atol, scaled = scale_atol * largest, f" ({scale_atol:g} x max|output| {largest:.3g}: reordered sums)"
    tol = "exact" if elem not in TOLERANCES else f"rtol={rtol:g}, atol={atol:g}{scaled}"
    if a.dtype != b.dtype:
        return OutputComparison(name, dtype, None, tol, False, f"dtype {a.dtype} vs {b.dtype}")
    if a.shape != b.shape:
        return OutputComparison(name, dtype, None, tol, False, f"shape {a.shape} vs {b.shape}")
    if a.size == 0:
        return OutputComparison(name, dtype, 0.0, tol, True)
    if a.dtype == object or a.dtype.kind in "USb":
        same = np.array_equal(a, b)
        return OutputComparison(name, dtype, 0.0 if same else None, tol, same, "" if same else "values differ")
    if elem not in TOLERANCES and a.dtype.kind in "iu":
        diff = np.abs(a.astype(object) - b.astype(object))
        worst = float(max(diff.reshape(-1)))
        return OutputComparison(name, dtype, worst, tol, worst == 0, "" if worst == 0 else "integers differ")
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is masked out below
        return _compare_floats(name, dtype, tol, a.astype(np.float64), b.astype(np.float64), rtol, atol)


def _compare_floats(name, dtype, tol, x, y, rtol, atol) -> OutputComparison:
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    finite = np.isfinite(x) & np.isfinite(y)
    worst = float(np.max(np.abs(x - y)[finite])) if finite.any() else 0.0
    if not np.array_equal(nan_x, nan_y):
        return OutputComparison(name, dtype, worst, tol, False, "NaN in different places")
    inf_ok = np.array_equal(np.where(np.isinf(x), x, 0), np.where(np.isinf(y), y, 0))
    if not inf_ok:
        return OutputComparison(name, dtype, float("inf"), tol, False, "infinities differ")
    close = np.abs(x - y)[finite] <= atol + rtol * np.abs(y[finite])
    ok = bool(close.all())
    return OutputComparison(name, dtype, worst, tol, ok, "" if ok else "beyond tolerance")


def verify_numerics(original, rewritten, *, seed: int = 0, rtol: float | None = None,
                    atol: float | None = None, input_shapes: dict[str, list[int]] | None = None,
                    base_dirs: tuple[str | None, str | None] = (None, None),
                    input_values: dict[str, list] | None = None, scale_atol: float = 0.0,
                    rel_l2: float | None = None, feeds: dict | None = None,
                    feeds_are: str = "the inputs given") -> NumericsReport:
    """Run both models on the same random inputs and compare every output (see module doc).

    Args:
        original, rewritten: ``onnx.ModelProto`` or ``onnx_ir.Model``; external data of any size.
        seed: seed of the random inputs.
        rtol, atol: tolerances for every float output instead of the per-type defaults.
        input_shapes: graph input name -> dims, pinning dynamic dims (default: each symbol 2).
        input_values: graph input name -> values (a list, or one number for a scalar input) fed
            instead of random ones (a sample rate, a flag, token ids).
        base_dirs: directories the two models' external data is relative to, when the
            references do not carry it (models from :func:`rewriter.io.load_model` do).
        feeds: graph input name -> array: run on these instead of random inputs (``feeds_are``
            says what they are, in the report).
        rel_l2: compare float outputs by relative L2 error ``||b - a|| / ||a||`` up to this
            (for a half-precision rewrite); the rewritten model's float inputs and outputs may
            then be of another float type (its inputs get the same values cast).
        scale_atol: for float outputs, an absolute tolerance of at least this times the largest
            magnitude of the original's output (for rewrites that reorder long float sums, such
            as a DFT written as a MatMul: their error grows with the output's scale).

    Raises:
        RewriterError: the original model cannot be run or fed (a graph input gives a
            ReduceProd its axes; a pinned shape does not fit; no backend runs it).
    """
    (a, base_a), (b, base_b) = _proto(original, base_dirs[0]), _proto(rewritten, base_dirs[1])
    base_dirs = (base_a, base_b)
    axes_inputs = axes_from_inputs(a) if feeds is None else []
    if axes_inputs:
        raise RewriterError("cannot verify numerically on random inputs: graph input "
                            f"{'; '.join(axes_inputs)} (random axes are not valid axes)")
    inputs = feeds_are if feeds is not None else ""  # (the report's word for them; "" for random ones)
    defaulted = defaulted_dims(a, input_shapes, input_values) if feeds is None else ""
    feeds = dict(feeds) if feeds is not None else random_feeds(a, input_shapes=input_shapes,
                                                               input_values=input_values, seed=seed)
    with tempfile.TemporaryDirectory(prefix="rewriter-verify-") as directory:
        with runnable_model(a, base_dirs[0], directory, "original.onnx") as ra_src, \
                runnable_model(b, base_dirs[1], directory, "rewritten.onnx") as rb_src:
            cast = {"feeds_b": cast_feeds(b, feeds)} if rel_l2 is not None else {}
            pair = _run_pair((a, ra_src), (b, rb_src), feeds, seed, **cast)
            floors = None  # a half rewrite's floor: the source on its inputs rounded as the result rounds them
            if rel_l2 is not None and not isinstance(pair, NumericsReport):
                floors = _half_floors(b, feeds, pair, ra_src)
    if isinstance(pair, NumericsReport):
        pair.inputs, pair.defaulted = inputs, defaulted
        return pair
    outs_a, be_a, outs_b, be_b, fallback = pair
    if fallback:  # ONNX Runtime refused the random inputs: often the sizes given to dynamic dims
        fallback += _sizes_hint(a)
    names_a = [o.name for o in a.graph.output]
    names_b = [o.name for o in b.graph.output]
    outs_a = _maps_as_tensors(outs_a, names_a, b)
    comparisons = []
    if len(outs_a) != len(outs_b):
        return NumericsReport([], be_a, be_b, seed,
                              error=f"{len(outs_a)} output(s) in the original, {len(outs_b)} in the rewritten",
                              inputs=inputs, defaulted=defaulted)
    by_name = sorted(names_a) == sorted(names_b)
    for i, name in enumerate(names_a):
        j = names_b.index(name) if by_name else i
        elem = a.graph.output[i].type.tensor_type.elem_type or _elem_of(outs_a[i])
        label = name if by_name or names_b[j] == name else f"{name} / {names_b[j]}"
        if rel_l2 is not None and outs_a[i].dtype.kind == "f" and outs_b[j].dtype.kind == "f":
            floor = floors[i] if floors else None
            comparisons.append(OutputComparison(label, *compare_rel_l2(outs_a[i], outs_b[j], rel_l2, floor), floor=floor))
            continue
        if rel_l2 is not None and floors and floors[i] and is_exact_kind(outs_a[i]) and is_exact_kind(outs_b[j]):
            dtype = onnx.TensorProto.DataType.Name(elem).lower() if elem else str(outs_a[i].dtype)
            comparisons.append(compare_integers(label, dtype, outs_a[i], outs_b[j], floors[i]))
            continue
        comparisons.append(_compare(label, elem, outs_a[i], outs_b[j], rtol, atol, scale_atol))
    for c, reference in zip(comparisons, outs_a):  # a pass on a reference that checks nothing is no pass
        c.degenerate = (degenerate_reference(reference) or floor_checks_nothing(c.floor)) if c.ok else ""
        c.ok = c.ok and not c.degenerate
    return NumericsReport(comparisons, be_a, be_b, seed, fallback=fallback, inputs=inputs, defaulted=defaulted)


def _proto(model, base_dir):
    """(``model`` as a proto, its data's directory), a Scan that passes a body input on as a body
    output written by an Identity: ONNX Runtime computes such a Scan wrongly as it is, and would
    give the original and the result the same wrong values (``rewriter.targets.passthrough_outputs``)."""
    proto, base = proto_of(model, base_dir)
    return scans_written(proto), base


def _maps_as_tensors(outs: list, names: list, rewritten) -> list:
    """``outs`` with each sequence of maps (ZipMap's) that ``rewritten`` made a tensor (its labels in
    metadata, :mod:`rewriter.convert.lowering.ml_zipmap`) stacked as that tensor: one row per map,
    one float32 column per label in the recorded order."""
    from rewriter.convert.lowering.ml_zipmap import zipmap_labels

    labels = zipmap_labels(rewritten)
    out = list(outs)
    for i, name in enumerate(names):
        maps = outs[i]
        if name in labels and maps.dtype == object and all(isinstance(m, dict) for m in maps.reshape(-1)):
            out[i] = np.asarray([[m[k] for k in labels[name]] for m in maps.reshape(-1)], np.float32)
    return out


def _half_floors(rewritten, feeds, pair, source) -> list | None:
    """Per output, the floor of a half rewrite: the source (at path ``source``, run on
    ``pair``'s engine) on its inputs rounded as ``rewritten`` rounds them."""
    from rewriter.precision.floor import input_floors

    rounded: list = []  # the source's outputs on the rounded inputs: the integer outputs' floor

    def run_rounded(f, run=_BACKENDS[pair[1]]):
        rounded[:] = run(source, f)
        return list(rounded)
    return integer_floors(input_floors(rewritten, [feeds], run_rounded, [pair[0]]), pair[0], rounded)


def _run_pair(first, second, feeds, seed, feeds_b=None):
    """(outputs_a, backend_a, outputs_b, backend_b), or a failed NumericsReport."""
    (a, src_a), (b, src_b) = first, second
    opsets = {id(src_a): _default_opset(a), id(src_b): _default_opset(b)}
    given = {id(src_a): feeds, id(src_b): feeds if feeds_b is None else feeds_b}
    cache: dict = {}

    def attempt(src, backend):
        return _try(src, given[id(src)], backend, cache, opsets[id(src)])[0]

    for backend in ("onnxruntime", "reference"):
        ra = attempt(src_a, backend)
        rb = attempt(src_b, backend)
        if ra is not None and rb is not None:
            return ra, backend, rb, backend, _fallback_reason(cache, src_a, src_b, backend, opsets)
    got_a = [(r, be) for be in ("onnxruntime", "reference") if (r := attempt(src_a, be)) is not None]
    if not got_a:
        errors = "; ".join(f"{be}: {cache[(id(src_a), be)][1]}" for be in ("onnxruntime", "reference"))
        raise RewriterError(f"cannot verify numerically: the original model does not run ({errors}){_sizes_hint(a)}")
    got_b = [(r, be) for be in ("onnxruntime", "reference") if (r := attempt(src_b, be)) is not None]
    if not got_b:
        missing = cache[(id(src_b), "onnxruntime")][1]
        if _lacks_kernel(missing) and attempt(src_a, "reference") is None:  # nothing to hold against it
            return NumericsReport([], got_a[0][1], "none", seed, unrunnable=(
                f"ONNX Runtime has no kernel for it: {missing}; onnx.reference cannot run the original either: "
                f"{cache[(id(src_a), 'reference')][1]}"))
        errors = "; ".join(f"{be}: {cache[(id(src_b), be)][1]}" for be in ("onnxruntime", "reference"))
        return NumericsReport([], got_a[0][1], "none", seed, error=errors)
    return got_a[0][0], got_a[0][1], got_b[0][0], got_b[0][1], _fallback_reason(cache, src_a, src_b, "", opsets)


def _lacks_kernel(problem: str) -> bool:
    """Whether ONNX Runtime refused a model for want of a kernel (no evidence against the model):
    NOT_IMPLEMENTED, or the type error of a half node's function body it expands for want of one."""
    return "NOT_IMPLEMENTED" in problem or (
        "Type Error" in problem and ("tensor(float16)" in problem or "tensor(bfloat16)" in problem))


def _sizes_hint(model: onnx.ModelProto) -> str:
    """How to give real sizes, when the model has dynamic input dims (each given the size 2, and
    two dims without a name are not taken to be one)."""
    dynamic = any(d.WhichOneof("value") != "dim_value" or d.dim_value < 0
                  for vi in model.graph.input for d in vi.type.tensor_type.shape.dim)
    return (f"; random inputs give every dynamic dim the size {SYMBOL_SIZE}: give real sizes with "
            "--input-shape NAME:DIMS (and fixed values with --input-value NAME:VALUES)") if dynamic else ""


def _fallback_reason(cache, src_a, src_b, backend, opsets) -> str:
    """Why ONNX Runtime did not run a model it should have (opset >= 7), when another engine did."""
    if backend == "onnxruntime":
        return ""
    for src in (src_a, src_b):
        entry = cache.get((id(src), "onnxruntime"))
        if entry is not None and entry[0] is None and opsets[id(src)] >= 7:
            return entry[1]
    return ""
