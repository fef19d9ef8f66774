"""Merge initializers of equal dtype, shape and contents, whatever their size.

onnx_ir's ``DeduplicateInitializersPass`` compares only tensors of at most ``size_limit``
elements (1,024 by default) and its hashed variant reads every tensor of the model. Here
tensors are first grouped by (dtype, shape), which the model says without reading any data,
then by 64 elements spread over each tensor (a memory-mapped external tensor reads only the
pages they are on): only tensors alike in all three are read whole and compared byte for byte
(equal layers of a transformer have equal shapes, not equal samples). Real duplicates are what folding makes: a weight the exporter shared through
``Identity`` and a Transpose of it fold into two equal copies (a torch legacy export's
TransformerEncoder stored six of its weights twice).

Graph inputs and outputs are never merged (an overridable initializer is part of the
interface); the first initializer of a group (the source's, before those folding added) keeps
its name. Each graph on its own, as in onnx_ir.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx_ir as ir

__all__ = ["MergeEqualInitializersPass"]


_SAMPLE = 64


def _contents(tensor) -> bytes:
    if tensor.dtype == ir.DataType.STRING:
        return b"".join([len(s).to_bytes(8, "little") + s for s in tensor.string_data()])
    return np.ascontiguousarray(tensor.numpy()).tobytes()


def _sample(tensor) -> bytes:
    if tensor.dtype == ir.DataType.STRING:
        return _contents(tensor)
    flat = tensor.numpy().reshape(-1)
    return np.ascontiguousarray(flat[:: max(1, flat.size // _SAMPLE)][:_SAMPLE]).tobytes()


class MergeEqualInitializersPass(ir.passes.InPlacePass):
    """Merge equal initializers of each graph (see the module doc); ``self.count`` counts them."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self.count = 0
        for graph in model.graphs():
            groups: dict[tuple, list[ir.Value]] = defaultdict(list)
            for value in graph.initializers.values():
                tensor = value.const_value
                if tensor is None or value.is_graph_input() or value.is_graph_output():
                    continue
                groups[(tensor.dtype, tuple(tensor.shape))].append(value)
            for members in groups.values():
                if len(members) < 2:
                    continue
                alike: dict[bytes, list[ir.Value]] = defaultdict(list)
                for value in members:
                    alike[_sample(value.const_value)].append(value)
                for group in alike.values():
                    if len(group) > 1:
                        self.count += self._merge(graph, group)
        return ir.passes.PassResult(model, modified=self.count > 0)

    @staticmethod
    def _merge(graph: ir.Graph, members: list[ir.Value]) -> int:
        kept: dict[bytes, ir.Value] = {}
        merged = 0
        for value in members:
            data = _contents(value.const_value)
            same = kept.get(data)
            if same is None:
                kept[data] = value
                continue
            value.replace_all_uses_with(same)
            graph.initializers.pop(value.name)
            merged += 1
        return merged
