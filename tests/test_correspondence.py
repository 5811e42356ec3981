"""Layer correspondences (kernel/correspondence.py, prove/correspondence.py): if A's units are
the maxima of B's units' pieces pulled through the maps h^A_l = M_l h^B_l + m_l, then
A(x) = B(x) for every x in Q^d; the kernel accepts exactly such maps."""

import json
import random
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exactmax.io.certificates import certificate_to_json, load_certificate
from exactmax.io.models import domain_to_json, model_to_json
from exactmax.kernel.affine import Affine
from exactmax.kernel.correspondence import Correspondence, check_correspondence
from exactmax.kernel.equivalence import check_equivalence
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.correspondence import NoCorrespondence, find_correspondence


def _num(rng):
    return Q(rng.randint(-9, 9), rng.randint(1, 4))


def network(rng, d, widths, rank, outputs=1):
    layers, prev = [], d
    for w in widths:
        layers.append(Layer(tuple(
            Unit(tuple(Piece(tuple(_num(rng) for _ in range(prev)), _num(rng))
                       for _ in range(rng.randint(min(2, rank), rank))))
            for _ in range(w))))
        prev = w
    out = Affine(tuple(tuple(_num(rng) for _ in range(prev)) for _ in range(outputs)),
                 tuple(_num(rng) for _ in range(outputs)), prev)
    return MaxoutNetwork(d, tuple(layers), out)


def rewrite(rng, net: MaxoutNetwork, split: bool = True) -> MaxoutNetwork:
    """``net`` with every unit scaled by c > 0 (the next layer divides it back), units and
    pieces permuted, and (if ``split``) unit 0 of layer 1, max(a, b, ...), written as the two
    units a and max(0, b - a, ...): equal to ``net`` everywhere."""
    scale = [[Q(rng.randint(1, 5), rng.randint(1, 5)) for _ in l.units] for l in net.layers]
    perm = [rng.sample(range(l.width), l.width) for l in net.layers]
    d = net.input_dim
    layers = []
    for l, layer in enumerate(net.layers):
        before = scale[l - 1] if l else [Q(1)] * d
        order = perm[l - 1] if l else list(range(d))
        units = []
        for i in perm[l]:
            c = scale[l][i]
            pieces = [Piece(tuple(p.w[j] / before[j] * c for j in order), p.b * c)
                      for p in layer.units[i].pieces]
            rng.shuffle(pieces)
            units.append(pieces)
        layers.append(units)
    W = tuple(tuple(row[j] / scale[-1][j] for j in perm[-1]) for row in net.output.W)
    if split and len(layers) >= 2 and len(layers[0][0]) >= 2:
        a, rest = layers[0][0][0], layers[0][0][1:]
        zero = Piece((Q(0),) * d, Q(0))
        layers[0] = [[a], [zero] + [Piece(tuple(x - y for x, y in zip(p.w, a.w)), p.b - a.b)
                                    for p in rest]] + layers[0][1:]
        layers[1] = [[Piece((p.w[0],) + p.w, p.b) for p in u] for u in layers[1]]
    width = len(layers[-1])
    return MaxoutNetwork(d, tuple(Layer(tuple(Unit(tuple(u)) for u in l)) for l in layers),
                         Affine(W, net.output.b, width))


def relu(d, rows):
    """One layer of ReLU units max(w . x + b, 0), output the sum."""
    units = tuple(Unit((Piece(tuple(Q(v) for v in w), Q(b)), Piece((Q(0),) * d, Q(0))))
                  for w, b in rows)
    return MaxoutNetwork(d, (Layer(units),), Affine(((Q(1),) * len(rows),), (Q(0),), len(rows)))


def maps(*layers):
    return Correspondence(tuple(Affine(tuple(tuple(Q(v) for v in r) for r in M),
                                       tuple(Q(v) for v in m), len(M[0])) for M, m in layers))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 4), st.integers(1, 5), st.integers(2, 4))
def test_a_rewrite_is_related_layer_by_layer_and_equal_everywhere(seed, depth, width, rank):
    rng = random.Random(seed)
    a = network(rng, 3, [width] * depth, rank, outputs=2)
    b = rewrite(rng, a)
    cert = find_correspondence(a, b)
    assert check_correspondence(a, b, cert) == width * depth
    for _ in range(5):   # the theorem holds on all of Q^d, far outside any domain too
        x = tuple(Q(rng.randint(-10 ** 4, 10 ** 4), rng.randint(1, 50)) for _ in range(3))
        assert evaluate_maxout(a, x) == evaluate_maxout(b, x)


