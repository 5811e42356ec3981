"""verify / equiv / check-cert: proved only with a kernel-checked certificate, refuted only
with a point the kernel evaluated, never a proof of a broken Transformer."""

import json
import os
import subprocess
import sys

import pytest

from exactmax.cli import main
from exactmax.construct.transformer import compile_transformer
from exactmax.io import load_model
from exactmax.kernel.maxout import evaluate_maxout
from exactmax.kernel.transformer import evaluate_transformer
from exactmax.prove.verify import VerifyOptions, verify_equal
from mutants import BROKEN, EQUIVALENT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


@pytest.fixture(scope="module")
def tent():
    net = load_model(TENT)
    return net, compile_transformer(net)


@pytest.mark.parametrize("mutant", BROKEN, ids=lambda m: m.__name__)
def test_a_broken_transformer_is_never_proved(tent, mutant):
    net, c = tent
    tf = mutant(net, c)
    v = verify_equal(net, tf, net.domain, VerifyOptions(timeout_s=60))
    assert v.verdict != "proved"
    if mutant.__name__ == "query_depends_on_x":
        assert v.verdict == "unknown" and "bilinear" in v.reason
        return
    assert v.verdict == "refuted", v.reason
    x = v.x
    assert net.domain.contains(x)
    assert evaluate_maxout(net, x) != evaluate_transformer(tf, x)
    assert v.outputs == (evaluate_maxout(net, x), evaluate_transformer(tf, x))


@pytest.mark.parametrize("mutant", EQUIVALENT, ids=lambda m: m.__name__)
def test_an_equivalent_rewrite_is_proved(tent, mutant):
    net, c = tent
    v = verify_equal(net, mutant(net, c), net.domain)
    assert (v.verdict, v.trust) == ("proved", "kernel-checked")


