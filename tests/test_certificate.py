"""The kernel's certificate checker accepts the certificates exactmax builds and rejects
every one of them changed by one number, one choice or one model weight."""

import copy
import json
import os

import pytest

from certificate_corpus import walk
from exactmax.cli import main
from exactmax.io.certificates import content_hash
from exactmax.kernel.certificate import Row, check_entails
from exactmax.kernel.errors import CheckFailed
from exactmax.kernel.rational import Q

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


def q(*v):
    return tuple(Q(x) for x in v)


def test_farkas_rule_accepts_exact_combinations_and_rejects_others():
    rows = [Row(q(1, 0), Q(0)), Row(q(0, 1), Q(0)), Row(q(-1, -1), Q(1), True)]  # x,y>=0, x+y<1
    check_entails(rows, (q(1, 1), Q(0)), False, ((0, Q(1)), (1, Q(1))), "x+y >= 0")
    check_entails(rows, (q(-1, -1), Q(1)), True, ((2, Q(1)),), "1 - x - y > 0 (strict row)")
    with pytest.raises(CheckFailed):   # strict claim from non-strict rows with remainder 0
        check_entails(rows, (q(1, 1), Q(0)), True, ((0, Q(1)), (1, Q(1))), "x+y > 0")
    with pytest.raises(CheckFailed):   # linear part left over
        check_entails(rows, (q(2, 1), Q(0)), False, ((0, Q(1)), (1, Q(1))), "2x+y")
    with pytest.raises(CheckFailed):   # negative remainder
        check_entails(rows, (q(1, 1), Q(-1)), False, ((0, Q(1)), (1, Q(1))), "x+y-1")
    with pytest.raises(CheckFailed):   # non-positive multiplier
        check_entails(rows, (q(0, 0), Q(0)), False, ((0, Q(0)),), "zero multiplier")
    with pytest.raises(CheckFailed):   # row that does not exist
        check_entails(rows, (q(1, 0), Q(0)), False, ((3, Q(1)),), "row 3")
    # the contradiction 0 > 0 from x + y >= 0 and x + y < 0: the empty-cell rule
    empty = [Row(q(1, 1), Q(0)), Row(q(-1, -1), Q(0), True)]
    check_entails(empty, (q(0, 0), Q(0)), True, ((0, Q(1)), (1, Q(1))), "empty")


def test_the_farkas_rule_in_integers_is_the_rule_in_rationals():
    """check_entails sums the rows scaled to integers (``Row.scaled``); on rows and multipliers
    with unlike denominators (3, 7, 2^40, ...) it accepts e = sum y_i row_i + r exactly when
    r >= 0, and rejects e moved by the smallest amount in any coefficient or in its constant."""
    import random

    rng = random.Random(3)

    def frac():
        return Q(rng.randint(-50, 50), rng.choice((1, 3, 7, 2**40, 6, 35)))

    for _ in range(40):
        d = rng.randint(1, 5)
        rows = [Row(tuple(frac() for _ in range(d)), frac()) for _ in range(rng.randint(1, 6))]
        proof = tuple((i, Q(rng.randint(1, 9), rng.choice((1, 5, 2**33))))
                      for i in rng.sample(range(len(rows)), rng.randint(1, len(rows))))
        a = tuple(sum((y * rows[i].a[t] for i, y in proof), Q(0)) for t in range(d))
        c = sum((y * rows[i].c for i, y in proof), Q(0)) + Q(rng.randint(0, 3), 11)
        check_entails(rows, (a, c), False, proof, "exact")
        tiny = Q(1, 2**70 * 3)
        with pytest.raises(CheckFailed):
            check_entails(rows, (a, c - Q(1, 11) * 4), False, proof, "constant below")
        t = rng.randrange(d)
        with pytest.raises(CheckFailed):
            check_entails(rows, (a[:t] + (a[t] + tiny,) + a[t + 1:], c), False, proof, "coef")



