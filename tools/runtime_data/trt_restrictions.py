"""onnx-tensorrt's Restrictions column, clause by clause, as data ``rewriter.targets.restrictions`` checks.

``docs/operators.md`` states restrictions as free text. Each clause of each release's text is
listed here once with what it means: a structured rule (``kind`` and its fields; the checker in
``rewriter/targets/restrictions.py`` knows every kind) or, for a clause no static look at a model
can decide, a ``note`` saying why it is recorded but not checked. :func:`structure` splits one
release's column into its clauses and fails on a clause this table does not know, so a new
release's text cannot be skipped silently: ``build_tables.py`` writes the result into
``tensorrt.json`` as each release's ``rules`` and ``unchecked``.

Input and output indices are ONNX's (``Dropout``'s ``is_training`` is its input 2,
``training_mode``; the onnx-tensorrt text names it as the parser's code does).
"""

from __future__ import annotations

import re

_POOL_RANK = {"kind": "rank", "inputs": [0], "ranks": [4, 5]}  # 2D or 3D pooling: N, C and 2 or 3 spatial dims
_DILATIONS = {"kind": "ones", "attribute": "dilations"}
_AXES_INPUT = {"kind": "constant", "inputs": [1]}  # axes as an input (Reduce* 18+, Squeeze/Unsqueeze 13+)
_SAME_ACTIVATIONS = {"kind": "same_activations"}
_SEED = {"note": "not a refusal: TensorRT loads the node and ignores its seed, so the numbers drawn differ "
                 "from a seeded run elsewhere (random ops are never compared numerically anyway)"}

