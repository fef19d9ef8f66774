"""Delegation to ``onnx.version_converter`` for the steps rewriter has no adapter for and
onnx's adapter is known to be correct (``rewriter.convert.steps.ONNX_CORRECT``).

``convert_main_graph`` and ``convert_function`` call the converter with every node already in
target form held in a private domain out of its reach, then take back its nodes only.
"""

from __future__ import annotations

import re

import onnx

from rewriter.graph import traversal
from rewriter.errors import ConversionError

__all__ = ["HOLD_DOMAIN", "convert_main_graph", "convert_function", "release"]

HOLD_DOMAIN = "ai.rewriter.held"


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
