"""The command line's argument types: each parses one option's text or raises
argparse.ArgumentTypeError saying what it takes."""

from __future__ import annotations

import argparse

__all__ = ["latest_opset", "opset_arg", "positive_arg", "layout_arg", "input_shape_arg", "fix_dim_arg", "names_arg", "input_value_arg", "bytes_arg"]


def latest_opset() -> int:
    import onnx.defs

    return onnx.defs.onnx_opset_version()


def opset_arg(text: str) -> int:
    latest = latest_opset()
    if text.strip().lower() == "latest":
        return latest
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--opset must be an integer or 'latest', got {text!r}") from None
    if not 1 <= value <= latest:
        raise argparse.ArgumentTypeError(f"--opset must be in 1..{latest}, got {value}")
    return value


def positive_arg(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {value}")
        return value

    return parse


def layout_arg(text: str):
    if text in ("always", "never") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(f"--external-data must be always, never or a size in bytes, got {text!r}")


def input_shape_arg(text: str) -> tuple[str, list[int]]:
    name, sep, dims = text.rpartition(":")
    try:
        values = [int(d) for d in dims.replace("x", ",").split(",") if d.strip()]
    except ValueError:
        values = None
    if not sep or not name or values is None or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"--input-shape must be NAME:DIMS such as x:1,3,224,224, got {text!r}")
    return name, values


def fix_dim_arg(text: str) -> tuple[str, int]:
    name, sep, value = text.rpartition("=")
    if not sep or not name or not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"--fix-dim must be SYMBOL=SIZE such as batch=1, got {text!r}")
    return name, int(value)


def names_arg(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def input_value_arg(text: str) -> tuple[str, list[float]]:
    name, sep, values = text.rpartition(":")
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        numbers = []
    if not sep or not name or not numbers:
        raise argparse.ArgumentTypeError(f"--input-value must be NAME:VALUES such as sr:16000 or mask:1,1,0, "
                                         f"got {text!r}")
    return name, numbers


def bytes_arg(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"--fold-limit must be a number of bytes, got {text!r}")
    return int(text)
