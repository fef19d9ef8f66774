#!/usr/bin/env python3
"""Exports whose weights are graph inputs with an initializer (a default a caller may override):
torch's legacy exporter with ``keep_initializers_as_inputs=True``, as every export at opset 8 and
below and many older pipelines wrote them. Run in the torch venv (tools/corpus/README.md):

    /work/venvs/torch/bin/python tools/corpus/make_initializer_inputs.py --out /work/corpus/iniputs

Writes ``<name>.onnx`` and its sample input ``<name>.npz`` (random weights, no download):
torchvision ResNet-18 and SqueezeNet at opsets 9 and 13, and a small head with ReduceSum /
ReduceMean / ReduceL2 over a dim (opset 18: their axes are inputs, here graph inputs too).
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
import torchvision


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x):
        y = self.fc(x)
        return y.sum(dim=1, keepdim=True) + y.mean(dim=-1, keepdim=True) + torch.linalg.vector_norm(y, dim=1,
                                                                                                     keepdim=True)


def _export(model, example, path, opset):
    torch.onnx.export(model.eval(), (example,), path, opset_version=opset, dynamo=False,
                      keep_initializers_as_inputs=True, input_names=["x"], output_names=["y"],
                      do_constant_folding=True)
    np.savez(path[:-5] + ".npz", x=example.numpy())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/work/corpus/iniputs")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    image = torch.randn(1, 3, 224, 224)
    for name, make in (("resnet18", torchvision.models.resnet18), ("squeezenet", torchvision.models.squeezenet1_0)):
        for opset in (9, 13):
            _export(make(weights=None), image, os.path.join(args.out, f"{name}_op{opset}_inputs.onnx"), opset)
    for opset in (13, 18):
        _export(Head(), torch.randn(4, 16), os.path.join(args.out, f"reduce_head_op{opset}_inputs.onnx"), opset)
    print(sorted(os.listdir(args.out)))


if __name__ == "__main__":
    main()
