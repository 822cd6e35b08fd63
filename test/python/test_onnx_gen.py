"""The test-model generator used by the importer's lit tests."""
import onnx
import pytest

import onnx_gen as G


def test_save_writes_a_checked_model(tmp_path):
    path = G.save("relu", [G.node("Relu", ["x"], ["y"])],
                  [G.vi("x", G.T.FLOAT, [2, 3])], [G.vi("y", G.T.FLOAT, [2, 3])],
                  outdir=str(tmp_path))
    model = onnx.load(path)
    assert model.opset_import[0].version == 17
    assert [n.op_type for n in model.graph.node] == ["Relu"]


def test_save_rejects_invalid_graphs(tmp_path):
    with pytest.raises(onnx.checker.ValidationError):
        G.save("bad", [G.node("Relu", ["missing"], ["y"])],
               [G.vi("x", G.T.FLOAT, [2])], [G.vi("y", G.T.FLOAT, [2])],
               outdir=str(tmp_path))


def test_initializers_round_trip(tmp_path):
    import numpy as np
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    path = G.save("mm", [G.node("MatMul", ["x", "w"], ["y"])],
                  [G.vi("x", G.T.FLOAT, [4, 2])], [G.vi("y", G.T.FLOAT, [4, 3])],
                  [G.init("w", w)], outdir=str(tmp_path))
    loaded = onnx.numpy_helper.to_array(onnx.load(path).graph.initializer[0])
    assert (loaded == w).all()
