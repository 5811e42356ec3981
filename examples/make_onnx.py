"""Write the small ONNX network and VNN-LIB properties of the guide's examples (docs/onnx-vnnlib.md,
docs/certificates.md): ``python examples/make_onnx.py`` (re)writes, next to this script,

- ``small_relu.onnx``: x in R^2 -> y = W2 ReLU(W1 x + b1) + b2 in R^1, three hidden units, every
  weight a float32 that is a small dyadic rational (so exactmax reads it exactly as written
  here); ONNX opset 13, MatMul / Add / Relu;
- ``small_relu_unsat.vnnlib``: for x in [-1, 1]^2, can y reach 4?  (no: y <= 2 on the box);
- ``small_relu_sat.vnnlib``: for x in [-1, 1]^2, can y reach 3/2?  (yes: y(1, 1) = 2).
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

# y = relu(x0 + x1 + 1/2) + relu(x0 - x1) / 2 + relu(1/4 - x0) / 4 - 1/2 = W2 relu(W1 x + b1) + b2
W1 = np.array([[1.0, 1.0], [1.0, -1.0], [-1.0, 0.0]], dtype=np.float32)
B1 = np.array([0.5, 0.0, 0.25], dtype=np.float32)
W2 = np.array([[1.0, 0.5, 0.25]], dtype=np.float32)
B2 = np.array([-0.5], dtype=np.float32)


def network() -> onnx.ModelProto:
    init = [numpy_helper.from_array(W1.T.copy(), "W1"), numpy_helper.from_array(B1, "b1"),
            numpy_helper.from_array(W2.T.copy(), "W2"), numpy_helper.from_array(B2, "b2")]
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "W2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["Y"])]
    graph = helper.make_graph(
        nodes, "small_relu",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1])], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="exactmax examples")
    onnx.checker.check_model(model)
    return model


def prop(threshold: str) -> str:
    return ("; for x in [-1, 1]^2, can y reach " + threshold + "?\n"
            "(declare-const X_0 Real)\n(declare-const X_1 Real)\n(declare-const Y_0 Real)\n"
            "(assert (>= X_0 -1))\n(assert (<= X_0 1))\n"
            "(assert (>= X_1 -1))\n(assert (<= X_1 1))\n"
            f"(assert (>= Y_0 {threshold}))\n")


if __name__ == "__main__":
    onnx.save(network(), os.path.join(HERE, "small_relu.onnx"))
    for name, threshold in (("small_relu_unsat", "4"), ("small_relu_sat", "1.5")):
        with open(os.path.join(HERE, name + ".vnnlib"), "w") as f:
            f.write(prop(threshold))
