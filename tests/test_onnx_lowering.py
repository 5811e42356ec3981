"""The operators the ONNX reader lowers exactly beyond chains of Gemm/MatMul/Relu/Max: Conv and
ConvTranspose (N-d, strides, pads, dilations, group, auto_pad, output_padding/output_shape),
BatchNormalization in inference mode, Pad, Slice, AveragePool, GlobalAveragePool,
GlobalMaxPool, MaxPool, LeakyRelu, PRelu, Clip, Abs, Min, Max, Sum, ReduceMin, ReduceSum,
ReduceMean, and tensors of different depths meeting in Add/Sub/Concat/Max/Sum (residual and
skip connections); and the refusals (functions that are not piecewise linear, products of two
input-dependent tensors, BatchNormalization in training mode).

Every graph of ``CASES`` is checked twice:

- ``test_interpreter_agrees_with_onnxruntime``: the independent exact interpreter
  (tests/onnx_semantics.run_exact) against onnxruntime, which validates the interpreter's
  reading of the ONNX spec (it passes without the importer); onnx.reference stands in for
  onnxruntime for the one graph it refuses (Conv with dilations and auto_pad SAME_LOWER);
- ``test_import_is_exact``: ``import_onnx`` evaluated with ``evaluate_maxout`` equals
  ``run_exact`` exactly (at float points and at rationals such as 1/3 that no float is), and
  agrees with onnxruntime.

Points: random multiples of 1/64 in [-4, 4], and tie points (0 for Relu/LeakyRelu/Abs, equal
arguments for Max/Min/pools/reductions, the bounds of Clip).

Float types (onnxruntime 1.32's CPU kernels): there is no float64 kernel for Conv,
ConvTranspose, AveragePool, GlobalAveragePool, GlobalMaxPool, Clip before opset 12, and
LeakyRelu/PRelu outside opsets 16 to 18 (there onnxruntime runs their function bodies, in
float64).  Those graphs are float32, with weights k/8 (|k| <= 16) and inputs k/64, so every
product and sum is exact in float32 and only a division (an average), a float32 alpha or a
square root (BatchNormalization) rounds: compared at 1e-6 (1e-5 for the CNNs, where a rounded
BatchNormalization passes through two more layers), relative to the output's largest magnitude
(at least 1).  Every other graph is float64, compared at 1e-12.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_semantics import nearest_scale_over_sqrt, run_exact

from exactmax.io import InputError
from exactmax.io.numbers import to_fraction
from exactmax.io.onnxfile import import_onnx
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE
RTOL = {F32: 1e-6, F64: 1e-12}
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)
node = helper.make_node


@dataclass
class Case:
    model: onnx.ModelProto
    ties: list  # tie points (lists of multiples of 1/64), besides 0 and a constant input
    rtol: float
    reference: bool = False  # onnxruntime cannot run it: onnx.reference instead

    @property
    def elem(self) -> int:
        return self.model.graph.input[0].type.tensor_type.elem_type

    @property
    def shape(self) -> list[int]:
        return [d.dim_value for d in self.model.graph.input[0].type.tensor_type.shape.dim]

    @property
    def dim(self) -> int:
        return math.prod(self.shape)


CASES: dict[str, Case] = {}
_RNG = np.random.default_rng(20240611)


def w(*shape, den=8, k=16):
    """Weights k/den with |k| <= 16: few bits, exact in float32."""
    return _RNG.integers(-k, k + 1, size=shape) / den


def ints(*v):
    return np.array(v, dtype=np.int64)


def model(name, nodes, inits, in_shape, opset, elem=F64) -> onnx.ModelProto:
    dtype = np.float32 if elem == F32 else np.float64
    tensors = [
        numpy_helper.from_array(
            np.asarray(v, dtype=dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v), k
        )
        for k, v in inits.items()
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", elem, list(in_shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        tensors,
    )
    m = helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = max(m.ir_version, 8)
    # the output's shape, which onnx.checker requires, by shape inference
    m.graph.output[0].CopyFrom(
        onnx.shape_inference.infer_shapes(m, strict_mode=True).graph.output[0]
    )
    return m


def case(name, nodes, inits, in_shape, opset, elem=F64, ties=(), rtol=None, reference=False):
    assert name not in CASES
    m = model(name, nodes, inits, in_shape, opset, elem)
    CASES[name] = Case(m, [list(t) for t in ties], rtol or RTOL[elem], reference)


def flat(*values):
    return [v / 64 for v in values]


# ------------------------------------------------------------------------------ Conv
case("conv1d_strides_pads_bias", [node("Conv", ["x", "W", "B"], ["y"], strides=[2], pads=[1, 2])],
     {"W": w(3, 2, 3), "B": w(3)}, [1, 2, 7], 11, F32)  # fmt: skip
case("conv1d_dilations_no_bias",
     [node("Conv", ["x", "W"], ["y"], dilations=[3], pads=[2, 0])],
     {"W": w(2, 1, 3)}, [1, 1, 9], 13, F32)  # fmt: skip
case("conv2d_pads_bias", [node("Conv", ["x", "W", "B"], ["y"], pads=[1, 1, 1, 1])],
     {"W": w(3, 2, 3, 3), "B": w(3)}, [1, 2, 4, 4], 11, F32)  # fmt: skip
case("conv2d_strides_dilations_asymmetric_pads",
     [node("Conv", ["x", "W"], ["y"], kernel_shape=[2, 3], strides=[2, 1], dilations=[2, 1],
           pads=[0, 1, 1, 0])],
     {"W": w(2, 1, 2, 3)}, [1, 1, 6, 5], 13, F32)  # fmt: skip
case("conv2d_group_2", [node("Conv", ["x", "W", "B"], ["y"], group=2)],
     {"W": w(4, 2, 2, 2), "B": w(4)}, [1, 4, 3, 3], 11, F32)  # fmt: skip
case("conv2d_depthwise_strided",
     [node("Conv", ["x", "W"], ["y"], group=3, strides=[2, 2], pads=[1, 1, 1, 1])],
     {"W": w(3, 1, 3, 3)}, [1, 3, 4, 4], 18, F32)  # fmt: skip
for _auto in ("SAME_UPPER", "SAME_LOWER"):  # an odd total pad (1): at the end / the beginning
    case(f"conv2d_auto_pad_{_auto.lower()}",
         [node("Conv", ["x", "W", "B"], ["y"], auto_pad=_auto, strides=[2, 2])],
         {"W": w(2, 1, 2, 2), "B": w(2)}, [1, 1, 5, 5], 11, F32)  # fmt: skip
# onnxruntime refuses dilations with auto_pad SAME_*: checked against onnx.reference (float64),
# which pads for the dilated kernel, (3 - 1) * 2 + 1 = 5, as the spec's formula does
case("conv1d_auto_pad_same_lower_dilated",
     [node("Conv", ["x", "W"], ["y"], auto_pad="SAME_LOWER", dilations=[2], strides=[3])],
     {"W": w(1, 1, 3)}, [1, 1, 7], 13, reference=True)  # fmt: skip
case("conv2d_auto_pad_valid",
     [node("Conv", ["x", "W"], ["y"], auto_pad="VALID", strides=[2, 1])],
     {"W": w(2, 2, 3, 2)}, [1, 2, 5, 4], 13, F32)  # fmt: skip
case("conv3d_pads_bias", [node("Conv", ["x", "W", "B"], ["y"], pads=[1, 0, 0, 0, 1, 0])],
     {"W": w(2, 1, 2, 2, 2), "B": w(2)}, [1, 1, 3, 3, 3], 13, F32)  # fmt: skip

# --------------------------------------------------------------------- ConvTranspose
case("conv_transpose1d_strides_pads_output_padding_bias",
     [node("ConvTranspose", ["x", "W", "B"], ["y"], strides=[2], pads=[1, 0],
           output_padding=[1])],
     {"W": w(2, 3, 3), "B": w(3)}, [1, 2, 4], 11, F32)  # fmt: skip
case("conv_transpose2d_strides_dilations_pads",
     [node("ConvTranspose", ["x", "W"], ["y"], strides=[2, 2], dilations=[1, 2],
           pads=[0, 1, 1, 0])],
     {"W": w(1, 2, 2, 2)}, [1, 1, 3, 3], 13, F32)  # fmt: skip
case("conv_transpose2d_group_2", [node("ConvTranspose", ["x", "W", "B"], ["y"], group=2)],
     {"W": w(4, 1, 3, 3), "B": w(2)}, [1, 4, 2, 2], 11, F32)  # fmt: skip
# output_shape 5 of a full size 7: a total pad of 2, 1 on each side
case("conv_transpose2d_output_shape",
     [node("ConvTranspose", ["x", "W", "B"], ["y"], strides=[2, 2], output_shape=[5, 5])],
     {"W": w(1, 1, 3, 3), "B": w(1)}, [1, 1, 3, 3], 13, F32)  # fmt: skip
# an odd total pad (7 - 6 = 1): at the beginning (NOTSET, SAME_LOWER) or the end (SAME_UPPER)
case("conv_transpose1d_output_shape_odd_total_pad",
     [node("ConvTranspose", ["x", "W"], ["y"], strides=[2], output_shape=[6])],
     {"W": w(2, 1, 3)}, [1, 2, 3], 13, F32)  # fmt: skip
for _auto in ("SAME_UPPER", "SAME_LOWER"):
    case(f"conv_transpose1d_auto_pad_{_auto.lower()}",
         [node("ConvTranspose", ["x", "W", "B"], ["y"], strides=[2], auto_pad=_auto)],
         {"W": w(2, 1, 3), "B": w(1)}, [1, 2, 3], 13, F32)  # fmt: skip
case("conv_transpose3d_strided", [node("ConvTranspose", ["x", "W"], ["y"], strides=[2, 1, 2])],
     {"W": w(1, 2, 2, 2, 2)}, [1, 1, 2, 2, 2], 13, F32)  # fmt: skip


# ---------------------------------------------------------------- BatchNormalization
def bn_params(c, var):
    return {"s": w(c), "b": w(c), "m": w(c), "v": np.asarray(var, dtype=np.float64)}


# var + epsilon a square: (3 + 1) / 16, (15 + 1) / 16, (35 + 1) / 16: the exact rational
case("batchnorm_exact_square_root",
     [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=0.0625)],
     bn_params(3, [3 / 16, 15 / 16, 35 / 16]), [1, 3, 2, 2], 15)  # fmt: skip
# var + 1e-5 (float32) not a square: the float64 nearest to scale / sqrt(var + eps)
case("batchnorm_rounded_default_epsilon",
     [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
     bn_params(3, [0.5, 1.25, 3.0]), [1, 3, 2, 2], 9)  # fmt: skip
case("batchnorm_2d_input_training_mode_0",
     [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3,
           training_mode=0)],
     bn_params(4, [0.25, 2.0, 0.125, 7.0]), [1, 4], 14)  # fmt: skip
case("batchnorm_opset7_spatial",
     [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=1, epsilon=0.25)],
     bn_params(2, [0.75, 2.0]), [1, 2, 3], 7)  # fmt: skip

# --------------------------------------------------------------------------- Pad
case("pad_constant_value_input_negative_pad",
     [node("Pad", ["x", "p", "c"], ["y"], mode="constant")],
     {"p": ints(0, 0, 1, -1, 0, 0, 2, 1), "c": np.array(0.75)}, [1, 2, 3, 3], 11)  # fmt: skip
case("pad_constant_default_value", [node("Pad", ["x", "p"], ["y"])],
     {"p": ints(0, 1, 0, 2, 0, 0, 1, 0)}, [1, 2, 3, 2], 13)  # fmt: skip
case("pad_reflect", [node("Pad", ["x", "p"], ["y"], mode="reflect")],
     {"p": ints(0, 0, 2, 1, 0, 0, 1, 3)}, [1, 1, 3, 4], 13)  # fmt: skip
case("pad_edge_axes_input", [node("Pad", ["x", "p", "", "a"], ["y"], mode="edge")],
     {"p": ints(1, 0, 2, 2), "a": ints(2, -1)}, [1, 2, 3, 3], 18)  # fmt: skip
case("pad_constant_value_axes_input", [node("Pad", ["x", "p", "c", "a"], ["y"])],
     {"p": ints(2, 1), "a": ints(1), "c": np.array(-1.5)}, [1, 2, 3], 19)  # fmt: skip
case("pad_attributes_constant_value",
     [node("Pad", ["x"], ["y"], mode="constant", pads=[0, 0, 1, 0, 1, 2], value=0.5)],
     {}, [1, 2, 3], 9)  # fmt: skip
case("pad_attributes_edge", [node("Pad", ["x"], ["y"], mode="edge", pads=[0, 1, 2, 0, 0, 1])],
     {}, [1, 2, 3], 10)  # fmt: skip
case("pad_attributes_reflect",
     [node("Pad", ["x"], ["y"], mode="reflect", pads=[0, 0, 2, 0, 0, 1])],
     {}, [1, 2, 3], 7)  # fmt: skip

# ------------------------------------------------------------------------- Slice
case("slice_attributes",
     [node("Slice", ["x"], ["y"], starts=[1, -3], ends=[3, 100], axes=[1, 2])],
     {}, [1, 3, 4], 9)  # fmt: skip
case("slice_attributes_without_axes",
     [node("Slice", ["x"], ["y"], starts=[0, 0, 1], ends=[1, 2, -1])],
     {}, [1, 3, 4], 9)  # fmt: skip
case("slice_inputs_negative_steps", [node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
     {"s": ints(-1, 3), "e": ints(-100, 0), "a": ints(2, 1), "t": ints(-2, -1)},
     [1, 4, 5], 13)  # fmt: skip
case("slice_inputs_without_axes_steps", [node("Slice", ["x", "s", "e"], ["y"])],
     {"s": ints(0, 1), "e": ints(1, INT64_MAX)}, [1, 4, 3], 10)  # fmt: skip
case("slice_inputs_int64_limits_step_2", [node("Slice", ["x", "s", "e", "a", "t"], ["y"])],
     {"s": ints(INT64_MIN, INT64_MAX), "e": ints(INT64_MAX, INT64_MIN), "a": ints(-1, 1),
      "t": ints(2, -3)}, [1, 5, 5], 18)  # fmt: skip

# ------------------------------------------------------------------------- pools
case("average_pool2d_pads_exclude_pad",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
     {}, [1, 2, 5, 5], 11, F32)  # fmt: skip
case("average_pool2d_asymmetric_pads_include_pad",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1],
           count_include_pad=1)],
     {}, [1, 2, 4, 4], 11, F32)  # fmt: skip
case("average_pool2d_ceil_mode",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1)],
     {}, [1, 1, 5, 6], 10, F32)  # fmt: skip
# ceil gives 2 windows; the second would start in the right padding: dropped
case("average_pool1d_ceil_mode_drops_a_window_in_the_padding",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[3], pads=[0, 1],
           ceil_mode=1)],
     {}, [1, 2, 3], 11, F32)  # fmt: skip
case("average_pool1d_include_pad",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1],
           count_include_pad=1)],
     {}, [1, 2, 7], 19, F32)  # fmt: skip
case("average_pool2d_dilations",
     [node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 1])],
     {}, [1, 1, 5, 4], 19, F32)  # fmt: skip
case("global_average_pool2d", [node("GlobalAveragePool", ["x"], ["y"])], {}, [1, 3, 2, 3], 13,
     F32)  # fmt: skip
case("global_average_pool1d", [node("GlobalAveragePool", ["x"], ["y"])], {}, [1, 2, 5], 13,
     F32)  # fmt: skip
case("global_max_pool2d", [node("GlobalMaxPool", ["x"], ["y"])], {}, [1, 2, 3, 3], 13, F32,
     ties=[flat(*[5] * 9, *[-3, 7, 7, 7, 2, 7, 0, 1, 7])])  # fmt: skip
case("global_max_pool1d", [node("GlobalMaxPool", ["x"], ["y"])], {}, [1, 3, 2], 13, F32,
     ties=[flat(1, 1, 0, 0, -2, -2)])  # fmt: skip
case("max_pool2d_ceil_mode_dilations_pads",
     [node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 1],
           pads=[1, 0, 0, 1], ceil_mode=1)],
     {}, [1, 2, 5, 5], 12,
     ties=[flat(*([3, 3, -1, 3, 0] * 10))])  # fmt: skip
case("max_pool1d_ceil_mode_drops_a_window_in_the_padding",
     [node("MaxPool", ["x"], ["y"], kernel_shape=[2], strides=[3], pads=[0, 1], ceil_mode=1)],
     {}, [1, 2, 3], 11, ties=[flat(4, 4, 1, -1, -1, 9)])  # fmt: skip

# ------------------------------------------------------------- piecewise linear maps
_MIXED = flat(0, 0, 64, -64, 0, 3)  # zeros among nonzeros, for 6 inputs
case("relu", [node("Relu", ["x"], ["y"])], {}, [1, 6], 13, ties=[_MIXED])
case("abs", [node("Abs", ["x"], ["y"])], {}, [1, 6], 13, ties=[_MIXED])
case("neg_mul_div_by_constants",
     [node("Neg", ["x"], ["n"]), node("Mul", ["n", "k"], ["m"]), node("Div", ["m", "d"], ["q"]),
      node("Mul", ["two", "q"], ["y"])],
     {"k": w(2, 3), "d": np.array([0.5, -4.0, 3.0]), "two": np.array(2.0)},
     [1, 2, 3], 13)  # fmt: skip
case("leaky_relu_alpha_one_eighth", [node("LeakyRelu", ["x"], ["y"], alpha=0.125)], {}, [1, 6],
     13, F32, ties=[_MIXED])  # fmt: skip
case("leaky_relu_alpha_3", [node("LeakyRelu", ["x"], ["y"], alpha=3.0)], {}, [1, 6], 16,
     ties=[_MIXED])  # fmt: skip
# the default alpha is the float32 0.01 = 10737418 / 2^30 (float32 rounds alpha * x)
case("leaky_relu_default_alpha_float32", [node("LeakyRelu", ["x"], ["y"])], {}, [1, 6], 9, F32,
     ties=[_MIXED])  # fmt: skip
case("leaky_relu_default_alpha_float64", [node("LeakyRelu", ["x"], ["y"])], {}, [1, 6], 16,
     ties=[_MIXED])  # fmt: skip
case("prelu_per_channel_slope", [node("PRelu", ["x", "s"], ["y"])],
     {"s": np.array([0.25, -0.5, 2.5]).reshape(3, 1, 1)}, [1, 3, 2, 2], 9, F32,
     ties=[flat(0, 1, -1, 0, 0, 0, 5, -5, -9, 0, 0, 2)])  # fmt: skip
case("prelu_broadcast_last_axis", [node("PRelu", ["x", "s"], ["y"])],
     {"s": np.array([1.5, -0.25, 0.0])}, [1, 2, 3], 16, ties=[_MIXED])  # fmt: skip
_CLIP = flat(-32, 48, -33, 49, 0, 40)  # at the bounds -1/2 and 3/4, and next to them
case("clip_min_max_inputs", [node("Clip", ["x", "lo", "hi"], ["y"])],
     {"lo": np.array(-0.5), "hi": np.array(0.75)}, [1, 6], 13, ties=[_CLIP])  # fmt: skip
case("clip_max_input_only", [node("Clip", ["x", "", "hi"], ["y"])], {"hi": np.array(0.75)},
     [1, 6], 12, ties=[_CLIP])  # fmt: skip
case("clip_min_input_only", [node("Clip", ["x", "lo"], ["y"])], {"lo": np.array(-0.5)}, [1, 6],
     11, F32, ties=[_CLIP])  # fmt: skip
case("clip_min_above_max_gives_max", [node("Clip", ["x", "lo", "hi"], ["y"])],
     {"lo": np.array(1.0), "hi": np.array(-0.5)}, [1, 6], 13, ties=[_CLIP])  # fmt: skip
case("clip_no_bounds", [node("Clip", ["x"], ["y"])], {}, [1, 6], 13)
case("clip_attributes", [node("Clip", ["x"], ["y"], min=-0.5, max=0.75)], {}, [1, 6], 10, F32,
     ties=[_CLIP])  # fmt: skip
case("clip_attribute_min_only", [node("Clip", ["x"], ["y"], min=-0.5)], {}, [1, 6], 7, F32,
     ties=[_CLIP])  # fmt: skip
_SEL = np.eye(6)
case("max_min_variadic_broadcast",
     [node("MatMul", ["x", "S1"], ["a"]), node("MatMul", ["x", "S2"], ["b"]),
      node("Max", ["a", "b", "c"], ["mx"]), node("Min", ["a", "b", "d"], ["mn"]),
      node("Max", ["a"], ["one"]), node("Min", ["b", "c"], ["two"]),
      node("Concat", ["mx", "mn", "one", "two"], ["y"], axis=1)],
     {"S1": _SEL[:, :3], "S2": _SEL[:, 3:], "c": np.array([0.5, -0.25, 0.0]),
      "d": np.array([[0.25]])},
     [1, 6], 13,
     ties=[flat(32, -16, 0, 32, -16, 0), flat(16, 16, 16, 16, 16, 16),
           flat(5, -7, 0, 5, -7, 0)])  # fmt: skip
case("sum_variadic_broadcast",
     [node("Mul", ["x", "two"], ["x2"]), node("Sum", ["x", "c", "x2"], ["s"]),
      node("Sum", ["s"], ["y"])],
     {"two": np.array(2.0), "c": w(3)}, [1, 2, 3], 13)  # fmt: skip
_RED = [flat(3, 3, 3, 3, -1, -1, 2, 2, 0, 0, 0, 0)]
case("reduce_min_axes_attribute", [node("ReduceMin", ["x"], ["y"], axes=[2], keepdims=0)], {},
     [1, 3, 4], 13, ties=_RED)  # fmt: skip
case("reduce_min_axes_input", [node("ReduceMin", ["x", "a"], ["y"])], {"a": ints(-1, 1)},
     [1, 3, 4], 18, ties=_RED)  # fmt: skip
case("reduce_min_all_axes", [node("ReduceMin", ["x"], ["y"], keepdims=0)], {}, [1, 3, 4], 13,
     ties=_RED)  # fmt: skip
case("reduce_sum_axes_attribute", [node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], {},
     [1, 3, 4], 11)  # fmt: skip
case("reduce_sum_axes_input", [node("ReduceSum", ["x", "a"], ["y"])], {"a": ints(2, 1)},
     [1, 3, 4], 13)  # fmt: skip
case("reduce_sum_empty_axes_noop", [node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)],
     {}, [1, 3, 4], 13)  # fmt: skip
case("reduce_sum_all_axes", [node("ReduceSum", ["x"], ["y"], keepdims=0)], {}, [1, 3, 4], 13)
case("reduce_mean_axes_attribute", [node("ReduceMean", ["x"], ["y"], axes=[1, 2])], {},
     [1, 3, 4], 13)  # fmt: skip
case("reduce_mean_axes_input", [node("ReduceMean", ["x", "a"], ["y"], keepdims=0)],
     {"a": ints(1)}, [1, 3, 4], 18)  # fmt: skip

# ------------------------------------------------ tensors of different depths (skips)
# the graph tests/test_onnx.py refused as "a skip connection" (weights k/8 here)
case("skip_connection_of_test_onnx",
     [node("MatMul", ["x", "W0"], ["h"]), node("Relu", ["h"], ["r"]),
      node("Add", ["r", "x"], ["y"])],
     {"W0": w(2, 2)}, [1, 2], 13, F32)  # fmt: skip
case("residual_block",
     [node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1]), node("Relu", ["c1"], ["r1"]),
      node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1]),
      node("Add", ["c2", "x"], ["s"]), node("Relu", ["s"], ["y"])],
     {"W1": w(2, 2, 3, 3), "B1": w(2), "W2": w(2, 2, 3, 3), "B2": w(2)},
     [1, 2, 4, 4], 13, F32)  # fmt: skip
case("dense_concat_of_depths_0_1_2",
     [node("Gemm", ["x", "W1", "b1"], ["g1"]), node("Relu", ["g1"], ["h1"]),
      node("Concat", ["x", "h1"], ["c"], axis=1), node("Gemm", ["c", "W2", "b2"], ["g2"]),
      node("Relu", ["g2"], ["h2"]), node("Concat", ["h2", "x", "h1"], ["y"], axis=1)],
     {"W1": w(3, 4), "b1": w(4), "W2": w(7, 3), "b2": w(3)}, [1, 3], 13)  # fmt: skip
case("max_min_sub_across_depths",
     [node("MatMul", ["x", "W"], ["z"]), node("Relu", ["z"], ["h"]),
      node("Max", ["h", "x"], ["m"]), node("Min", ["x", "c"], ["n"]),
      node("Sub", ["m", "n"], ["y"])],
     {"W": w(3, 3), "c": w(3)}, [1, 3], 13)  # fmt: skip
case("sum_of_three_depths",
     [node("Gemm", ["x", "W1", "b1"], ["g1"]), node("Relu", ["g1"], ["h1"]),
      node("Gemm", ["h1", "W2", "b2"], ["g2"]), node("Relu", ["g2"], ["h2"]),
      node("Sum", ["h2", "x", "h1"], ["y"])],
     {"W1": w(3, 3), "b1": w(3), "W2": w(3, 3), "b2": w(3)}, [1, 3], 13)  # fmt: skip
case("skip_over_two_layers_into_the_output",
     [node("MatMul", ["x", "W1"], ["z1"]), node("Relu", ["z1"], ["h1"]),
      node("MatMul", ["h1", "W2"], ["z2"]), node("Relu", ["z2"], ["h2"]),
      node("MatMul", ["x", "W3"], ["lin"]), node("Add", ["h2", "lin"], ["s"]),
      node("Sub", ["s", "h1"], ["y"])],
     {"W1": w(2, 3), "W2": w(3, 3), "W3": w(2, 3)}, [1, 2], 13)  # fmt: skip

# ------------------------------------------------------------------------ networks
case("small_cnn",
     [node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
      node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
      node("Relu", ["n"], ["r"]), node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2],
                                       strides=[2, 2]),
      node("Flatten", ["p"], ["f"]), node("Gemm", ["f", "G", "g"], ["y"])],
     {"W": w(2, 1, 3, 3), "B": w(2), **bn_params(2, [0.5, 2.0]), "G": w(18, 3), "g": w(3)},
     [1, 1, 6, 6], 13, F32, rtol=1e-5)  # fmt: skip
case("small_cnn_exact_batchnorm_clip_pools",
     [node("Conv", ["x", "W"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
      node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], epsilon=0.0625),
      node("Clip", ["n", "zero", "six"], ["r"]),
      node("AveragePool", ["r"], ["a"], kernel_shape=[2, 2]),
      node("GlobalMaxPool", ["a"], ["p"]), node("Flatten", ["p"], ["f"]),
      node("Gemm", ["f", "G", "g"], ["y"], transB=1)],
     {"W": w(3, 2, 3, 3), **bn_params(3, [0.1875, 0.9375, 2.1875]), "zero": np.array(0.0),
      "six": np.array(6.0), "G": w(2, 3), "g": w(2)},
     [1, 2, 5, 5], 13, F32, rtol=1e-5)  # fmt: skip
case("pipeline_pad_slice_batchnorm_leaky_relu_maxpool_reduce",
     [node("Pad", ["x", "p"], ["pd"], mode="reflect"),
      node("Slice", ["pd", "st", "en", "ax", "sp"], ["sl"]),
      node("BatchNormalization", ["sl", "s", "b", "m", "v"], ["n"]),
      node("LeakyRelu", ["n"], ["l"], alpha=0.25),
      node("MaxPool", ["l"], ["mp"], kernel_shape=[2]),
      node("Abs", ["mp"], ["ab"]), node("ReduceSum", ["ab", "ax"], ["rs"], keepdims=0),
      node("ReduceMean", ["x"], ["rm"], axes=[2], keepdims=0),
      node("Sub", ["rs", "rm"], ["d"]), node("Gemm", ["d", "G", "g"], ["y"])],
     {"p": ints(0, 0, 1, 0, 0, 2), "st": ints(0), "en": ints(9), "ax": ints(2), "sp": ints(2),
      **bn_params(2, [0.5, 3.0]), "G": w(2, 3), "g": w(3)},
     [1, 2, 6], 16, rtol=1e-12)  # fmt: skip


# ------------------------------------------------------------------------ helpers


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def float_points(name: str, count: int = 4) -> list[list[float]]:
    """Random multiples of 1/64 in [-4, 4], 0, a constant input and the case's ties."""
    c, rng = CASES[name], _rng(name)
    pts = [list(rng.integers(-256, 257, size=c.dim) / 64) for _ in range(count)]
    return pts + [[0.0] * c.dim, [0.5] * c.dim] + c.ties