def test_the_identity_relates_a_network_to_itself_and_the_split_to_its_original():
    rng = random.Random(1)
    a = network(rng, 2, [3, 2], 3)
    n = [l.width for l in a.layers]
    ident = maps(*(([[int(i == j) for j in range(w)] for i in range(w)], [0] * w) for w in n))
    assert check_correspondence(a, a, ident) == sum(n)


def test_the_kernel_rejects_a_map_that_changes_one_entry():
    rng = random.Random(2)
    a = network(rng, 3, [4, 4], 3)
    b = rewrite(rng, a)
    cert = find_correspondence(a, b)
    R = cert.maps[1]
    W = list(map(list, R.W))
    i, u = next((i, u) for i in range(len(W)) for u in range(len(W[i])) if W[i][u])
    W[i][u] += Q(1, 7)
    bad = Correspondence((cert.maps[0], Affine(tuple(map(tuple, W)), R.b, R.in_dim)))
    with pytest.raises(CheckFailed, match="layer 2, unit"):
        check_correspondence(a, b, bad)
    bad = Correspondence((cert.maps[0], Affine(R.W, (R.b[0] + 1,) + R.b[1:], R.in_dim)))
    with pytest.raises(CheckFailed, match="layer 2, unit 0"):
        check_correspondence(a, b, bad)


def test_a_negative_weight_on_a_max_is_rejected_though_the_piece_sets_would_match():
    # ReLU(x) against ReLU(-x): with c = -1 the naive sets {x, 0} agree, but
    # -ReLU(-x) = min(x, 0) is not ReLU(x)
    a, b = relu(1, [((1,), 0)]), relu(1, [((-1,), 0)])
    with pytest.raises(CheckFailed, match="weight -1 < 0 on unit 0 of B, of several pieces"):
        check_correspondence(a, b, maps(([[-1]], [0])))
    assert evaluate_maxout(a, (Q(1),)) != evaluate_maxout(b, (Q(1),))


def test_relu_written_with_its_mirror_image_and_an_affine_unit():
    # ReLU(x) = ReLU(-x) + x: B has the units ReLU(-x) and the one-piece unit x
    a = relu(1, [((1,), 0)])
    mirror = Unit((Piece((Q(-1),), Q(0)), Piece((Q(0),), Q(0))))
    b = MaxoutNetwork(1, (Layer((mirror, Unit((Piece((Q(1),), Q(0)),)))),),
                      Affine(((Q(1), Q(1)),), (Q(0),), 2))
    assert check_correspondence(a, b, maps(([[1, 1]], [0]))) == 1
    assert check_correspondence(a, b, find_correspondence(a, b)) == 1


def test_shapes_depths_outputs_and_inexact_numbers_are_rejected():
    rng = random.Random(3)
    a = network(rng, 2, [2, 2], 2)
    b = rewrite(rng, a, split=False)
    good = find_correspondence(a, b)
    with pytest.raises(CheckFailed, match="depth"):
        check_correspondence(a, b, Correspondence(good.maps[:1]))
    R = good.maps[0]
    with pytest.raises(CheckFailed, match="is not 2 x 2"):
        check_correspondence(a, b, Correspondence((Affine(R.W[:1], R.b[:1], 2), good.maps[1])))
    with pytest.raises(CheckFailed, match="expected an exact rational"):
        check_correspondence(a, b, Correspondence(
            (Affine(R.W, (0.5,) + R.b[1:], 2), good.maps[1])))  # type: ignore[arg-type]
    moved = MaxoutNetwork(b.input_dim, b.layers,
                          Affine(b.output.W, (b.output.b[0] + Q(1, 1000),), b.output.in_dim))
    with pytest.raises(CheckFailed, match="output 0"):
        check_correspondence(a, moved, good)
    with pytest.raises(CheckFailed, match="Maxout"):
        check_correspondence(a, None, good)  # type: ignore[arg-type]