def test_dense_and_sparse_rows_sum_to_the_rule_in_rationals():
    """Rows with ``DENSE`` non-zero entries or more are summed as FLINT vectors, the others entry
    by entry, and the two sums merged: on 40-dimensional rows of both kinds the rule accepts e =
    sum y_i row_i + r (r >= 0) and rejects e moved by the smallest amount in a coordinate only
    dense rows touch, one only sparse rows touch, one both touch, or its constant."""
    import random

    from exactmax.kernel.certificate import DENSE

    rng, d, kinds = random.Random(32), 40, set()
    for _ in range(30):
        rows = []
        for _ in range(rng.randint(2, 7)):
            size = rng.choice((1, 3, DENSE - 1, DENSE, 30))
            support = rng.sample(range(20) if size < DENSE else range(10, d), size)
            a = [Q(0)] * d
            for t in support:
                a[t] = Q(rng.randint(-9, 9) or 1, rng.choice((1, 3, 2**35, 77)))
            rows.append(Row(tuple(a), Q(rng.randint(-5, 5), rng.choice((1, 9)))))
        proof = tuple((i, Q(rng.randint(1, 9), rng.choice((1, 5, 2**40))))
                      for i in rng.sample(range(len(rows)), rng.randint(1, len(rows))))
        kinds.update(len(rows[i].nz) >= DENSE for i, _ in proof)
        a = tuple(sum((y * rows[i].a[t] for i, y in proof), Q(0)) for t in range(d))
        c0 = sum((y * rows[i].c for i, y in proof), Q(0))
        c = c0 + Q(rng.randint(0, 3), 11)
        check_entails(rows, (a, c), False, proof, "exact")
        with pytest.raises(CheckFailed, match="combination gives"):
            check_entails(rows, (a, c0 - Q(1, 2**80)), False, proof, "constant below")
        with pytest.raises(CheckFailed, match="combination gives"):
            check_entails(rows, (a, c0), True, proof, "strict from non-strict rows")
        for t in (0, 15, 30, rng.randrange(d)):  # sparse rows only, both kinds, dense rows only
            moved = a[:t] + (a[t] + Q(1, 2**90 * 7),) + a[t + 1:]
            with pytest.raises(CheckFailed, match="linear part"):
                check_entails(rows, (moved, c), False, proof, f"coordinate {t}")
    assert kinds == {True, False}  # both kinds of row were summed
    assert Row(tuple(Q(t + 1) for t in range(d)), Q(0)).scaled()[3] is not None
    assert Row(q(1, 0), Q(0)).scaled()[3] is None


def test_lin_maps_is_the_sum_of_the_maps_it_reads():
    """``lin_maps`` (one FLINT product for several Lin nodes) gives each node x . a + c + sum_j c_j
    M_j, as summed one term at a time in rationals: nodes with and without terms, inputs, a read
    listed twice, maps of unlike denominators."""
    import random

    from exactmax.kernel.certificate import lin_map, lin_maps
    from exactmax.kernel.program import Lin

    rng = random.Random(7)
    for d in (1, 3, 12):
        vals = [(tuple(Q(rng.randint(-9, 9), rng.choice((1, 2**30, 7))) for _ in range(d)),
                 Q(rng.randint(-9, 9), 3)) for _ in range(6)]
        nodes = []
        for _ in range(5):
            terms = tuple((rng.randrange(6), Q(rng.randint(-5, 5), rng.choice((1, 11))))
                          for _ in range(rng.randint(0, 4)))
            x = tuple((i, Q(rng.randint(1, 4), 5)) for i in sorted(rng.sample(range(d), 1)))
            nodes.append(Lin(x, Q(rng.randint(-3, 3), 2), terms))
        for n, got in zip(nodes, lin_maps(nodes, vals, d)):
            want = [Q(0)] * d
            for i, v in n.x:
                want[i] += v
            const = n.c
            for j, c in n.terms:
                want = [w + c * m for w, m in zip(want, vals[j][0])]
                const += c * vals[j][1]
            assert got == (tuple(want), const) == lin_map(n, vals, d)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    path = tmp_path_factory.mktemp("cert") / "tent.cert.json"
    assert main(["verify", TENT, "--cert", str(path), "--json", "--strategy", "monolithic"]) == 0
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def layerwise(tmp_path_factory):
    path = tmp_path_factory.mktemp("cert") / "tent.layerwise.json"
    assert main(["verify", TENT, "--cert", str(path), "--json"]) == 0
    cert = json.loads(path.read_text())
    assert "layerwise" in cert
    return cert


