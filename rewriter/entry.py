"""What every public function does with its model argument and its result (the bridge behind
:mod:`rewriter`'s API): a ModelProto, an onnx_ir Model or a path read and checked as the command
line checks its input, the graph inputs' defaults frozen when asked, and the result handed back in
the kind it came in, self-contained. Imports are deferred, as ``import rewriter`` must stay cheap.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

__all__ = ["open_model", "read_model", "freeze", "shape_args", "fixed_shapes", "result_of", "convert_args", "ACCEPTED"]

ACCEPTED = "an onnx.ModelProto, an onnx_ir.Model or a path (str or os.PathLike) to a model file"


def open_model(model, allow_invalid_input: bool = False, what: str = "<model>") -> tuple[Any, str, str | None]:
    """(ModelProto, kind, base_dir) of a model every entry point has checked as the command line
    checks its input (ModelLoadError naming the node or tensor); kind is 'proto', 'ir' or 'path'.
    A model ``onnx.checker`` refuses is refused unless ``allow_invalid_input``."""
    from rewriter.verify.inputs.validate import check_input

    proto, kind, base_dir = read_model(model)
    check_input(proto, os.fspath(model) if kind == "path" else what, allow_invalid=allow_invalid_input)
    return proto, kind, base_dir


def freeze(proto, freeze) -> tuple[Any, list[str]]:
    """(``proto`` with the graph inputs ``freeze`` names made constants, their names): the
    ``freeze_input_defaults`` argument of every function, as ``--freeze-input-defaults``."""
    from rewriter.graph.input_defaults import freeze_input_defaults

    return freeze_input_defaults(proto, freeze)


def shape_args(input_shapes, fix_dims) -> tuple[dict, dict]:
    """``input_shapes`` (graph input name -> sizes) and ``fix_dims`` (symbol -> size) as dicts of
    lists / ints (None: empty); TypeError for arguments of the wrong type."""
    def size(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    for arg, value, what in (("input_shapes", input_shapes, "a list of ints >= 0"), ("fix_dims", fix_dims, "an int >= 0")):
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise TypeError(f"{arg} must be a dict of names to {what}, got {type(value).__name__} {value!r}")
        for name, given in value.items():
            ok = size(given) if arg == "fix_dims" else isinstance(given, (list, tuple)) and all(map(size, given))
            if not ok:
                raise TypeError(f"{arg}[{name!r}] must be {what}, got {given!r}")
    return {k: list(v) for k, v in (input_shapes or {}).items()}, dict(fix_dims or {})


def fixed_shapes(proto, input_shapes: dict, fix_dims: dict):
    """``proto`` with the dims :func:`shape_args`' dicts fix, as ``--input-shape`` / ``--fix-dim`` (a
    copy; ``proto`` itself when both are empty): RewriterError for a name the model lacks or a size
    that contradicts its declared dims, naming the arguments."""
    from rewriter.graph.static_shapes import fixed_copy

    return fixed_copy(proto, input_shapes, fix_dims, names=("input_shapes", "fix_dims"))[0]


def read_model(model) -> tuple[Any, str, str | None]:
    import onnx

    if isinstance(model, onnx.ModelProto):
        from rewriter.io.tensors import EXTERNAL, all_tensors

        if not any(t.data_location == EXTERNAL for t, _ in all_tensors(model)):
            return model, "proto", None
        from rewriter.io.base_dir import tag_base_dir  # references resolve where onnx's checker and ONNX

        copy = onnx.ModelProto()  # Runtime resolve them: from the working directory (a copy is tagged)
        copy.CopyFrom(model)
        return tag_base_dir(copy, os.getcwd()), "proto", os.getcwd()
    if isinstance(model, (str, os.PathLike)):
        from rewriter.io import load_model

        path = os.fspath(model)
        return load_model(path), "path", os.path.dirname(os.path.abspath(path))
    if type(model).__module__.startswith("onnx_ir"):
        import onnx_ir as ir

        if isinstance(model, ir.Model):
            from rewriter.io.base_dir import proto_of

            proto, base_dir = proto_of(model)
            return proto, "ir", base_dir
    raise TypeError(f"expected {ACCEPTED}, got {type(model).__name__}")


def result_of(proto: onnx.ModelProto, kind: str, base_dir: str | None = None) -> Any:
    """The result in the kind it came in, self-contained: a ModelProto with every tensor that
    only this package could read (references into the source file through private keys) read
    into memory, as ``onnx.load`` would; an onnx_ir Model through the bridge (its untouched
    external tensors keep their directory)."""
    if kind != "ir":
        from rewriter.io.detach import detach

        return detach(proto, base_dir)
    from rewriter.optimize.bridge import result_to_ir

    return result_to_ir(proto, base_dir)


def convert_args(target_opset, ml_opset, ir_version, target):
    """``target_opset`` as an int or None ("latest" resolved); TypeError for arguments of the
    wrong type or when nothing is asked (shared by convert_opset and ConvertOpsetPass)."""
    import onnx.defs

    if isinstance(target_opset, str) and target_opset.strip().lower() == "latest":
        target_opset = onnx.defs.onnx_opset_version()
    for name, value in (("target_opset", target_opset), ("ml_opset", ml_opset), ("ir_version", ir_version)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            kinds = "an int or 'latest'" if name == "target_opset" else "an int"
            raise TypeError(f"{name} must be {kinds}, got {type(value).__name__} {value!r}")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target must be a str such as 'onnxruntime==1.17', got {type(target).__name__}")
    if target_opset is None and ml_opset is None and target is None:
        raise TypeError("target_opset must be an int or 'latest' (it may be None only with ml_opset or target)")
    return target_opset
