"""Sparse piece weights (#33): a Maxout piece whose weights are mostly zero (a convolution's
window) is written as ``{"size": n, "entries": [[j, v], ...]}``; read back it is the same
network, its canonical hash is the dense form's (older certificates still match), the schema
accepts it, and every malformed sparse vector is refused in one line."""

import json
import os

import pytest

import exactmax.io.jsonfile as jsonfile
from exactmax.cli import main
from exactmax.io import load_model, model_to_json, write_json_atomic
from exactmax.io.certificates import content_hash
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.rational import ONE, ZERO, Q
from exactmax.schemas import validator

N = 20
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def window_net() -> MaxoutNetwork:
    """20 inputs; unit i = max(x_i - x_{i+1} + i/7, 0): two non-zeros per piece."""
    units = []
    for i in range(N - 1):
        w = [ZERO] * N
        w[i], w[i + 1] = ONE, Q(-1)
        units.append(Unit((Piece(tuple(w), Q(i, 7)), Piece((ZERO,) * N, ZERO))))
    return MaxoutNetwork(N, (Layer(tuple(units)),))


def test_mostly_zero_weights_are_written_sparse_and_read_back_equal(tmp_path):
    net = window_net()
    obj = model_to_json(net)
    w = obj["layers"][0]["units"][3]["pieces"][0]["w"]
    assert w == {"size": N, "entries": [[3, "1"], [4, "-1"]]}
    path = str(tmp_path / "n.json")
    write_json_atomic(path, obj)
    back = load_model(path)
    assert back == net
    x = tuple(Q(j * j, 5) for j in range(N))
    assert evaluate_maxout(back, x) == evaluate_maxout(net, x)
    validator("maxout").validate(json.loads(open(path).read()))


def test_the_canonical_hash_is_that_of_the_dense_form():
    obj = model_to_json(window_net())
    dense = json.loads(json.dumps(obj))
    for u in dense["layers"][0]["units"]:
        for p in u["pieces"]:
            if isinstance(p["w"], dict):
                full = ["0"] * p["w"]["size"]
                for j, v in p["w"]["entries"]:
                    full[j] = v
                p["w"] = full
    assert content_hash(obj) == content_hash(dense)
    import hashlib

    text = json.dumps({k: v for k, v in dense.items() if k != "meta"}, sort_keys=True,
                      separators=(",", ":"))
    assert content_hash(obj) == hashlib.sha256(text.encode()).hexdigest()  # the definition
    dense["layers"][0]["units"][0]["pieces"][0]["w"][0] = "2"  # a different network
    assert content_hash(obj) != content_hash(dense)


BAD = [
    ({"size": N, "entries": [[N, "1"]]}, "outside the size"),
    ({"size": N, "entries": [[2, "1"], [2, "3"]]}, "given twice"),
    ({"size": N - 1, "entries": []}, f"expected {N} weights"),
    ({"size": N, "entries": [[-1, "1"]]}, ""),
    ({"size": N, "entries": [[1]]}, "fields [index, value]"),
    ({"size": N, "entry": []}, ""),
    ({"size": N, "entries": [[0, "1/0"]]}, ""),
]


@pytest.mark.parametrize("w, expect", BAD)
def test_a_malformed_sparse_vector_is_refused_in_one_line(tmp_path, capsys, w, expect):
    obj = model_to_json(window_net())
    obj["layers"][0]["units"][0]["pieces"][0]["w"] = w
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(obj))
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and expect in err[0]
    assert "layers[0]" in err[0]
    structural = "entry" in w or any(len(e) != 2 or e[0] < 0 for e in w.get("entries", []))
    if structural:  # the schema sees these; index bounds and repeats only the reader
        assert not validator("maxout").is_valid(obj)


