"""The ops the project has no adapters for: type-only steps kept, the rest delegated.

``plan_other_ops`` sorts every other default-domain node whose schema differs at the target:
type-only steps (``rewriter.convert.type_only``) are kept as they are, the rest goes to
``onnx.version_converter``, which ``convert_main_graph`` and ``convert_function`` call with
the nodes already in target form held in a private domain out of its reach.
"""

from __future__ import annotations

import collections
import re

import onnx

from rewriter.convert.type_only import type_only_path
from rewriter.graph import traversal
from rewriter.errors import ConversionError

__all__ = ["HOLD_DOMAIN", "DEFAULT_DOMAINS", "plan_other_ops", "convert_main_graph", "convert_function", "release"]

HOLD_DOMAIN = "ai.rewriter.held"
DEFAULT_DOMAINS = ("", "ai.onnx")


_SCHEMA_CACHE: dict[tuple[str, int], int | None] = {}


def _since(op_type: str, opset: int) -> int | None:
    key = (op_type, opset)
    if key not in _SCHEMA_CACHE:
        try:
            _SCHEMA_CACHE[key] = onnx.defs.get_schema(op_type, opset, "").since_version
        except onnx.defs.SchemaError:
            _SCHEMA_CACHE[key] = None
    return _SCHEMA_CACHE[key]


def plan_other_ops(state, target: int):
    """Sort the default-domain ops without own adapters whose schema differs at ``target``.

    Type-only steps (see ``rewriter.convert.type_only``) are taken here: those nodes are held out of the
    version converter's reach like the nodes of own adapters. The rest is delegated to the converter.
    Raises when an op does not exist at the target opset.
    """
    report = state.report
    type_only: list[onnx.NodeProto] = []
    delegated: set[int] = set()
    keep_alive = []  # ids identify protobuf wrappers only while they are alive
    in_graph, in_functions = collections.Counter(), collections.Counter()
    ours = {id(n) for n in state.held}
    for scope in state.scopes:
        counter = in_functions if scope.root.is_function else in_graph
        for node in scope.body.node:
            if node.domain not in DEFAULT_DOMAINS or id(node) in ours:
                continue
            source_opset = scope.opset or target
            source = _since(node.op_type, source_opset)
            dest = _since(node.op_type, target)
            if dest is None:
                raise ConversionError(
                    f"{traversal.node_label(node, scope)}: operator {node.op_type} does not exist "
                    f"at opset {target}"
                )
            if source == dest:
                continue
            if type_only_path(node, source_opset, target) or \
                    type_only_path(node, source_opset, target, state.types_for(scope).get):
                type_only.append(node)
            else:
                _refuse_known_converter_defects(node, scope, source_opset, target, state)
                delegated.add(id(node))
                keep_alive.append(node)
                counter[node.op_type] += 1
    # A control-flow node is only kept as it is when nothing inside it needs the converter.
    for node in type_only:
        if node.op_type in ("If", "Loop") and any(id(n) in delegated for g in traversal.subgraphs(node) for n in traversal.all_nodes(g)):
            delegated.add(id(node))
            in_graph[node.op_type] += 1
    for node in type_only:
        if id(node) not in delegated:
            state.held.append(node)
            report.type_only[node.op_type] += 1
    return in_graph, in_functions


# op -> the directions across opset 13 in which the converter keeps ``axis`` as it is
_SOFTMAX_LIKE = {"Softmax": ("down",), "LogSoftmax": ("down",), "Hardmax": ("down", "up")}