def rational_points(name: str, count: int = 3) -> list[list[Fraction]]:
    """Rationals that no float is (thirds, fifths, ...), for the exact comparison only."""
    c, rng = CASES[name], _rng(name + "/q")
    dens = [3, 5, 7, 9, 11]
    return [
        [Fraction(int(rng.integers(-60, 61)), dens[int(rng.integers(5))]) for _ in range(c.dim)]
        for _ in range(count)
    ]


def save(name: str, tmp_path) -> str:
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(CASES[name].model, path)
    return path


def session(name: str, path: str):
    """onnxruntime's session (onnx.reference's evaluator for the few graphs it cannot run)."""
    if CASES[name].reference:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(CASES[name].model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def ort_output(sess, name: str, x) -> np.ndarray:
    c = CASES[name]
    dtype = np.float32 if c.elem == F32 else np.float64
    arr = np.array(x, dtype=dtype).reshape(c.shape)
    assert [float(v) for v in arr.reshape(-1)] == list(x)  # the point is exact in the type
    return np.asarray(sess.run(None, {"x": arr})[0], dtype=np.float64).reshape(-1)


def assert_close(rt, exact, rtol, what):
    """onnxruntime's output within rtol of the exact one, relative to the output's largest
    magnitude (at least 1)."""
    e = np.array([float(v) for v in exact])
    assert rt.shape == e.shape, (what, rt.shape, e.shape)
    err = np.max(np.abs(rt - e), initial=0.0)
    assert err <= rtol * max(1.0, np.max(np.abs(e), initial=0.0)), (what, err, list(rt), list(e))


def evaluate(net, x) -> list[Fraction]:
    xq = tuple(Q(v.numerator, v.denominator) for v in map(Fraction, x))
    return [to_fraction(v) for v in evaluate_maxout(net, xq)]


# -------------------------------------------------------------------------- tests


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreter_agrees_with_onnxruntime(name, tmp_path):
    """The exact interpreter reads every graph as onnxruntime does (passes with or without
    the importer: it checks tests/onnx_semantics.py itself)."""
    c = CASES[name]
    onnx.checker.check_model(c.model, full_check=True)
    sess = session(name, save(name, tmp_path))
    for x in float_points(name):
        exact = run_exact(c.model, [Fraction(v) for v in x])
        assert_close(ort_output(sess, name, x), exact, c.rtol, f"{name} at {x}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_import_is_exact(name, tmp_path):
    """The imported Maxout network equals the graph exactly, at floats and at rationals."""
    c = CASES[name]
    path = save(name, tmp_path)
    net, report = import_onnx(path)
    assert net.input_dim == report.input_dim == c.dim
    sess = session(name, path)
    for x in float_points(name):
        exact = run_exact(c.model, [Fraction(v) for v in x])
        got = evaluate(net, x)
        assert got == exact, (name, x)
        assert_close(ort_output(sess, name, x), got, c.rtol, f"{name} at {x}")
    for x in rational_points(name):
        assert evaluate(net, x) == run_exact(c.model, x), (name, x)


def test_the_interpreters_batchnorm_multiplier_is_the_nearest_float64():
    """nearest_scale_over_sqrt checked exactly: m is a float64, and scale / sqrt(v) lies
    between the midpoints to m's neighbours (compared by squares, in rationals); a square
    v gives the exact quotient."""
    rng = np.random.default_rng(5)
    eps = Fraction(float(np.float32(1e-5)))
    for _ in range(300):
        s = Fraction(int(rng.integers(-300, 301)), int(rng.choice([1, 8, 256, 3])))
        v = Fraction(int(rng.integers(1, 10**6)), int(rng.choice([1, 16, 1000]))) + eps
        m = nearest_scale_over_sqrt(s, v)
        f = float(m)
        assert Fraction(f) == m
        if s == 0:
            assert m == 0
            continue
        assert (m > 0) == (s > 0)
        a = abs(f)
        lo = (Fraction(a) + Fraction(math.nextafter(a, 0))) / 2
        hi = (Fraction(a) + Fraction(math.nextafter(a, math.inf))) / 2
        assert lo * lo * v <= s * s <= hi * hi * v
        assert abs(f - float(s) / math.sqrt(float(v))) <= 2 * math.ulp(f)
    for s, root in [(Fraction(3, 8), Fraction(1, 2)), (Fraction(-5), Fraction(7, 4))]:
        assert nearest_scale_over_sqrt(s, root * root) == s / root


def test_the_skip_connection_refused_in_test_onnx_is_now_a_network(tmp_path):
    """y = Relu(W x) + x: the input is carried through the layer (tests/test_onnx.py refused
    this graph as a skip connection)."""
    net, _ = import_onnx(save("skip_connection_of_test_onnx", tmp_path))
    W = CASES["skip_connection_of_test_onnx"].model.graph.initializer[0]
    W = [[Fraction(float(v)) for v in row] for row in numpy_helper.to_array(W)]
    for x in ([Fraction(1, 3), Fraction(-2)], [Fraction(0), Fraction(0)], [Fraction(-1), 5]):
        h = [max(Fraction(0), sum(x[i] * W[i][j] for i in range(2))) for j in range(2)]
        assert evaluate(net, x) == [h[j] + x[j] for j in range(2)]


# ------------------------------------------------------------------------ refusals


def _command(path: str, out, cli: bool):
    """``exactmax import F -o out.json``: (exit status, stdout + stderr, stderr), in-process
    through cli.main or, with ``cli``, as ``python -m exactmax`` in a subprocess (the command
    line's own path: signal handlers, supervisor)."""
    argv = ["import", path, "-o", str(out)]
    if cli:
        r = subprocess.run(
            [sys.executable, "-m", "exactmax", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        return r.returncode, r.stdout + r.stderr, r.stderr
    import contextlib
    import io

    from exactmax.cli import main

    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = main(argv)
    return code, o.getvalue() + e.getvalue(), e.getvalue()


def _refused(path: str, tmp_path, *needles, any_of=(), cli=False):
    """Exit 2, one line naming the file and the node, no traceback, nothing written; the
    reader itself raises InputError."""
    out = tmp_path / "out.json"
    code, both, err = _command(path, out, cli)
    lines = err.strip().splitlines()
    assert code == 2, both
    assert "Traceback" not in both
    assert len(lines) == 1 and lines[0].startswith("exactmax: error: "), err
    assert os.path.basename(path) in lines[0]
    for n in needles:
        assert n in lines[0], lines[0]
    assert not any_of or any(n in lines[0] for n in any_of), lines[0]
    assert not out.exists()
    with pytest.raises(InputError):
        import_onnx(path)


def _after_a_relu_layer(tmp_path, name, last_nodes, opset=13):
    nodes = [node("MatMul", ["x", "W0"], ["h"]), node("Relu", ["h"], ["r"])] + last_nodes
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model(name, nodes, {"W0": w(2, 2)}, [1, 2], opset), path)
    return path


NOT_PIECEWISE_LINEAR = ("Sigmoid", "Tanh", "Softplus", "Exp", "Log", "Sign", "Floor", "Ceil",
                        "Round", "Elu", "Sqrt", "Reciprocal")  # fmt: skip


@pytest.mark.parametrize("op", NOT_PIECEWISE_LINEAR)
def test_an_operator_that_is_not_piecewise_linear_is_refused(op, tmp_path):
    name = f"the_{op.lower()}"
    path = _after_a_relu_layer(tmp_path, f"refused_{op}", [node(op, ["r"], ["y"], name=name)])
    _refused(path, tmp_path, name, op, "piecewise linear", cli=op in ("Sigmoid", "Floor"))


_BILINEAR = ("input-dependent", "bilinear", "depend on the input")


@pytest.mark.parametrize("form", ["mul_same_depth", "mul_across_depths", "matmul"])
def test_a_product_of_two_input_dependent_tensors_is_refused(form, tmp_path):
    if form == "mul_same_depth":
        last = [node("Mul", ["h", "h"], ["y"], name="the_product")]
    elif form == "mul_across_depths":
        last = [node("Mul", ["r", "x"], ["y"], name="the_product")]
    else:
        last = [
            node("Transpose", ["r"], ["t"]),
            node("MatMul", ["t", "x"], ["y"], name="the_product"),
        ]
    path = _after_a_relu_layer(tmp_path, f"bilinear_{form}", last)
    _refused(path, tmp_path, "the_product", any_of=_BILINEAR, cli=form == "mul_across_depths")


def test_batchnormalization_in_training_mode_is_refused(tmp_path):
    n = node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "running_mean", "running_var"],
             training_mode=1, name="bn")  # fmt: skip
    path = str(tmp_path / "batchnorm_training.onnx")
    onnx.save(model("bn", [n], bn_params(2, [0.5, 2.0]), [1, 2, 3], 15), path)
    _refused(path, tmp_path, "bn", "BatchNormalization", "training", cli=True)


# ----------------------------------------------- found by benchmarks/fuzz.py --io (helper-13)


def _raw(tmp_path, name, nodes, inits, in_shape, opset=13, elem=F32):
    """A graph written as given (no shape inference: some of these are malformed)."""
    dtype = np.float32 if elem == F32 else np.float64
    tensors = [
        numpy_helper.from_array(
            np.asarray(v, dtype=dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v), k
        )
        for k, v in inits.items()
    ]
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", elem, list(in_shape))],
        [helper.make_tensor_value_info("y", elem, None)], tensors)  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(m, path)
    return path


