"""Half precision: rewrite a model's float32 computation to float16 or bfloat16.

:func:`convert_precision` plans every node of every graph (:mod:`.plan`: what runs in half
and why the rest stays float32), rewrites types, constants, attributes and the Casts at the
boundary (:mod:`.apply`), and holds the result to the ONNX checker and strict shape
inference before returning it. A call of a model-local function runs in half through a copy of
the function specialized to it and converted the same way (:mod:`.functions`).
"""

from __future__ import annotations

import dataclasses
import logging

import onnx

from rewriter.errors import RewriterError
from rewriter.precision.apply import Applied, apply_plan
from rewriter.precision.decisions import Decision, KeptNode
from rewriter.precision.graphs import Graphs, unique_subgraph_names
from rewriter.precision.keep import check_op_types, keep_names
from rewriter.precision.plan import plan_precision
from rewriter.graph.names import first_few
from rewriter.precision.slots import HALF_TYPES

__all__ = ["convert_precision_proto", "PrecisionReport", "DTYPES"]

logger = logging.getLogger(__name__)
DTYPES = tuple(HALF_TYPES)


@dataclasses.dataclass
class PrecisionReport:
    """What the half-precision rewrite did."""

    dtype: str
    half_nodes: int
    kept: list  # a KeptNode for each float32 node left in float32
    applied: Applied
    half_by_op: dict
    target: str | None = None
    calibrated: int | None = None  # values measured beyond the half range (with calibration)
    half_at: tuple = ()  # positions (every graph's nodes, main graph first) of the nodes run or stored in half
    fitted: object = None  # a fallback.Fit, with --max-error
    float_bytes: tuple = (0, 0)  # (bytes of the source's float32 tensors, of those now stored in half): .sizes
    # op -> (the first later opset whose schema gives it the half type, or None; nodes kept float32 for want of it)
    half_from: dict = dataclasses.field(default_factory=dict)

    def summary_lines(self) -> list[str]:
        lines = [f"{self.half_nodes} node(s) run in {self.dtype}"
                 + (f" ({', '.join(f'{op} x{n}' for op, n in sorted(self.half_by_op.items()))})"
                    if self.half_by_op else ""),
                 f"{len(self.kept)} float32 node(s) stay float32"]
        by_reason: dict[str, list[str]] = {}
        for k in self.kept:
            by_reason.setdefault(k.reason, []).append(k.label)
        for reason, labels in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {reason}: {len(labels)} ({first_few(labels)})")
        a = self.applied
        lines += self.half_from_lines()
        lines.append(f"casts inserted: {a.casts}; constants converted {a.constants_converted}, stored in both "
                     f"types {a.constants_duplicated}"
                     + (f", clamped to float16's range {a.constants_clamped}" if self.dtype == "float16" else "")
                     + (f"; casts back to {self.dtype} avoided {a.cancelled_casts}" if a.cancelled_casts else "")
                     + (f"; weights rounded keeping their filters' sums {a.sums_kept}" if a.sums_kept else ""))
        if a.function_calls:
            lines.append(f"calls of local functions through {self.dtype} copies: {a.function_calls}")
        if self.calibrated is not None:
            lines.append(f"calibration: {self.calibrated} value(s) measured beyond {self.dtype}'s range")
        if self.fitted is not None:
            lines.append(self.fitted.line())
        from rewriter.precision.sizes import halved_line

        lines.append(halved_line(self.dtype, *self.float_bytes))
        return lines

    def half_from_lines(self) -> list[str]:
        """Which ``--opset`` gives the half type to the nodes kept float32 for want of it in their
        schema (``onnx.defs``); none for a runtime target, whose opsets and kernels decide."""
        found = {op: first for op, (first, _) in self.half_from.items() if first}
        if not found or self.target is not None:
            return []
        by_opset: dict[int, list[str]] = {}
        for op, first in sorted(found.items()):
            by_opset.setdefault(first, []).append(op)
        count = sum(n for first, n in self.half_from.values() if first)
        never = sorted(op for op, (first, _) in self.half_from.items() if not first)
        return [f"--opset {max(found.values())} gives {self.dtype} types to the {count} node(s) kept float32 for "
                f"want of one (" + "; ".join(f"{', '.join(ops)} from opset {v}" for v, ops in sorted(by_opset.items()))
                + ")" + (f"; no opset gives one to {', '.join(never)}" if never else "")]

    def changes_nothing(self, opset: int | None) -> str:
        """Why the rewrite changed nothing though another opset would let nodes run in the half
        type (a RewriterError's message), else ""."""
        lines = self.half_from_lines()
        if self.half_nodes or self.applied.weights_stored_half or not lines:
            return ""
        first = max(v for v, _ in self.half_from.values() if v)
        return (f"--dtype {self.dtype} would change nothing: no node runs in {self.dtype} at opset {opset}; "
                f"{lines[0]}: convert with --opset {first} --dtype {self.dtype} (opset={first} in Python)")

    def to_dict(self) -> dict:
        return {"dtype": self.dtype, "half_nodes": self.half_nodes, "half_by_op": self.half_by_op,
                "kept": [k.to_dict() for k in self.kept],
                "casts_inserted": self.applied.casts, "constants_converted": self.applied.constants_converted,
                "constants_duplicated": self.applied.constants_duplicated,
                "constants_clamped": self.applied.constants_clamped, "sums_kept": self.applied.sums_kept,
                "weights_stored_half": self.applied.weights_stored_half,
                "casts_avoided": self.applied.cancelled_casts, "function_calls": self.applied.function_calls, "target": self.target,
                "calibrated": self.calibrated, "max_error": None if self.fitted is None else self.fitted.to_dict(),
                "float32_tensor_bytes": self.float_bytes[0], "float32_tensor_bytes_halved": self.float_bytes[1],
                "halved_fraction": self.float_bytes[1] / self.float_bytes[0] if self.float_bytes[0] else None}