def check(obj, tmp_path) -> int:
    p = tmp_path / "c.json"
    p.write_text(json.dumps(obj))
    return main(["check-cert", str(p)])


def multipliers(cert):
    """Paths to every Farkas multiplier in the tree: (node, choice list key, index...)."""
    for node in walk(cert["tree"]):
        chs = node.get("choices", node.get("leaf", {}).get("choices", []))
        for ch in chs:
            for proof in ch["proofs"]:
                if proof is None:
                    continue
                farkas = [proof] if isinstance(proof, list) else list(proof["tie"].values())
                for F in farkas:
                    for pair in F:
                        yield pair
        if "empty" in node:
            yield from node["empty"]


def test_the_untampered_certificate_is_valid(certificate, tmp_path):
    assert check(certificate, tmp_path) == 0


def test_every_multiplier_changed_is_rejected(certificate, tmp_path, capsys):
    n = sum(1 for _ in multipliers(certificate))
    assert n > 20
    for index in range(0, n, max(1, n // 25)):   # 25 places spread over the tree
        cert = copy.deepcopy(certificate)
        pair = list(multipliers(cert))[index]
        pair[1] = str(Q(pair[1]) + Q(1, 3) if "/" not in pair[1] else
                      Q(*map(int, pair[1].split("/"))) + Q(1, 3))
        assert check(cert, tmp_path) == 1, index
    assert "rejected" in capsys.readouterr().out


def test_a_changed_choice_is_rejected(certificate, tmp_path):
    changed = 0
    for node_index, node in enumerate(walk(certificate["tree"])):
        chs = node.get("choices", node.get("leaf", {}).get("choices", []))
        if not chs:
            continue
        cert = copy.deepcopy(certificate)
        node2 = list(walk(cert["tree"]))[node_index]
        ch = node2.get("choices", node2.get("leaf", {}).get("choices", []))[0]
        ch["k"] = (ch["k"] + 1) % len(ch["proofs"])
        ch["proofs"] = [None if j == ch["k"] else (p if p is not None else [])
                        for j, p in enumerate(ch["proofs"])]
        assert check(cert, tmp_path) == 1
        changed += 1
        if changed == 10:
            break
    assert changed == 10


def test_a_dropped_choice_or_moved_split_is_rejected(certificate, tmp_path):
    """A node without a choice is unknown (as in the Coq checker): the leaf is rejected when
    an output needs its map (a gate's ReLU), accepted only where the outputs still agree
    without it (a max node that the same-max rule compares by its arguments)."""
    leaf = next(n for n in walk(certificate["tree"]) if "leaf" in n and n["leaf"]["choices"])
    verdicts = []
    for i in range(len(leaf["leaf"]["choices"])):
        cert = copy.deepcopy(certificate)
        dropped = next(n for n in walk(cert["tree"]) if "leaf" in n and n["leaf"]["choices"])
        del dropped["leaf"]["choices"][i]
        verdicts.append(check(cert, tmp_path))
    assert 1 in verdicts
    cert = copy.deepcopy(certificate)
    root = cert["tree"]["split"]
    root["c"] = str(Q(*map(int, (root["c"] + "/1").split("/")[:2])) + 1)
    assert check(cert, tmp_path) == 1


def test_a_changed_model_weight_is_rejected(certificate, tmp_path, capsys):
    # with the old hash: the certificate no longer matches its model (unreadable, exit 2)
    cert = copy.deepcopy(certificate)
    cert["models"]["a"]["model"]["layers"][0]["units"][0]["pieces"][0]["b"] = "1/1000"
    assert check(cert, tmp_path) == 2
    assert "does not match the embedded model" in capsys.readouterr().err
    # with the hash recomputed: the leaves no longer prove the claim (rejected, exit 1)
    cert["models"]["a"]["sha256"] = content_hash(cert["models"]["a"]["model"])
    assert check(cert, tmp_path) == 1


def test_check_cert_compares_with_the_users_files(certificate, tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(certificate))
    tf = tmp_path / "tf.json"
    tf.write_text(json.dumps(certificate["models"]["b"]["model"]))
    assert main(["check-cert", str(p), "--models", TENT, str(tf)]) == 0
    assert main(["check-cert", str(p), "--models", TENT, TENT]) == 1


def test_layerwise_certificate_is_valid_and_tampering_is_rejected(layerwise, tmp_path):
    assert check(layerwise, tmp_path) == 0
    # a multiplier inside a claim's tree
    for li in range(2):
        cert = copy.deepcopy(layerwise)
        claim = next(c for c in cert["layerwise"]["layers"][li]
                     if any(True for _ in multipliers({"tree": c["tree"]})))
        pair = next(multipliers({"tree": claim["tree"]}))
        pair[1] = pair[1] + "1" if "/" in pair[1] else str(int(pair[1]) + 1)
        assert check(cert, tmp_path) == 1
    # B_0 smaller than the domain
    cert = copy.deepcopy(layerwise)
    cert["layerwise"]["boxes"][0]["upper"][0] = "1/2"
    assert check(cert, tmp_path) == 1
    # B_1 smaller than the image of B_0
    cert = copy.deepcopy(layerwise)
    cert["layerwise"]["boxes"][1]["upper"][0] = "-100"
    assert check(cert, tmp_path) == 1
    # an output left unproved
    cert = copy.deepcopy(layerwise)
    cert["layerwise"]["layers"][1][0]["outputs"].pop()
    assert check(cert, tmp_path) == 1
    # a claim moved to another layer
    cert = copy.deepcopy(layerwise)
    L = cert["layerwise"]["layers"]
    L[0][0]["tree"], L[1][0]["tree"] = L[1][0]["tree"], L[0][0]["tree"]
    assert check(cert, tmp_path) in (1, 2)


def test_the_same_max_rule_accepts_a_reordering_and_nothing_else():
    """Max(x, y) against hardmax heads over the values (y, x): equal as the max of the same
    functions; against (y, 2x), or a head whose scores are not its values, rejected."""
    from exactmax.kernel.certificate import Leaf, check_equal_on_domain
    from exactmax.kernel.polyhedron import Box
    from exactmax.kernel.program import Hardmax, Lin, Max, Program
    one = Q(1)
    x = Lin(((0, one),), Q(0), ())
    y = Lin(((1, one),), Q(0), ())
    f = Program(2, (x, y, Max((0, 1))), (2,))
    P = Box(q(-1, -1), q(1, 1)).as_polyhedron()
    good = Program(2, (y, x, Hardmax(((0, 0), (1, 1)))), (2,))
    assert check_equal_on_domain(f, good, P, Leaf((), same_max=True)) == 1
    assert check_equal_on_domain(f, good, P, Leaf(())) == 1   # the rule needs no flag
    two_x = Lin(((0, Q(2)),), Q(0), ())
    wrong = Program(2, (y, two_x, Hardmax(((0, 0), (1, 1)))), (2,))
    with pytest.raises(CheckFailed):
        check_equal_on_domain(f, wrong, P, Leaf((), same_max=True))
    scores_differ = Program(2, (y, x, two_x, Hardmax(((0, 0), (2, 1)))), (3,))
    with pytest.raises(CheckFailed):
        check_equal_on_domain(f, scores_differ, P, Leaf((), same_max=True))


def test_a_leaf_without_its_choices_is_rejected_where_the_outputs_need_them(layerwise,
                                                                          tmp_path):
    # tent's last layer folds the output map A h + c; a leaf of a claim the producer had to
    # prove with choices (its outputs are not the same max of the same maps without them)
    # must not pass with its choices dropped, flagged same_max or not
    cert = copy.deepcopy(layerwise)
    last = cert["layerwise"]["layers"][-1]
    for claim in last:
        for node in walk(claim["tree"]):
            if "leaf" in node and node["leaf"]["choices"]:
                node["leaf"]["same_max"] = True
                node["leaf"]["choices"] = []
                assert check(cert, tmp_path) == 1
                return
    pytest.fail("no leaf with choices in the last layer")


def test_a_maxout_layerwise_certificate_does_not_transfer_to_another_network(tmp_path):
    reordered = os.path.join(ROOT, "examples", "tent_reordered.json")
    path = tmp_path / "eq.json"
    assert main(["equiv", TENT, reordered, "--cert", str(path), "--strategy", "layerwise"]) == 0
    cert = json.loads(path.read_text())
    assert "layerwise" in cert and check(cert, tmp_path) == 0
    other = cert["models"]["b"]["model"]
    other["layers"][1]["units"][1]["pieces"][0]["b"] = "-1/4"     # was -1/5
    cert["models"]["b"]["sha256"] = content_hash(other)
    assert check(cert, tmp_path) == 1


def test_the_composite_rule_matches_linear_combinations_term_by_term():
    """2 max(x, y) + x - 1 against 2 hardmax(y, x) + x - 1: accepted; a different weight, a
    different constant or a missing term: rejected."""
    from exactmax.kernel.certificate import Leaf, check_equal_on_domain
    from exactmax.kernel.polyhedron import Box
    from exactmax.kernel.program import Hardmax, Lin, Max, Program
    one = Q(1)
    x = Lin(((0, one),), Q(0), ())
    y = Lin(((1, one),), Q(0), ())
    P = Box(q(-1, -1), q(1, 1)).as_polyhedron()
    f = Program(2, (x, y, Max((0, 1)), Lin((), Q(-1), ((0, one), (2, Q(2))))), (3,))

    def g(weight, const, with_x=True):
        terms = ((0, one), (2, weight)) if with_x else ((2, weight),)
        return Program(2, (x, y, Hardmax(((1, 1), (0, 0))), Lin((), const, terms)), (3,))

    assert check_equal_on_domain(f, g(Q(2), Q(-1)), P, Leaf((), same_max=True)) == 1
    for bad in (g(Q(3), Q(-1)), g(Q(2), Q(0)), g(Q(2), Q(-1), with_x=False)):
        with pytest.raises(CheckFailed):
            check_equal_on_domain(f, bad, P, Leaf((), same_max=True))


def test_two_programs_of_the_same_shape_are_evaluated_each_with_its_own_weights():
    """The split-tree walk computes each program's maps from that program's nodes: g differs
    from f in one weight only (same nodes, same levels), so a single leaf must be refused."""
    from exactmax.kernel.certificate import Leaf, check_equal_on_domain
    from exactmax.kernel.errors import CheckFailed
    from exactmax.kernel.polyhedron import Box
    from exactmax.kernel.program import Lin, Program
    from exactmax.kernel.rational import Q

    def prog(w):
        return Program(1, (Lin(((0, Q(1)),), Q(0), ()), Lin((), Q(0), ((0, Q(w)),))), (1,))

    box = Box((Q(-1),), (Q(1),))
    assert check_equal_on_domain(prog(2), prog(2), box.as_polyhedron(), Leaf()) == 1
    with pytest.raises(CheckFailed, match="outputs differ"):
        check_equal_on_domain(prog(2), prog(3), box.as_polyhedron(), Leaf())


@pytest.mark.parametrize("proof", [((0,),), (("a", Q(1)),), ((0, 0.5),), ((0, "x"),), None,
                                   ((5, Q(1)),), ((0, Q(-1)),), ((0, True),), ((0, Q(0)),)])
def test_a_malformed_farkas_proof_is_rejected_not_a_traceback(proof):
    """Farkas entries that are not (existing row, positive exact rational) pairs: CheckFailed
    (never a TypeError or ValueError escaping the kernel); the well-formed proof is accepted."""
    rows = [Row((Q(1),), Q(0))]
    check_entails(rows, ((Q(1),), Q(0)), False, ((0, Q(1)),), "t")
    with pytest.raises(CheckFailed):
        check_entails(rows, ((Q(1),), Q(0)), False, proof, "t")