# op -> [(clause as operators.md writes it, rule or note), ...]; variants of a clause across releases
# are listed one after the other
CLAUSES: dict[str, list[tuple[str, dict]]] = {
    "Attention": [
        ("`Q`, `K`, `V` and `attn_mask ` must be 4D", {"kind": "rank", "inputs": [0, 1, 2, 3], "ranks": [4]}),
        ("`past_key`, `past_value` and `nonpad_kv_seqlen` inputs are unsupported",
         {"kind": "inputs_absent", "inputs": [4, 5, 6]}),
        ("`present_key`, `present_value` and `qk_matmul_output` outputs are unsupported",
         {"kind": "outputs_unused", "outputs": [1, 2, 3]}),
        ("`qk_matmul_output_mode` and `softcap` attributes are unsupported",
         {"kind": "attributes_default", "attributes": ["qk_matmul_output_mode", "softcap"]}),
        ("`q_num_heads` and `kv_num_heads` attributes are supported via being specified as the second dimension "
         "of `Q` and `K`/`V`'s shapes respectively",
         {"note": "how TensorRT reads the head counts (the second dimension of the 4D Q, K and V the rank rule "
                  "requires), not a refusal"}),
    ],
    "AveragePool": [("2D or 3D Pooling only", _POOL_RANK),
                    ("`dilations` must be empty or all ones", _DILATIONS)],
    "Constant": [("`sparse_value`, `value_string`, and `value_strings` attributes are unsupported",
                  {"kind": "attributes_absent", "attributes": ["sparse_value", "value_string", "value_strings"]})],
    "CumSum": [("`axis` must be an initializer", {"kind": "constant", "inputs": [1]}),
               ("`axis` must be a build-time constant", {"kind": "constant", "inputs": [1]})],
    "DeformConv": [("`input` must have 1D or 2D spatial dimensions", {"kind": "rank", "inputs": [0], "ranks": [3, 4]}),
                   ("`pads` for the beginning and end along each spatial axis must be the same",
                    {"kind": "symmetric_pads", "attribute": "pads"})],
    "DequantizeLinear": [("`x_zero_point` must be zero", {"kind": "zero", "input": 2})],
    "Dropout": [("`is_traning` must be an initializer and evaluate to False",  # sic, 10.1
                 {"kind": "constant", "inputs": [2], "equals": 0}),
                ("`is_training` must be an initializer and evaluate to False",
                 {"kind": "constant", "inputs": [2], "equals": 0})],
    "Einsum": [("Ellipsis and diagonal operations are not supported", {"kind": "einsum_plain"}),
               ("Broadcasting between inputs is not supported", {"kind": "einsum_no_broadcast"})],
    "EyeLike": [("`input` must have static dimensions", {"kind": "static_shape", "input": 0})],
    "GRU": [("For bidirectional GRUs, activation functions must be the same for both the forward and reverse pass",
             _SAME_ACTIVATIONS)],
    "GridSample": [("Input must be 4D input", {"kind": "rank", "inputs": [0], "ranks": [4]})],
    "Hardmax": [("`axis` dimension of input must be a build-time constant",
                 {"kind": "static_dim", "input": 0, "axis_attribute": "axis"})],
    "If": [("Output tensors of the two conditional branches must have broadcastable shapes, and must have "
            "different names", {"kind": "if_branches", "shapes": "broadcastable"}),
           ("Output tensors of the two conditional branches must have the same rank and must have different names",
            {"kind": "if_branches", "shapes": "same_rank"})],
    "InstanceNormalization": [("Scales `scale` and biases `B` must be initializers", {"kind": "constant", "inputs": [1, 2]}),
                              ("Input rank must be >=3 & <=5", {"kind": "rank", "inputs": [0], "ranks": [3, 4, 5]})],
    "LSTM": [("For bidirectional LSTMs, activation functions must be the same for both the forward and reverse pass",
              _SAME_ACTIVATIONS),
             ("`input_forget` attribute must be 0", {"kind": "attribute", "attribute": "input_forget", "allowed": [0]}),
             ("`layout` attribute must be 0", {"kind": "attribute", "attribute": "layout", "allowed": [0]})],
    "LayerNormalization": [("Only the first output `Y` is supported", {"kind": "outputs_unused", "outputs": [1, 2]})],
    "Loop": [("Scan output length cannot be dynamic",
              {"note": "the number of iterations a Loop runs depends on its trip count and its condition, which the "
                       "body computes at run time; not decided statically"}),
             ("The shape of Loop carried dependencies must be the same across all loop iterations",
              {"note": "a property of the values the body computes at run time; not decided statically"})],
    "LpPool": [("`dilations` must be empty or all ones", _DILATIONS)],
    "MaxPool": [("2D or 3D pooling only", _POOL_RANK),
                ("`Indices` output tensor unsupported", {"kind": "outputs_unused", "outputs": [1]}),
                ("`dilations` must be empty or all ones", _DILATIONS)],
    "OneHot": [("`depth` must be a build-time constant", {"kind": "constant", "inputs": [1]})],
    "Pad": [("`axes` must be an initializer", {"kind": "constant", "inputs": [3]})],
    "QuantizeLinear": [("`y_zero_point` must be 0", {"kind": "zero", "input": 2})],
    "RNN": [("For bidirectional RNNs, activation functions must be the same for both the forward and reverse pass",
             _SAME_ACTIVATIONS)],
    "RandomNormal": [("`seed` value is ignored by TensorRT", _SEED)],
    "RandomNormalLike": [("`seed` value is ignored by TensorRT", _SEED)],
    "RandomUniform": [("`seed` value is ignored by TensorRT", _SEED)],
    "RandomUniformLike": [("`seed` value is ignored by TensorRT", _SEED)],
    **{op: [("`axes` must be an initializer", _AXES_INPUT)]
       for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                  "ReduceProd", "ReduceSum", "ReduceSumSquare")},
    "Resize": [
        ("Supported resize transformation modes: `half_pixel`, `pytorch_half_pixel`, `tf_half_pixel_for_nn`, "
         "`asymmetric`, and `align_corners`",
         {"kind": "attribute", "attribute": "coordinate_transformation_mode",
          "allowed": ["half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn", "asymmetric", "align_corners"]}),
        ("Supported resize modes: `nearest`, `linear`", {"kind": "attribute", "attribute": "mode",
                                                        "allowed": ["nearest", "linear"]}),
        ("Supported nearest modes: `floor`, `ceil`, `round_prefer_floor`, `round_prefer_ceil`",
         {"kind": "attribute", "attribute": "nearest_mode",
          "allowed": ["floor", "ceil", "round_prefer_floor", "round_prefer_ceil"], "when": {"mode": "nearest"}}),
        ("Supported aspect ratio policy: `stretch`",
         {"kind": "attribute", "attribute": "keep_aspect_ratio_policy", "allowed": ["stretch"]}),
        ("When `scales` is a tensor input, `axes` must be an iota vector of length rank(input)",
         {"kind": "resize_axes"}),
        ("Antialiasing is not supported", {"kind": "attribute", "attribute": "antialias", "allowed": [0]}),
    ],
    "ReverseSequence": [("Dynamic input shapes are unsupported", {"kind": "static_shape", "input": 0})],
    "RotaryEmbedding": [("`position_ids` must be INT64", {"kind": "input_type", "input": 3, "types": ["INT64"]})],
    "STFT": [("`frame_step` and `window` must be an initializer", {"kind": "constant", "inputs": [1, 2]}),
             ("Input must be real-valued", {"kind": "real_signal", "input": 0})],
    "ScatterND": [("`reduction` is not supported", {"kind": "attribute", "attribute": "reduction", "allowed": ["none"]}),
                  ("`reduction` other than `none` is not supported",
                   {"kind": "attribute", "attribute": "reduction", "allowed": ["none"]})],
    "Slice": [("`axes` must be an initializer", {"kind": "constant", "inputs": [3]})],
    "Squeeze": [("`axes` must be an initializer", _AXES_INPUT),
                ("`axes` must be resolvable to a constant", _AXES_INPUT)],
    "TensorScatter": [("`past_cache` and `update` must be 4D", {"kind": "rank", "inputs": [0, 1], "ranks": [4]}),
                      ("`axis` must be -2", {"kind": "attribute", "attribute": "axis", "allowed": [-2]})],
    "TopK": [("`K` input must be an initializer", {"kind": "constant", "inputs": [1]}),
             ("`sorted` must be 1", {"kind": "attribute", "attribute": "sorted", "allowed": [1]}),
             ("`K` input must be less than 3840", {"kind": "less_than", "input": 1, "value": 3840})],
    "Unsqueeze": [("`axes` must be a constant tensor", _AXES_INPUT),
                  ("`axes` must be resolvable to a constant", _AXES_INPUT)],
}