def _kernel_rule(target, dtype: str):
    """(op, since_version) -> a reason when the runtime targeted has no ``dtype`` kernel for it."""
    release = None if target is None else target.release_of("onnxruntime")
    if release is None:  # (a profile, whatever its name, has no ONNX Runtime kernel tables)
        return None
    from rewriter.targets.half_kernels import has_half_kernel

    def lacks(op: str, version: int) -> str:
        known = has_half_kernel(release, "", op, version, dtype)
        return f"no {dtype} CPU kernel for {op}-{version} in {target.name}" if known is False else ""

    return lacks


def convert_precision_proto(model: onnx.ModelProto, dtype: str, *, keep_io_types: bool = True,
                            keep_op_types=(), keep_nodes=(), target=None, base_dir: str | None = None,
                            measured: dict | None = None, keep_at: dict | None = None, weights_half: bool = False,
                            keep_io_precision: bool = False, _function_names: set | None = None,
                            index_memo: dict | None = None) -> tuple[onnx.ModelProto, PrecisionReport]:
    """A copy of ``model`` with its float32 computation in ``dtype``, and what was done.

    ``target`` is a :class:`rewriter.targets.Target` (or None); ``measured`` maps value names to
    magnitudes calibration saw beyond the half type's range (their producers and readers stay
    float32); ``keep_at`` maps positions of nodes (counted over every graph's nodes, the main
    graph's first, then each subgraph's as :class:`Graphs` lists them) to the reason each stays
    float32 (one that would otherwise run in half), with ``weights_half`` computing in float32
    from its constants stored in half (a Cast each). ``keep_io_precision``: the first consumers of
    each float graph input compute in float32 so (:mod:`.io_first`): the inputs are not rounded.
    ``index_memo``: a dict kept across conversions of the same model (``--max-error``'s trials):
    the value types inferred for the first serve the others.
    Raises RewriterError on a bad argument or when the result would not be valid.
    """
    if dtype not in HALF_TYPES:
        raise RewriterError(f"dtype must be one of {', '.join(HALF_TYPES)}, got {dtype!r}")
    keep_nodes = keep_names(keep_nodes, "--keep-nodes")
    if _function_names is None:  # (a function body's conversion has the names checked already)
        keep_op_types = check_op_types(model, keep_op_types)
    from rewriter.io.load import check_model, tensor_reader

    result = onnx.ModelProto()
    result.CopyFrom(model)
    read = tensor_reader(base_dir)
    unique_subgraph_names(result)  # sibling bodies may reuse names: one table per model needs them apart
    graphs = Graphs(result, types=None if index_memo is None else index_memo.get("types"))
    if index_memo is not None:
        index_memo.setdefault("types", dict(graphs.types))  # (as inferred: the rewrite adds to graphs.types)
    calls = None
    if result.functions:
        from rewriter.precision.functions import FunctionCalls

        def convert_body(standalone: onnx.ModelProto):
            return convert_precision_proto(standalone, dtype, keep_io_types=False, keep_op_types=keep_op_types,
                                           keep_nodes=keep_nodes, target=target, base_dir=base_dir,
                                           _function_names=calls.names)

        calls = FunctionCalls(result, dtype, convert_body, _function_names)
    every_key = [key for key, _ in graphs.nodes()]  # (keep_at's positions index it)
    keep_keys = {every_key[i]: reason for i, reason in (keep_at or {}).items()}
    plan = plan_precision(graphs, dtype, keep_op_types=keep_op_types, keep_nodes=keep_nodes,
                          lacks_kernel=_kernel_rule(target, dtype), read_tensor=read, measured=measured,
                          calls=calls, keep_keys=keep_keys, weights_half=weights_half,
                          keep_io_precision=keep_io_precision)
    half_at = tuple(i for i, key in enumerate(every_key)  # (a node computing from weights in half counts)
                    if key in plan.nodes and plan.nodes[key].decision != Decision.FLOAT32)
    known = {n.name for s in graphs.sites for n in s.graph.node} | {n.name for f in result.functions for n in f.node}
    unknown = set(keep_nodes) - known
    if unknown and _function_names is None:  # (a function body's conversion sees only its own nodes)
        raise RewriterError(f"--keep-nodes: no node named {', '.join(repr(n) for n in sorted(unknown))} in the model")
    half_by_op, kept, half_from = _tally(plan)
    function_calls = calls.finish(result, plan) if calls is not None else 0
    applied = apply_plan(result, graphs, plan, keep_io_types=keep_io_types, read_tensor=read)
    applied.function_calls = function_calls
    _set_ir_for_bfloat16(result, dtype)
    try:
        check_model(result, full_check=True)
    except Exception as e:  # noqa: BLE001 - any checker or inference complaint: nothing is returned
        if _same_complaint(model, e):
            logger.warning("the input has this problem already: %s", str(e).strip().splitlines()[0])
        else:
            raise RewriterError(f"the {dtype} rewrite would not be a valid model ({str(e).strip().splitlines()[0]}); "
                                "nothing was written: --keep-op-types / --keep-nodes the ops named") from None
    report = PrecisionReport(dtype, sum(half_by_op.values()), kept, applied, half_by_op,
                             target.name if target is not None else None,
                             None if measured is None else len(measured), half_at, half_from=half_from)
    from rewriter.precision.sizes import float_bytes

    report.float_bytes = float_bytes(model, result)
    return result, report