def test_a_max_of_constants_makes_no_empty_layer(tmp_path):
    """Relu(x - x) is the constant 0: no unit, no layer without units (which no command
    reads), the network the constant."""
    path = _raw(tmp_path, "constant_relu", [node("Sub", ["x", "x"], ["d"]),
                                            node("Relu", ["d"], ["y"])], {}, [1, 2])  # fmt: skip
    net, _ = import_onnx(path)
    assert all(layer.width for layer in net.layers)
    assert evaluate(net, [Fraction(3), Fraction(-5)]) == [0, 0]


@pytest.mark.parametrize(
    "name, nodes, inits, in_shape, needles",
    [
        ("bn_epsilon_inf",
         [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=float("inf"))],
         bn_params(2, [0.5, 2.0]), [1, 2, 3], ("not a finite number",)),
        ("leaky_alpha_inf", [node("LeakyRelu", ["x"], ["y"], alpha=float("inf"))], {}, [1, 2],
         ("not a finite number",)),
        ("pad_huge", [node("Pad", ["x", "p"], ["y"])], {"p": ints(0, 0, 0, 2**40)}, [1, 2],
         ("at most", "per tensor")),
        ("conv_pads_huge", [node("Conv", ["x", "W"], ["y"], pads=[2**40, 0])],
         {"W": w(1, 1, 1)}, [1, 1, 2], ("at most", "per tensor")),
        ("bn_params_2d",
         [node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
         {k: np.asarray(v).reshape(2, 1) for k, v in bn_params(2, [0.5, 2.0]).items()},
         [1, 2, 3], ("shape [2]",)),
        ("conv_auto_pad_and_pads",
         [node("Conv", ["x", "W"], ["y"], auto_pad="SAME_UPPER", pads=[0, 0])],
         {"W": w(1, 1, 2)}, [1, 1, 3], ("auto_pad", "pads")),
    ],
)  # fmt: skip
def test_malformed_or_oversized_graphs_are_refused_in_one_line(
    name, nodes, inits, in_shape, needles, tmp_path
):
    _refused(_raw(tmp_path, name, nodes, inits, in_shape), tmp_path, *needles)