def _refuse_known_converter_defects(node, scope, source_opset, target, state) -> None:
    """Refuse steps where onnx.version_converter is known to return a model computing something else.

    Softmax, LogSoftmax and Hardmax changed what ``axis`` means at 13 (one axis instead of
    "flatten from axis"). Going down, the converter keeps ``axis`` as it is, which is only
    right when it is the last dimension; going up it reshapes correctly for Softmax and
    LogSoftmax but not for Hardmax (each checked against ONNX Runtime in tests/test_compat.py).
    """
    directions = _SOFTMAX_LIKE.get(node.op_type)
    if directions is None or not min(source_opset, target) <= 12 < 13 <= max(source_opset, target):
        return
    if ("up" if target > source_opset else "down") not in directions:
        return
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1 if source_opset < 13 else -1)
    t = state.types_for(scope).get(node.input[0])
    rank = len(t.tensor_type.shape.dim) if t is not None and t.tensor_type.HasField("shape") else None
    if rank is None or axis not in (rank - 1, -1):
        raise ConversionError(
            f"{traversal.node_label(node, scope)}: {node.op_type} with axis={axis} "
            f"{'(rank unknown)' if rank is None else f'on rank {rank}'} cannot be converted across "
            f"opset 13, where the meaning of axis changed; onnx.version_converter would keep the "
            f"axis and compute something else (only the last axis converts)"
        )


def _run_version_converter(model: onnx.ModelProto, target: int, what: str) -> onnx.ModelProto:
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, target)
    except Exception as e:  # the C++ converter raises RuntimeError/ValidationError with a message
        message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        match = re.search(r"(?:for|of) (\w+)", message)
        op = f"operator {match.group(1)}" if match else "an operator"
        source = traversal.opset_version(model.opset_import)
        raise ConversionError(
            f"{what}: onnx.version_converter cannot convert {op} from opset {source} to {target}: "
            f"{message.split('failed: ')[-1]}"
        ) from None


def release(graph_like) -> None:
    for node in traversal.all_nodes(graph_like):
        if node.domain == HOLD_DOMAIN:
            node.domain = ""


def convert_main_graph(result: onnx.ModelProto, target: int) -> None:
    """Convert the main graph's nodes with the converter; everything else of the graph stays ours.

    The converter rebuilds the graph from its own IR, which knows nothing of sparse
    initializers or metadata_props: only its nodes (and initializers it adds) are taken.
    """
    graph = result.graph
    shell = onnx.ModelProto(ir_version=result.ir_version, graph=graph)
    for sparse in graph.sparse_initializer:  # the converter cannot read them: inputs stand in
        shell.graph.input.append(onnx.helper.make_tensor_value_info(
            sparse.values.name, sparse.values.data_type, list(sparse.dims)))
    del shell.graph.sparse_initializer[:]
    shell.opset_import.extend(result.opset_import)
    shell.opset_import.add(domain=HOLD_DOMAIN, version=1)
    converted = _run_version_converter(shell, target, "main graph")
    _take_nodes(graph, converted.graph.node)
    known = {t.name for t in graph.initializer}
    graph.initializer.extend(t for t in converted.graph.initializer if t.name not in known)


def convert_function(result: onnx.ModelProto, fn: onnx.FunctionProto, target: int) -> None:
    """Run the version converter on a function body wrapped in a temporary model."""
    graph = onnx.helper.make_graph(
        list(fn.node), f"{fn.name}_body",
        [onnx.helper.make_empty_tensor_value_info(i) for i in fn.input],
        [onnx.helper.make_empty_tensor_value_info(o) for o in fn.output],
    )
    shell = onnx.helper.make_model(graph, opset_imports=[*fn.opset_import,
                                   onnx.helper.make_opsetid(HOLD_DOMAIN, 1)])
    shell.ir_version = result.ir_version
    converted = _run_version_converter(shell, target, f"function '{fn.domain}:{fn.name}'")
    _take_nodes(fn, converted.graph.node)


def _take_nodes(body, converted_nodes) -> None:
    """Replace ``body``'s nodes by the converted ones, keeping each node's name, doc string
    and metadata_props (the converter drops the metadata), matched by the values it produces."""
    details = {}
    for node in traversal.all_nodes(body):
        key = next((o for o in node.output if o), None)
        if key is not None:
            details[key] = (node.name, node.doc_string, list(node.metadata_props))
    new = list(converted_nodes)
    del body.node[:]
    body.node.extend(new)
    for node in traversal.all_nodes(body):
        key = next((o for o in node.output if o), None)
        if key not in details:
            continue
        name, doc, metadata = details[key]
        if name and not node.name:
            node.name = name
        if doc and not node.doc_string:
            node.doc_string = doc
        if metadata and not node.metadata_props:
            node.metadata_props.extend(metadata)
