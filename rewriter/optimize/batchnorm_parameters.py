"""The parameters of BatchNormalization, Conv, ConvTranspose and Gemm given by Constant nodes (as
Paddle exports write them) become initializers before the fusions run, so that a
BatchNormalization folds into the Conv or Gemm before it in the first round (onnxscript's fusion
reads initializers only; it used to take a second `optimize` of the result); the other Constant
nodes become initializers at the end of the pipeline, as before. Graphs only: a function body
has no initializers."""

from __future__ import annotations

import onnx_ir as ir

from rewriter.optimize.scopes import subgraphs
from rewriter.graph.schemas import is_default_domain

__all__ = ["LiftBatchNormParametersPass"]


_FUSED = frozenset({"BatchNormalization", "Conv", "ConvTranspose", "Gemm"})


class LiftBatchNormParametersPass(ir.passes.InPlacePass):
    """Constant nodes feeding the parameters (every input but the first) of the ops the
    BatchNormalization fusions join, lifted to initializers."""

    def __init__(self):
        super().__init__()
        self.lifted = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.lifted = 0
        if model.ir_version < 4:  # initializers outside the graph inputs need IR 4
            return ir.passes.PassResult(model, modified=False)
        graphs = [model.graph, *(g for node in list(model.graph) for g in subgraphs(node))]
        for graph in graphs:
            for node in list(graph):
                if node.op_type not in _FUSED or not is_default_domain(node.domain):
                    continue
                for value in node.inputs[1:]:
                    self._lift(graph, value)
        return ir.passes.PassResult(model, modified=bool(self.lifted))

    def _lift(self, graph: ir.Graph, value: ir.Value | None) -> None:
        producer = value.producer() if value is not None else None
        if (producer is None or producer.op_type != "Constant" or not is_default_domain(producer.domain)
                or producer.graph is not graph or set(producer.attributes) != {"value"}
                or producer.attributes["value"].is_ref() or value.is_graph_output()):
            return
        tensor = producer.attributes["value"].as_tensor()
        name = value.name
        value.name = None  # the initializer takes the name
        lifted = ir.Value(name=name, type=ir.TensorType(tensor.dtype), shape=tensor.shape, const_value=tensor)
        graph.register_initializer(lifted)
        ir.convenience.replace_all_uses_with(value, lifted)
        graph.remove(producer, safe=True)
        self.lifted += 1