def test_clip_before_opset_11_clips_at_the_float32_extremes_by_default(tmp_path):
    path = _raw(tmp_path, "clip6", [node("MatMul", ["x", "W"], ["h"]),
                                    node("Clip", ["h"], ["y"])],
                {"W": np.array([[3e38, 0.0], [3e38, 1.0]])}, [1, 2], opset=8)  # fmt: skip
    net, _ = import_onnx(path)
    top = Fraction(float(np.finfo(np.float32).max))
    assert evaluate(net, [Fraction(1), Fraction(1)]) == [top, 1]
    assert evaluate(net, [Fraction(-1), Fraction(-1)]) == [-top, -1]


@pytest.mark.parametrize("name", ["residual_block", "small_cnn_exact_batchnorm_clip_pools",
                                  "dense_concat_of_depths_0_1_2"])  # fmt: skip
def test_the_transformer_of_a_lowered_network_is_proved_equal_layerwise(name, tmp_path):
    """The paper's construction on a lowered network (convolutions, batch normalization,
    pooling, Clip, residual connections: layers of mixed ranks with pass-through units):
    ``verify --strategy layerwise`` proves its Transformer equal on a box, kernel-checked."""
    import json

    path = save(name, tmp_path)
    out = tmp_path / "verify.out"
    with open(out, "w") as f:
        code = subprocess.run(
            [sys.executable, "-m", "exactmax", "verify", path, "--box", "-1,1", "--strategy",
             "layerwise", "--json", "--timeout", "300"],
            stdout=f, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=400,
        ).returncode  # fmt: skip
    answer = json.loads(out.read_text())
    assert code == 0 and answer["verdict"] == "proved" and answer["trust"] == "kernel-checked"
    assert answer["certificate_kind"] == "layerwise" and answer["stats"]["strategy"] == "layerwise"