@pytest.mark.parametrize("name", ["tent.json", "relu_triangle.json"])
def test_verify_cli_proves_the_examples_and_writes_a_checkable_certificate(tmp_path, capsys,
                                                                           name):
    net = os.path.join(ROOT, "examples", name)
    cert = tmp_path / "cert.json.gz"
    assert main(["verify", net, "--cert", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "proved" and out["trust"] == "kernel-checked"
    assert out["counterexample"] is None and out["certificate"] == str(cert)
    # re-checked by the kernel alone, in a fresh process that must not import z3
    code = ("import sys; from exactmax.cli import main; r = main(['check-cert', sys.argv[1], "
            "'--json']); assert 'z3' not in sys.modules, 'z3 imported'; sys.exit(r)")
    r = subprocess.run([sys.executable, "-c", code, str(cert)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["verdict"] == "valid"


def test_equiv_refutes_two_different_maxout_networks(tmp_path, capsys):
    a = json.load(open(TENT))
    b = json.loads(json.dumps(a))
    b["layers"][1]["units"][0]["pieces"][1]["b"] = "1/2"   # was 1/3
    pb = tmp_path / "b.json"
    pb.write_text(json.dumps(b))
    assert main(["equiv", TENT, str(pb), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "refuted"
    x = out["counterexample"]["x"]
    ya, yb = out["counterexample"]["outputs"].values()
    assert ya != yb
    from exactmax.io.numbers import parse_rational
    xq = tuple(parse_rational(v) for v in x)
    assert [str(v) for v in evaluate_maxout(load_model(TENT), xq)] == ya


def test_equiv_proves_a_network_equal_to_itself_rewritten(tmp_path, capsys):
    a = json.load(open(TENT))
    b = json.loads(json.dumps(a))
    units = b["layers"][0]["units"]
    units[0]["pieces"] = units[0]["pieces"][::-1]          # reorder pieces
    units[0]["pieces"].append(units[0]["pieces"][0])       # duplicate a piece
    pb = tmp_path / "b.json"
    pb.write_text(json.dumps(b))
    assert main(["equiv", TENT, str(pb)]) == 0
    assert "proved (certificate checked by the kernel)" in capsys.readouterr().out


def test_bilinear_scores_give_unknown_with_exit_3(tent, tmp_path, capsys):
    from exactmax.io import model_to_json
    from mutants import query_depends_on_x
    net, c = tent
    p = tmp_path / "tf.json"
    p.write_text(json.dumps(model_to_json(query_depends_on_x(net, c))))
    assert main(["verify", TENT, "--transformer", str(p), "--no-search"]) == 3
    assert "bilinear" in capsys.readouterr().out
    # the search evaluates bilinear scores exactly and finds a point the kernel confirms
    assert main(["verify", TENT, "--transformer", str(p)]) == 1
    assert "found by the search" in capsys.readouterr().out


def test_verify_refutes_with_exit_1_and_prints_the_point(tent, tmp_path, capsys):
    from exactmax.io import model_to_json
    from mutants import weight_off
    net, c = tent
    p = tmp_path / "tf.json"
    p.write_text(json.dumps(model_to_json(weight_off(net, c))))
    assert main(["verify", TENT, "--transformer", str(p)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("refuted:") and "x = (" in out


def test_a_jumping_head_is_proved_by_z3_without_a_certificate(tent):
    """Tied keys with different values: the certificate format cannot express the average,
    so the same Transformer compared with itself is proved by z3 only, and says so."""
    from mutants import value_differs_on_one_token
    net, c = tent
    tf = value_differs_on_one_token(net, c)
    v = verify_equal(tf, tf, net.domain, VerifyOptions(timeout_s=60, strategy="monolithic"))
    assert (v.verdict, v.trust) == ("proved", "solver-only")
    assert "no certificate" in v.reason and "tie" in v.reason


def test_a_size_limit_gives_unknown_or_solver_only(tent, capsys):
    net, c = tent
    v = verify_equal(net, c.transformer, net.domain,
                     VerifyOptions(timeout_s=60, strategy="monolithic", max_leaves=2))
    assert v.trust != "kernel-checked"
    assert "more than 2 leaves" in v.reason


def test_a_timeout_gives_unknown_with_exit_3(capsys):
    net = os.path.join(ROOT, "examples", "maxout_d3_w4_r3.json")
    assert main(["verify", net, "--strategy", "monolithic", "--timeout", "0.05"]) == 3
    assert "timeout" in capsys.readouterr().out


def test_strategies_agree_and_merged_transformers_are_proved_layerwise(tent):
    from exactmax.construct.transformer import CompileOptions
    net, c = tent
    for strategy in ("layerwise", "monolithic", "auto"):
        v = verify_equal(net, c.transformer, net.domain, VerifyOptions(strategy=strategy))
        assert (v.verdict, v.trust) == ("proved", "kernel-checked")
        assert v.stats["strategy"] == ("monolithic" if strategy == "monolithic" else "layerwise")
    merged = compile_transformer(net, options=CompileOptions(merged=True)).transformer
    v = verify_equal(net, merged, net.domain)
    assert (v.verdict, v.trust, v.stats["strategy"]) == ("proved", "kernel-checked", "layerwise")
    assert v.certificate.unmerged is not None


def test_units_of_the_construction_are_recognised_without_splits(tmp_path, capsys):
    """Without an output map every claim of the construction is a unit whose hardmax values
    reorder the Maxout unit's pieces: one leaf each, no split, and check-cert accepts it."""
    net = json.load(open(os.path.join(ROOT, "examples", "maxout_d3_w4_r3.json")))
    del net["output"]
    p = tmp_path / "n.json"
    p.write_text(json.dumps(net))
    cert = tmp_path / "c.json"
    assert main(["verify", str(p), "--cert", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "proved" and out["stats"]["splits"] == 0
    assert main(["check-cert", str(cert)]) == 0


def test_two_maxout_networks_of_the_same_shape_are_compared_layer_by_layer(tmp_path, capsys):
    """A correspondence first (milliseconds, A = B everywhere: pieces reordered is one);
    --strategy layerwise compares the layers on the domain."""
    reordered = os.path.join(ROOT, "examples", "tent_reordered.json")
    cert = tmp_path / "c.json"
    assert main(["equiv", TENT, reordered, "--cert", str(cert), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certificate_kind"] == "correspondence" and out["trust"] == "kernel-checked"
    assert main(["check-cert", str(cert)]) == 0
    capsys.readouterr()
    assert main(["equiv", TENT, reordered, "--cert", str(cert), "--json", "--strategy",
                 "layerwise"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["strategy"] == "layerwise" and out["trust"] == "kernel-checked"
    assert main(["check-cert", str(cert)]) == 0


def test_equal_networks_that_differ_layer_by_layer_fall_back_to_a_whole_domain_tree(
        tmp_path, capsys):
    """Swap two units of the first layer and the matching weights of the second: the same
    function, but the first layers differ, so layerwise must not succeed (and must not be
    trusted); a layer correspondence (the permutation) proves it, or with --certificate-kind
    pair-property the pair-property certificate, or with --certificate-kind equivalence the
    monolithic one."""
    a = json.load(open(TENT))
    b = json.loads(json.dumps(a))
    u = b["layers"][0]["units"]
    u[0], u[1] = u[1], u[0]
    for unit in b["layers"][1]["units"]:
        for p in unit["pieces"]:
            p["w"][0], p["w"][1] = p["w"][1], p["w"][0]
    pb = tmp_path / "b.json"
    pb.write_text(json.dumps(b))
    assert main(["equiv", TENT, str(pb), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["strategy"] == "correspondence" and out["trust"] == "kernel-checked"
    assert out["certificate_kind"] == "correspondence"
    assert main(["equiv", TENT, str(pb), "--json", "--strategy", "layerwise"]) == 0
    out = json.loads(capsys.readouterr().out)  # the layers differ: layerwise fails, then a tree
    assert "layerwise" in out["stats"]["layerwise_failed"]
    assert main(["equiv", TENT, str(pb), "--json", "--certificate-kind", "pair-property"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["strategy"] == "pair" and out["trust"] == "kernel-checked"
    assert out["certificate_kind"] == "pair-property"
    assert main(["equiv", TENT, str(pb), "--json", "--certificate-kind", "equivalence"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stats"]["strategy"] == "monolithic" and out["trust"] == "kernel-checked"
    assert out["certificate_kind"] == "equivalence"
    assert "layerwise" in out["stats"]["layerwise_failed"]