def _tally(plan) -> tuple[dict, list, dict]:
    """(nodes in half by op, a KeptNode for each node left float32, op -> (first opset giving it
    the half type, nodes kept for want of it)) of ``plan``."""
    from rewriter.graph.traversal import node_label

    half_by_op: dict[str, int] = {}
    kept, half_from = [], {}
    for key, p in plan.nodes.items():
        if p.half:
            half_by_op[p.node.op_type] = half_by_op.get(p.node.op_type, 0) + 1
        else:
            kept.append(KeptNode(key, node_label(p.node), p.node.op_type, p.decision, p.code, p.reason))
            if p.half_from is not None:  # for want of the half type in its schema
                first, count = half_from.get(p.node.op_type, (p.half_from or None, 0))
                half_from[p.node.op_type] = (first, count + 1)
    return half_by_op, kept, half_from


def _same_complaint(source: onnx.ModelProto, error: Exception) -> bool:
    """Whether the source model fails the checker with the same complaint (not the rewrite's doing)."""
    from rewriter.io.load import check_model

    try:
        check_model(source, full_check=True)
    except Exception as e:  # noqa: BLE001
        return str(e).strip().splitlines()[0] == str(error).strip().splitlines()[0]
    return False


def _set_ir_for_bfloat16(model: onnx.ModelProto, dtype: str) -> None:
    """bfloat16 tensors need IR version 4 or later (onnx's IR history)."""
    if dtype == "bfloat16" and model.ir_version < 4:
        model.ir_version = 4
