"""What each ONNX Runtime release computes for MatMulNBits at accuracy_level 4: one-node models (2, 4
and 8 bits, blocks of 16 to 64, 7 rows of A) run in each venv of ``tools/ort_venvs.py`` and compared
(relative L2) with float weights alone (level 0's arithmetic) and with A quantized to int8 per block
as the lowering writes it (``contrib_llm.int8_activations``: round(a * (127 / max|a|)) * max|a| / 127).

    python tools/ort_nbits_level.py [VERSION ...]     (default: every venv present)

Prints one line per release and case: "int8" when the written activations are within 1e-6 and float
weights are not, "float" for the reverse, "other" for neither, or the load error."""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ort_venvs  # noqa: E402

from rewriter.convert.lowering.contrib_llm import unpack_codes  # noqa: E402  (MatMulNBits' packing, low bits first)

CASES = [(64, 128, 4, 32, False), (256, 96, 4, 64, True), (128, 64, 8, 32, False), (128, 64, 2, 32, False),
         (128, 64, 4, 16, False)]
_RUN = """
import pickle, sys, numpy as np, onnxruntime as ort
for name, blob, a, plain, written in pickle.load(open(sys.argv[1], "rb")):
    try:
        y = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"A": a})[0].astype(np.float64)
    except Exception as e:
        print(ort.__version__, name, "refused:", " ".join(str(e).split())[:90]); continue
    rel = lambda x: float(np.linalg.norm(x - y) / np.linalg.norm(y))
    kind = "int8" if rel(written) < 1e-6 < rel(plain) else "float" if rel(plain) < 1e-6 < rel(written) else "other"
    print(ort.__version__, name, kind, f"(float weights {rel(plain):.1e}, int8 activations {rel(written):.1e})")
"""


def _written(a: np.ndarray, k: int, block: int) -> np.ndarray:
    blocks = -(-k // block)
    x = np.concatenate([a, np.zeros(a.shape[:-1] + (blocks * block - k,), np.float32)], -1)
    x = x.reshape(a.shape[:-1] + (blocks, block))
    most = np.abs(x).max(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        inverse = np.where(most != 0, np.float32(127) / most, np.float32(0)).astype(np.float32)
    codes = np.round((x * inverse).astype(np.float32))
    return (codes * (most / np.float32(127)).astype(np.float32)).astype(np.float32).reshape(
        a.shape[:-1] + (blocks * block,))[..., :k]


def case(rng, k: int, n: int, bits: int, block: int, zp: bool):
    """(name, model bytes, A, float-weight product, written-activation product) of one case."""
    blocks = -(-k // block)
    packed = rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    scales = (rng.random(n * blocks) * 0.1 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales, "S")]
    zero = np.full((n, blocks), 1 << (bits - 1))
    if zp:
        zbytes = rng.integers(0, 256, n * -(-blocks * bits // 8), dtype=np.uint8)
        inits.append(numpy_helper.from_array(zbytes, "Z"))
        zero = unpack_codes(zbytes.reshape(n, -1), bits, blocks).astype(np.int32)
    node = helper.make_node("MatMulNBits", ["A", "B", "S"] + (["Z"] if zp else []), ["Y"], domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=block, accuracy_level=4)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [None, None, k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, None, n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
                              ir_version=8)
    steps = np.repeat(np.arange(blocks), block)[:k]
    codes = unpack_codes(packed.reshape(n, -1), bits, k).astype(np.int32)
    w = ((codes - zero[:, steps]).astype(np.float32) * scales.reshape(n, blocks)[:, steps]).T.astype(np.float64)
    a = rng.standard_normal((1, 7, k)).astype(np.float32)
    return (f"{bits} bits, block {block}", model.SerializeToString(), a, a.astype(np.float64) @ w,
            _written(a, k, block).astype(np.float64) @ w)


def main(argv: list[str]) -> int:
    rng = np.random.default_rng(0)
    cases = [case(rng, *c) for c in CASES]
    found = sorted(p.name for p in ort_venvs.venvs_dir().iterdir()) if ort_venvs.venvs_dir().is_dir() else []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.pkl"
        path.write_bytes(pickle.dumps(cases))
        for version in argv or found:
            python = ort_venvs.venv_python(ort_venvs.venvs_dir() / version)
            done = subprocess.run([str(python), "-c", _RUN, str(path)], capture_output=True, text=True, check=False)
            print(done.stdout.rstrip() or f"{version}: {done.stderr.strip()[-200:]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
