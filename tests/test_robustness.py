"""Inputs that once crashed or misbehaved: each must give one clear line and exit 2, or the
right answer."""

import json
import os
from dataclasses import replace

import pytest

from exactmax.cli import main
from exactmax.construct.bounds import DomainError
from exactmax.construct.transformer import compile_transformer
from exactmax.io import load_model
from exactmax.vectorized.scaled import MaxoutEvaluator
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.vectorized.scaled import TransformerEvaluator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


def test_a_negative_first_coordinate_is_an_input(capsys):
    assert main(["eval", TENT, "--input", "-1/2,1", "--json"]) == 0
    # by hand: h1 = (max(-1, 0, 7/4), max(-1/6, 0), max(-1, 1)) = (7/4, 0, 1),
    # h2 = (max(7/4 + 1/2, -7/4 + 1/3), max(-1 - 1/5, 7/4, 0)) = (9/4, 7/4), y = 9/4 - 7/4
    out = json.loads(capsys.readouterr().out)
    assert out.pop("exactmax_version") and out["output"] == ["1/2"]


def test_write_errors_are_input_errors(capsys, tmp_path):
    assert main(["compile", TENT, "-o", str(tmp_path / "missing" / "tf.json")]) == 2
    assert main(["compile", TENT, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot write here" in err and "is a directory" in err


def test_many_sparse_heads_cannot_ask_for_gigabytes(tmp_path, capsys):
    head = {"key": {"shape": [1500000, 1], "entries": []},
            "query": {"shape": [1500000, 1], "entries": []},
            "value": {"shape": [0, 1], "entries": []}, "out": {"shape": [1, 0], "entries": []}}
    tf = {"format": "exactmax/transformer", "version": 1, "input_dim": 1, "d_model": 1,
          "embedding": [[1]], "positions": [[0]],
          "sublayers": [{"attention": {"heads": [head] * 4}}], "readout": {"W": [[1]], "b": [0]}}
    p = tmp_path / "tf.json"
    p.write_text(json.dumps(tf))
    assert main(["info", str(p)]) == 2
    assert "beyond the limit" in capsys.readouterr().err


def test_meta_numbers_must_stay_finite_and_shallow(tmp_path, capsys):
    net = json.load(open(TENT))
    p = tmp_path / "n.json"
    net["meta"] = {"x": 1}
    p.write_text(json.dumps(net).replace('"x": 1', '"x": 1e400'))
    assert main(["info", str(p)]) == 2
    net["meta"] = {"deep": 0}
    p.write_text(json.dumps(net).replace("0}", "[" * 700 + "]" * 700 + "}", 1))
    assert main(["info", str(p)]) == 2
    assert capsys.readouterr().err.count("\n") == 2


def test_the_kernel_checks_shapes_of_models_built_in_python():
    net = load_model(TENT)
    bad = replace(net, output=replace(net.output, W=((Q(1),),), in_dim=1))
    with pytest.raises(ValueError):
        MaxoutEvaluator(bad)
    tf = compile_transformer(net).transformer
    with pytest.raises(ValueError):
        TransformerEvaluator(replace(tf, readout=replace(tf.readout, token=-1)))
    with pytest.raises(ValueError):
        Box((Q(0),), (Q(1),)).contains((Q(0), Q(0)))
    with pytest.raises(DomainError):
        compile_transformer(net, Box((Q(0),), (Q(0),)))


def test_ties_do_not_blow_up_the_denominators():
    """A deep rank-6 network: the Transformer's exact evaluation keeps small numbers."""
    from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
    unit = Unit(tuple(Piece((Q(1, 2),), Q(j, 7)) for j in range(6)))
    net = MaxoutNetwork(1, (Layer((unit,)),) * 30, domain=Box((Q(-1),), (Q(1),)))
    tf = compile_transformer(net).transformer
    X, E = TransformerEvaluator(tf).states([(Q(1, 3),)])[-1]
    assert int(E).bit_length() < 600
    assert TransformerEvaluator(tf).evaluate((Q(1, 3),)) == MaxoutEvaluator(net).evaluate((Q(1, 3),))