def test_the_sparse_vectors_of_one_file_cannot_ask_for_unbounded_memory(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(jsonfile, "MAX_SPARSE_WEIGHTS", 3 * N)
    orig = jsonfile.Cursor.__init__

    def small_budget(self, source, path, value, budget=None):
        orig(self, source, path, value, budget if budget is not None else [10**6, 3 * N])

    monkeypatch.setattr(jsonfile.Cursor, "__init__", small_budget)
    path = tmp_path / "n.json"
    path.write_text(json.dumps(model_to_json(window_net())))  # 19 sparse vectors of 20
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "at most 60 entries in total" in err and len(err.splitlines()) == 1


def test_a_large_file_exactmax_writes_reads_back_beyond_the_fixed_sparse_budget(
    tmp_path, monkeypatch
):
    """The sparse forms of a file may declare ENTRIES_PER_CHAR entries per character beyond
    the fixed budget: a compiled Transformer of MNIST's size (30 M entries in 19 MB) reads
    back. Here with the fixed budget lowered to 100 entries: the compiled tent reads back,
    and does not when nothing per character is allowed."""
    tent = os.path.join(ROOT, "examples", "tent.json")
    out = tmp_path / "t.json"
    assert main(["compile", tent, "-o", str(out)]) == 0
    monkeypatch.setattr(jsonfile, "MAX_MATRIX_ENTRIES", 100)
    assert main(["info", str(out)]) == 0
    monkeypatch.setattr(jsonfile, "ENTRIES_PER_CHAR", 0)
    assert main(["info", str(out)]) == 2


# ---------------------------------------------------------------- sparse in memory (#33)

from exactmax.construct.transformer import compile_transformer  # noqa: E402
from exactmax.kernel.affine import SparseVector, check_matrix, dot, nonzero, row_of  # noqa: E402
from exactmax.kernel.polyhedron import Box  # noqa: E402


def test_a_sparse_vector_reads_as_the_dense_tuple():
    dense = tuple(Q(j + 1, 2) if j in (2, 7, 19) else ZERO for j in range(N))
    s = row_of(N, [(19, dense[19]), (2, dense[2]), (7, dense[7])])
    assert isinstance(s, SparseVector) and s.indices == (2, 7, 19)
    assert len(s) == N and tuple(s) == dense and list(nonzero(s)) == list(nonzero(dense))
    assert all(s[j] == dense[j] for j in range(-N, N)) and s[3:9] == dense[3:9]
    assert s == dense and dense == s and hash(s) == hash(dense) and s.count(ZERO) == N - 3
    with pytest.raises(IndexError):
        s[N]
    other = tuple(Q(j) for j in range(N))
    assert dot(s, other) == dot(dense, other) == dot(other, s)
    assert s != row_of(N, [(2, dense[2])]) and s != dense[:-1]
    assert isinstance(row_of(8, [(1, ONE)]), tuple)  # short: dense
    assert isinstance(row_of(N, [(j, ONE) for j in range(N // 2)]), tuple)  # half full: dense
    with pytest.raises(ValueError):
        row_of(N, [(N, ONE)])


@pytest.mark.parametrize(
    "row",
    [
        SparseVector(N, (5, 3), (ONE, ONE)),  # decreasing
        SparseVector(N, (3, 3), (ONE, ONE)),  # repeated: dot and iteration would disagree
        SparseVector(N, (3, N), (ONE, ONE)),  # outside the size
        SparseVector(N, (-1, 3), (ONE, ONE)),
        SparseVector(N, (3,), (ONE, ONE)),  # more values than indices
        SparseVector(N, (3, 4), (ONE,)),
    ],
)
def test_the_kernel_refuses_a_malformed_sparse_row_in_a_model_or_domain(row):
    with pytest.raises(ValueError, match="sparse row"):
        check_matrix((row,), 1, N, "w")
    net = MaxoutNetwork(N, (Layer((Unit((Piece(row, ZERO),)),)),))
    from exactmax.kernel.maxout import check_maxout_shapes
    from exactmax.kernel.polyhedron import Polyhedron, check_domain
    from exactmax.kernel.errors import CheckFailed

    with pytest.raises(ValueError, match="sparse row"):
        check_maxout_shapes(net)
    with pytest.raises(CheckFailed, match="sparse row"):
        check_domain(Polyhedron((row,), (ONE,), N), N)
    with pytest.raises(TypeError):
        check_matrix((SparseVector(N, (3,), (1.5,)),), 1, N, "w")


def test_sparse_weights_stay_sparse_from_the_file_through_the_construction(tmp_path):
    """Read back, the pieces of the window network hold 2 entries each, not 20; the compiled
    Transformer's matrices are sparse rows too, and it equals the network (layerwise proof)."""
    path = str(tmp_path / "n.json")
    write_json_atomic(path, model_to_json(window_net()))
    back = load_model(path)
    w = back.layers[0].units[4].pieces[0].w
    assert isinstance(w, SparseVector) and list(nonzero(w)) == [(4, ONE), (5, Q(-1))]
    dom = Box((ZERO,) * N, (ONE,) * N)
    tf = compile_transformer(back, dom).transformer
    ff = tf.sublayers[0]
    assert sum(isinstance(r, SparseVector) for r in ff.inner.W) == len(ff.inner.W)
    W_O = tf.sublayers[1].heads[0].out
    assert isinstance(W_O, SparseVector) and len(W_O.values) == 1 and len(W_O) == tf.d_model
    out = str(tmp_path / "tf.json")
    write_json_atomic(out, model_to_json(tf))
    back_tf = load_model(out)
    assert back_tf == tf and isinstance(back_tf.sublayers[1].heads[0].out, SparseVector)
    cert = str(tmp_path / "c.json")
    assert main(["verify", path, "--transformer", out, "--strategy", "layerwise", "--box",
                 ";".join(["0,1"] * N), "--cert", cert]) == 0
    assert main(["check-cert", cert]) == 0


def test_a_matrix_of_mostly_zero_rows_reads_as_its_dense_rows():
    """W_O of a head (d_model x 1, one row not zero) kept as a SparseVector of rows: the dense
    tuple of rows in every reading, its given rows by ``nonzero``, and the kernel's products
    (the exact Transformer evaluator, through ``_matrix``) equal the dense matrix's."""
    from exactmax.kernel.transformer import _matrix

    zero, one = (ZERO, ZERO), (ONE, Q(-2))
    W = SparseVector(N, (2, 7), (one, (ZERO, Q(3))), zero)
    dense = tuple(one if i == 2 else (ZERO, Q(3)) if i == 7 else zero for i in range(N))
    assert W == dense and tuple(W) == dense and hash(W) == hash(dense) and W[7] == (0, 3)
    assert W[-1] == zero and list(nonzero(W)) == [(2, one), (7, (ZERO, Q(3)))]
    assert _matrix(W, 2) == _matrix(dense, 2)
    check_matrix(W, N, 2, "W_O")


@pytest.mark.parametrize(
    "W, why",
    [
        (SparseVector(N, (2,), ((ONE,),), (ONE,)), "sparse row"),  # its other rows are not 0
        (SparseVector(N, (7, 2), ((ONE,), (ONE,)), (ZERO,)), "sparse row"),  # not increasing
        (SparseVector(N, (N,), ((ONE,),), (ZERO,)), "sparse row"),  # a row outside
        (SparseVector(N, (2,), ((ONE, ONE),), (ZERO,)), "is not"),  # a row of another length
        (SparseVector(N + 1, (2,), ((ONE,),), (ZERO,)), "is not"),  # too many rows
    ],
)
def test_the_kernel_refuses_a_malformed_matrix_of_sparse_rows(W, why):
    with pytest.raises(ValueError, match=why):
        check_matrix(W, N, 1, "W_O")
    with pytest.raises(TypeError):
        check_matrix(SparseVector(N, (2,), ((0.5,),), (ZERO,)), N, 1, "W_O")


def test_the_fast_reading_of_numbers_is_the_cursor_by_cursor_reading(tmp_path):
    """Vectors and sparse entries of plain number strings and integers are read in bulk (one
    object per distinct text); anything else (a JSON float, indices out of order, a bad
    number) is read cursor by cursor: the same values, or the same one-line error."""
    from exactmax.io.jsonfile import Cursor, JsonNumber

    def read(value, n=N):
        return Cursor("f", "w", value).weights(n)

    dense = ["1/2", 3, "-0.25", "0"] + ["0"] * (N - 4)
    assert read(dense) == (Q(1, 2), Q(3), Q(-1, 4)) + (ZERO,) * (N - 1 - 2)
    fast = read({"size": N, "entries": [[1, "1/3"], [5, 2], [7, "1/3"]]})
    slow = read({"size": N, "entries": [[7, "1/3"], [1, "1/3"], [5, 2]]})  # any order
    assert fast == slow and isinstance(fast, SparseVector) and fast.values[0] is fast.values[2]
    floats = read({"size": N, "entries": [[1, JsonNumber("0.5")]]})  # a JSON number literal
    assert isinstance(floats, SparseVector) and floats[1] == Q(1, 2)
    for bad, message in [
        ({"size": N, "entries": [[1, "1/3"], [1, "1/2"]]}, "entry 1 given twice"),
        ({"size": N, "entries": [[N, "1"]]}, f"index {N} outside the size {N}"),
        ({"size": N, "entries": [[1, "1//3"]]}, "w.entries[0][1]"),
        (["1/2", "x"] + ["0"] * (N - 2), "w[1]"),
        (["1/2"] * (N - 1), f"expected {N} weights"),
    ]:
        with pytest.raises(jsonfile.InputError, match=message.replace("[", r"\[")):
            read(bad)