# ops whose Supported Types column is checked too, and the input it is about: for QuantizeLinear the
# float input, for DequantizeLinear the quantized one (TensorRT computes a uint8 one as int8: the
# parser warns "TensorRT doesn't support QuantizeLinear/DequantizeLinear with UINT8 zero_point").
# The column of other ops is not checked (what it covers per op, input or output, is not said).
TYPED = {"QuantizeLinear": 0, "DequantizeLinear": 0}
TYPE_NAMES = {"FP32": "FLOAT", "FP16": "FLOAT16", "BF16": "BFLOAT16", "FP8": "FLOAT8E4M3FN", "FP4": "FLOAT4E2M1",
              "INT4": "INT4", "INT8": "INT8", "INT32": "INT32", "INT64": "INT64", "UINT8": "UINT8", "BOOL": "BOOL",
              "DOUBLE": "DOUBLE"}
TYPES_PREFIX = "Supported Types: "

# what may stand between clauses: sentence ends, line breaks, spaces
_GLUE = re.compile(r"^(?:[\s.]|<br\s*/?>)*$")


def structure(restrictions: dict[str, str], types: dict[str, str] | None = None) -> tuple[dict, dict]:
    """One release's Restrictions column ({op: text}) -> (rules {op: [rule]}, unchecked {op: [note]}),
    with the Supported Types rules of the :data:`TYPED` ops from ``types`` ({op: that column}).

    Every rule and note carries the clause it comes from as ``text`` (a types rule:
    ``"Supported Types: " + the cell``). Raises ValueError when some part of an op's text is no
    clause :data:`CLAUSES` lists for it, or a type name is unknown."""
    rules: dict[str, list] = {}
    unchecked: dict[str, list] = {}
    for op, index in TYPED.items():
        cell = (types or {}).get(op)
        if not cell:
            continue
        names = [t.strip() for t in cell.split(",") if t.strip()]
        if any(t not in TYPE_NAMES for t in names):
            raise ValueError(f"operators.md: {op}'s Supported Types {cell!r} has a type TYPE_NAMES lacks")
        rules.setdefault(op, []).append({"text": TYPES_PREFIX + cell, "kind": "input_type", "input": index,
                                         "types": [TYPE_NAMES[t] for t in names]})
    for op, text in sorted(restrictions.items()):
        rest = text
        for clause, meaning in CLAUSES.get(op, []):
            if clause not in text:
                continue
            rest = rest.replace(clause, "", 1)
            if "note" in meaning:
                unchecked.setdefault(op, []).append({"text": clause, "note": meaning["note"]})
            else:
                rules.setdefault(op, []).append({"text": clause, **meaning})
        if not _GLUE.match(rest):
            raise ValueError(f"operators.md: {op}'s restriction {rest.strip()!r} is in no clause of "
                             f"tools/runtime_data/trt_restrictions.py (add it, structured or with a note)")
    return dict(sorted(rules.items())), unchecked
