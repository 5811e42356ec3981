"""Which certificate proves A = B when the two Maxout networks are equal but not layer-aligned
(issue #21): by default a layer correspondence where the layers are related by affine maps
(these two are: ``tests/test_correspondence.py``), else the pair-property route (the pair program x -> (A(x), B(x)) with no
output where a_o != b_o, ``kernel/pair.check_pair_property`` with epsilon 0), or with
``--certificate-kind equivalence`` the split tree for A - B = 0 that export-coq reads; a moved
bias refuted through the pair route at a point the kernel evaluated."""

from __future__ import annotations

import copy
import json
from fractions import Fraction as F

import pytest

from exactmax.cli import main
from exactmax.io import load_model
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.pair import check_pair_property
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal


def net(layers, W, b) -> dict:
    s = lambda v: str(F(v))   # noqa: E731
    return {"format": "exactmax/maxout", "version": 1, "input_dim": 2,
            "layers": [{"units": [{"pieces": [{"w": [s(v) for v in w], "b": s(c)}
                                              for w, c in unit]} for unit in layer]}
                       for layer in layers],
            "output": {"W": [[s(v) for v in W]], "b": [s(b)]},
            "domain": {"box": {"lower": ["-1", "-1"], "upper": ["1", "1"]}}}


# A: u1 = max(x1 + x2, x1 - x2, 1/2), u2 = max(x2, -x1); v = max(u1 - u2, u2 + 1/3); y = v - 1
A = net([[[((1, 1), 0), ((1, -1), 0), ((0, 0), F(1, 2))], [((0, 1), 0), ((-1, 0), 0)]],
         [[((1, -1), 0), ((0, 1), F(1, 3))]]], (1,), -1)
# B: u1 split as a + c with a = x1 + x2, c = max(0, -2 x2, 1/2 - x1 - x2); u2 doubled; the
# first layer (2 u2, a, c), the second layer's pieces reversed: the same function, 3 units wide
B = net([[[((0, 2), 0), ((-2, 0), 0)], [((1, 1), 0)], [((0, 0), 0), ((0, -2), 0),
                                                         ((-1, -1), F(1, 2))]],
         [[((F(1, 2), 0, 0), F(1, 3)), ((F(-1, 2), 1, 1), 0)]]], (1,), -1)
# B with the bias of the second layer's piece u2 + 1/3 moved by 1/1000: differs only where
# that piece is the max
MOVED = copy.deepcopy(B)
MOVED["layers"][1]["units"][0]["pieces"][0]["b"] = str(F(1, 3) + F(1, 1000))


@pytest.fixture
def files(tmp_path):
    out = {}
    for name, obj in (("a", A), ("b", B), ("m", MOVED)):
        out[name] = str(tmp_path / f"{name}.json")
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
    return out


def run(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_an_unaligned_equal_pair_is_proved_by_the_pair_route(files, tmp_path, capsys):
    cert = str(tmp_path / "c.json")
    code, out = run(capsys, "equiv", files["a"], files["b"], "--cert", cert,
                    "--certificate-kind", "pair-property")
    assert code == 0 and out["verdict"] == "proved" and out["trust"] == "kernel-checked"
    assert out["certificate_kind"] == "pair-property" and out["certificate"] == cert
    assert out["stats"]["strategy"] == "pair"
    code, chk = run(capsys, "check-cert", cert, "--models", files["a"], files["b"])
    assert code == 0 and chk["verdict"] == "valid" and chk["leaves"] == out["stats"]["leaves"]
    # the certificate is about A and B, not about the moved twin
    assert main(["check-cert", cert, "--models", files["a"], files["m"]]) == 1
    assert "rejected" in capsys.readouterr().out


def test_the_pair_tree_is_a_proof_of_equality_for_the_kernel(files):
    a, b, m = (load_model(files[k]) for k in ("a", "b", "m"))
    v = verify_equal(a, b, a.domain, VerifyOptions(timeout_s=60, correspondence=False))
    assert v.verdict == "proved" and v.stats["certificate_kind"] == "pair-property"
    assert "layerwise_failed" in v.stats   # layerwise first, which needs equal widths
    assert check_pair_property(a, b, a.domain, Q(0), v.certificate) == v.stats["leaves_checked"]
    with pytest.raises(CheckFailed):   # the same tree does not prove A = moved B
        check_pair_property(a, m, a.domain, Q(0), v.certificate)


def test_certificate_kind_equivalence_keeps_the_coq_exportable_certificate(files, tmp_path,
                                                                            capsys):
    cert = str(tmp_path / "e.json")
    code, out = run(capsys, "equiv", files["a"], files["b"], "--cert", cert,
                    "--certificate-kind", "equivalence")
    assert code == 0 and out["certificate_kind"] == "equivalence"
    assert out["stats"]["strategy"] == "monolithic"
    assert main(["check-cert", cert]) == 0
    assert "A = B on the domain" in capsys.readouterr().out


def test_a_moved_bias_is_refuted_through_the_pair_route(files, capsys):
    code, out = run(capsys, "equiv", files["a"], files["m"], "--no-search")
    assert code == 1 and out["verdict"] == "refuted" and out["stats"]["strategy"] == "pair"
    x = tuple(Q(F(t).numerator, F(t).denominator) for t in out["counterexample"]["x"])
    a, m = load_model(files["a"]), load_model(files["m"])
    assert a.domain.contains(x)
    ya, ym = evaluate_maxout(a, x), evaluate_maxout(m, x)
    assert ya != ym and [str(ym[0] - ya[0])] == ["1/1000"]
    assert out["counterexample"]["outputs"][files["a"]] == [str(t) for t in ya]


def test_pair_property_with_a_non_auto_strategy_is_a_usage_error(files, capsys):
    code = main(["equiv", files["a"], files["b"], "--certificate-kind", "pair-property",
                 "--strategy", "monolithic"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("exactmax: error:") and len(err.splitlines()) == 1


def test_export_coq_writes_both_kinds_of_certificate(files, tmp_path, capsys):
    """A pair-property certificate of two Maxout networks exports (proofs/Pair.v: the theorem
    net_pair), as the equivalence kind does (net_equiv)."""
    pair, eq = str(tmp_path / "p.json"), str(tmp_path / "e.json")
    assert main(["equiv", files["a"], files["b"], "--cert", pair, "--certificate-kind",
                 "pair-property"]) == 0
    assert main(["equiv", files["a"], files["b"], "--cert", eq,
                 "--certificate-kind", "equivalence"]) == 0
    capsys.readouterr()
    assert main(["export-coq", pair, "-o", str(tmp_path / "p.v")]) == 0
    assert "Theorem net_pair" in (tmp_path / "p.v").read_text()
    assert main(["export-coq", eq, "-o", str(tmp_path / "e.v")]) == 0
    assert "Theorem net_equiv" in (tmp_path / "e.v").read_text()


def test_by_default_the_layers_related_by_affine_maps_give_a_correspondence(files, capsys):
    code, out = run(capsys, "equiv", files["a"], files["b"])
    assert code == 0 and out["certificate_kind"] == "correspondence"
    assert out["stats"]["strategy"] == "correspondence"
    code, out = run(capsys, "equiv", files["a"], files["m"])   # no map relates the moved twin
    assert code == 1 and out["verdict"] == "refuted"