def test_the_sums_of_pieces_are_capped():
    # a unit of A against the sum of 15 ReLU units of B, ReLU(x_k): 2^15 distinct sums of pieces
    n = 15
    e = [tuple(Q(int(i == k)) for i in range(n)) for k in range(n)]
    b = MaxoutNetwork(n, (Layer(tuple(Unit((Piece(e[k], Q(0)), Piece((Q(0),) * n, Q(0))))
                                      for k in range(n))),),
                      Affine(((Q(1),) * n,), (Q(0),), n))
    a = MaxoutNetwork(n, (Layer((Unit((Piece((Q(1),) * n, Q(0)), Piece((Q(0),) * n, Q(0)))),)),),
                      None)
    with pytest.raises(CheckFailed, match="more than 16384 sums"):
        check_correspondence(a, b, maps(([[1] * n], [0])))
    small = MaxoutNetwork(3, (Layer(tuple(Unit((Piece(e[k][:3], Q(0)), Piece((Q(0),) * 3, Q(0))))
                                          for k in range(3))),),
                          Affine(((Q(1),) * 3,), (Q(0),), 3))
    a3 = MaxoutNetwork(3, (Layer((Unit(tuple(Piece(tuple(Q(int(k >> i & 1)) for i in range(3)),
                                                    Q(0)) for k in range(8))),)),), None)
    assert check_correspondence(a3, small, maps(([[1] * 3], [0]))) == 1   # 8 sums: accepted


def test_the_producer_gives_up_on_networks_that_are_not_related():
    rng = random.Random(4)
    a = network(rng, 3, [4, 4], 3)
    assert find_correspondence(a, rewrite(rng, a))
    u = a.layers[1].units[0]                          # one weight set to zero: a pruned twin
    p0 = Piece((Q(0),) + u.pieces[0].w[1:], u.pieces[0].b)
    pruned = MaxoutNetwork(3, (a.layers[0], Layer((Unit((p0,) + u.pieces[1:]),)
                                                  + a.layers[1].units[1:])), a.output)
    with pytest.raises(NoCorrespondence):
        find_correspondence(a, pruned)
    with pytest.raises(NoCorrespondence):
        find_correspondence(a, network(rng, 3, [4, 4], 3))
    with pytest.raises(NoCorrespondence, match="depth"):
        find_correspondence(a, network(rng, 3, [4], 3))


def test_a_constant_unit_added_to_b_gets_weight_zero():
    rng = random.Random(8)
    a = network(rng, 3, [4, 4], 3)
    dead = Unit((Piece((Q(0),) * 3, Q(5)),))          # the constant 5, read by no one
    c = MaxoutNetwork(3, (Layer(a.layers[0].units + (dead,)),
                          Layer(tuple(Unit(tuple(Piece(p.w + (Q(0),), p.b) for p in u.pieces))
                                      for u in a.layers[1].units))), a.output)
    cert = find_correspondence(a, c)
    assert all(row[4] == 0 for row in cert.maps[0].W)
    assert check_correspondence(a, c, cert) == 8


def test_the_certificate_file_round_trips_and_a_tampered_map_is_rejected(tmp_path):
    rng = random.Random(6)
    a = network(rng, 2, [3, 3], 3)
    b = rewrite(rng, a)
    box = Box((Q(-1),) * 2, (Q(1),) * 2)
    cert = find_correspondence(a, b)
    obj = certificate_to_json(a, b, box, cert, {"strategy": "correspondence"})
    path = tmp_path / "c.json"
    path.write_text(json.dumps(obj))
    a2, b2, dom, read, _, _ = load_certificate(str(path))
    assert read == cert and check_equivalence(a2, b2, dom, read) == 6
    obj["correspondence"][1]["b"][0] = "12345/7"
    path.write_text(json.dumps(obj))
    a2, b2, dom, read, _, _ = load_certificate(str(path))
    with pytest.raises(CheckFailed):
        check_equivalence(a2, b2, dom, read)
    obj["correspondence"] = obj["correspondence"][:1]
    path.write_text(json.dumps(obj))
    with pytest.raises(Exception, match="2 maps|one per layer"):
        load_certificate(str(path))


def test_the_command_line_says_everywhere_and_coq_export_writes_it(tmp_path):
    rng = random.Random(7)
    a = network(rng, 2, [3, 3], 3)
    b = rewrite(rng, a)
    for name, net in (("a", a), ("b", b)):
        (tmp_path / f"{name}.json").write_text(json.dumps(model_to_json(net)))
    (tmp_path / "d.json").write_text(json.dumps(
        {"format": "exactmax/domain", "version": 1} | domain_to_json(Box((Q(-1),) * 2,
                                                                       (Q(1),) * 2))))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "exactmax", *args], cwd=tmp_path,
                              capture_output=True, text=True)
    r = run("equiv", "a.json", "b.json", "--domain", "d.json", "--cert", "c.json")
    assert r.returncode == 0 and "on all of Q^2, hence on the domain" in r.stdout, r.stdout
    r = run("check-cert", "c.json")
    assert r.returncode == 0 and "layer correspondence of 6 units" in r.stdout
    r = run("export-coq", "c.json", "-o", "C.v")   # (coqc's check: test_coq_correspondence)
    assert r.returncode == 0 and r.stdout.startswith("wrote C.v"), r.stdout + r.stderr
    assert "Theorem net_corr" in (tmp_path / "C.v").read_text()
    r = run("equiv", "a.json", "b.json", "--domain", "d.json", "--certificate-kind",
            "equivalence", "--json")
    assert json.loads(r.stdout)["certificate_kind"] == "equivalence"


def test_epsilon_and_top1_of_a_rewrite_are_proved_by_its_correspondence(tmp_path):
    rng = random.Random(9)
    a = network(rng, 2, [3, 3], 3, outputs=2)
    b = rewrite(rng, a)
    moved = MaxoutNetwork(b.input_dim, b.layers,
                          Affine(b.output.W, (b.output.b[0] + Q(1, 10),) + b.output.b[1:],
                                 b.output.in_dim))
    for name, net in (("a", a), ("b", b), ("m", moved)):
        (tmp_path / f"{name}.json").write_text(json.dumps(model_to_json(net)))
    (tmp_path / "d.json").write_text(json.dumps(
        {"format": "exactmax/domain", "version": 1} | domain_to_json(Box((Q(-1),) * 2,
                                                                       (Q(1),) * 2))))

    def run(*args):
        r = subprocess.run([sys.executable, "-m", "exactmax", "equiv", *args, "--domain",
                            "d.json", "--json"], cwd=tmp_path, capture_output=True, text=True)
        return r.returncode, json.loads(r.stdout)
    code, out = run("a.json", "b.json", "--epsilon", "0", "--cert", "c.json")
    assert code == 0 and out["certificate_kind"] == "correspondence" and out["everywhere"]
    code, out = run("a.json", "b.json", "--top1")
    assert code == 0 and out["stats"]["strategy"] == "correspondence"
    # no correspondence relates the moved twin: the gap 1/10 is found, not proved away
    code, out = run("a.json", "m.json", "--epsilon", "1/100")
    assert code == 1 and out["verdict"] == "refuted" and out["counterexample"]["gap"] == "1/10"
    a2, b2, dom, cert, _, _ = load_certificate(str(tmp_path / "c.json"))
    assert isinstance(cert, Correspondence) and check_equivalence(a2, b2, dom, cert) == 6


def test_weights_beyond_floats_are_handled_exactly(tmp_path):
    """The producer's float guide has no float for 10^310: it goes on exactly (found by an
    independent review: this crashed with exit 70)."""
    v = Q(10) ** 310
    a = MaxoutNetwork(1, (Layer((Unit((Piece((v,), Q(0)), Piece((Q(0),), Q(1)))),)),), None)
    b = MaxoutNetwork(1, (Layer((Unit((Piece((Q(0),), Q(1)), Piece((v,), Q(0)))),)),), None)
    assert check_correspondence(a, b, find_correspondence(a, b)) == 1
    m = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
         "layers": [{"units": [{"pieces": [{"w": ["1e308"], "b": "0"}, {"w": ["0"], "b": "0"}]}]}]}
    (tmp_path / "a.json").write_text(json.dumps(m))
    (tmp_path / "d.json").write_text(json.dumps({"format": "exactmax/domain", "version": 1,
                                                 "box": {"lower": ["-1"], "upper": ["1"]}}))
    for extra in ((), ("--top1",)):
        r = subprocess.run([sys.executable, "-m", "exactmax", "equiv", "a.json", "a.json",
                            "--domain", "d.json", *extra], cwd=tmp_path, capture_output=True,
                           text=True)
        assert r.returncode == 0 and "correspondence" in r.stdout, r.stderr[-500:]
