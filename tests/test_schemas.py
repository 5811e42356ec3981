"""The JSON Schemas of exactmax's formats (exactmax/schemas/*.schema.json, ``exactmax schema``):
valid against the 2020-12 metaschema, their references resolved locally; every bundled example
and every file exactmax writes validates; every file of tests/data/bad malformed in structure is
rejected, and those that are not (lengths, limits, facts a schema cannot express) are listed
below with the reason; hand-made invalid instances of each format are rejected by the schema
and by exactmax's reader alike; number strings are accepted exactly when the reader accepts
them."""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import gzip
import io
import json
import os
import tomllib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from exactmax import schemas
from exactmax.cli import main
from exactmax.io import InputError
from exactmax.io.numbers import NumberSyntaxError, parse_rational

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
GOOD = os.path.join(ROOT, "tests", "data", "good")
BAD = os.path.join(ROOT, "tests", "data", "bad")
SCHEMA_DIR = os.path.dirname(schemas.__file__)

SCHEMA_OF_FORMAT = {schemas.format_of(n): n for n in schemas.NAMES if schemas.format_of(n)}


@pytest.fixture(scope="module")
def validators():
    return {n: schemas.validator(n) for n in schemas.NAMES}


def errors(validators, name: str, obj) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in validators[name].iter_errors(obj)]


# ------------------------------------------------------------------------------ reading JSON

class NotJson(ValueError):
    """What a strict JSON parser refuses (and so no schema ever sees)."""


def _refuse_constant(name):
    raise NotJson(f"{name} is not JSON")


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise NotJson("a key given twice (the JSON data model has none)")
    return dict(pairs)


def _integer(text: str) -> int:
    if len(text) < 4000:
        return int(text)
    import flint   # past Python's 4300-digit limit of int(str)
    return int(flint.fmpz(text))


def strict_load(path: str):
    """The JSON value of a file as a strict parser sees it: UTF-8, .gz decompressed, no NaN or
    Infinity, no repeated key.  Raises on anything that is not JSON."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    return json.loads(data.decode("utf-8"), parse_constant=_refuse_constant,
                      object_pairs_hook=_no_duplicates, parse_int=_integer)


NOT_JSON_ERRORS = (ValueError, EOFError, OSError, zlib.error)


# --------------------------------------------------------------------------- the schemas

def _refs(node):
    if isinstance(node, dict):
        if "$ref" in node:
            yield node["$ref"]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_every_schema_is_valid_and_its_references_resolve_locally():
    files = sorted(f.removesuffix(".schema.json") for f in os.listdir(SCHEMA_DIR)
                   if f.endswith(".schema.json"))
    assert files == sorted(schemas.NAMES)
    registry = schemas.registry()
    for name in schemas.NAMES:
        s = schemas.load(name)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        assert validator_for(s) is Draft202012Validator
        Draft202012Validator.check_schema(s)
        assert s["$id"] == f"{schemas.BASE}{name}.schema.json"
        assert s["title"] and s["description"], name
        resolver = registry.resolver(base_uri=s["$id"])
        refs = list(_refs(s))
        assert refs or name == "common", name
        for ref in refs:
            resolver.lookup(ref)   # raises if it does not resolve in the local registry
        for where, sub in _objects(s):
            assert sub.get("additionalProperties") is False or \
                (name, where) in OPEN_OBJECTS, f"{name}: {where} is open to unknown keys"


OPEN_OBJECTS = {("certificate", "/properties/stats"),   # what the producer reported, not read
                ("property-certificate", "/properties/stats"),
                ("pair-property-certificate", "/properties/stats"),
                ("cpwl", ""),   # closed by the schema of its kind (if "kind" is ... then ...)
                ("output", "")}   # the keys every command prints, then each command's own
"""Object schemas that do not forbid unknown keys themselves."""


def _objects(node, where=""):
    """(JSON pointer, subschema) of every object schema with properties (not inside "if")."""
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            yield where, node
        for k, v in node.items():
            if k != "if":
                yield from _objects(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{where}/{i}")


def test_the_schemas_are_package_data():
    """pyproject.toml's package-data takes every schema file into the built package."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    for name in schemas.NAMES:
        path = f"exactmax/schemas/{name}.schema.json"
        assert any(fnmatch.fnmatch(os.path.relpath(path, pkg.replace(".", "/")), pat)
                   for pkg, pats in data.items() for pat in pats), path


# ------------------------------------------------------------------------ bundled examples

def _bundled():
    for folder in (EXAMPLES, GOOD):
        for f in sorted(os.listdir(folder)):
            if f.endswith(".json") and f != "expected.json":
                yield os.path.join(folder, f)


def _reader(name: str):
    """exactmax's own reader of the files of schema ``name``."""
    from exactmax.cpwl.spec import load_spec
    from exactmax.io.certificates import load_certificate
    from exactmax.io.models import load_domain, load_model
    from exactmax.regions.certfile import load_region_certificate

    def load_property_certificate(path):
        from exactmax.io.jsonfile import Cursor, read_json_file
        from exactmax.io.property_certificate import read_property_certificate
        return read_property_certificate(Cursor(path, "", read_json_file(path)))

    return {"maxout": load_model, "transformer": load_model, "model": load_model,
            "domain": load_domain, "certificate": load_certificate,
            "region-certificate": load_region_certificate,
            "property-certificate": load_property_certificate, "cpwl": load_spec}[name]


def test_every_bundled_example_validates(validators):
    paths = list(_bundled())
    assert len(paths) >= 12
    seen = set()
    for path in paths:
        obj = strict_load(path)
        name = SCHEMA_OF_FORMAT[obj["format"]]
        seen.add(name)
        assert errors(validators, name, obj) == [], path
        if name in ("maxout", "transformer"):
            assert errors(validators, "model", obj) == [], path
        _reader(name)(path)   # and exactmax reads it
    assert {"maxout", "transformer", "cpwl"} <= seen


# ------------------------------------------------------------------- files exactmax writes

TINY_ONNX_WEIGHTS = ([[1.0, -0.5], [0.25, 2.0]], [0.5, -1.0])


def _write_onnx(path: str) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    W, b = (np.array(v, dtype=np.float32) for v in TINY_ONNX_WEIGHTS)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "B"], ["h"], transB=1),
         helper.make_node("Relu", ["h"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "B")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


FLAT = {"format": "exactmax/domain", "version": 1,   # the diagonal x0 = x1 of [-1, 1]^2
        "polyhedron": {"A": [[1, -1], [-1, 1], [1, 0], [-1, 0]], "b": [0, 0, 1, 1]}}
CUT = {"format": "exactmax/domain", "version": 1, "meta": {"note": "a cut square"},
       "polyhedron": {"A": [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], ["-1/2", 1]],
                      "b": [1, 1, 1, 1, "1/2", "3/4"]}}
TINY = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
        "layers": [{"units": [{"pieces": [{"w": [1], "b": 0}, {"w": [-1], "b": 0}]},
                              {"pieces": [{"w": [1], "b": "1/2"}, {"w": [0], "b": 0}]}]},
                   {"units": [{"pieces": [{"w": [1, -1], "b": 0},
                                          {"w": [0, 1], "b": "-1/3"}]}]}],
        "domain": {"box": {"lower": [-1], "upper": [1]}}}
"""A small network: its certificates are the bases of the hand-made invalid ones."""
VNNLIB = """(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(assert (>= X_0 -1)) (assert (<= X_0 1))
(assert (>= X_1 -0.5)) (assert (<= X_1 1))
(assert (or (and (>= Y_0 100)) (and (<= Y_0 -100) (>= Y_0 -200))))
"""
"""A property of examples/tent.json that does not hold (unsat): |y| stays below 100."""


def _widened(net: dict) -> dict:
    """The same function with one more unit in the first layer (the constant 0, read by no
    one): the widths differ, so equiv proves it by a layer correspondence."""
    out = copy.deepcopy(net)
    out["layers"][0]["units"].append({"pieces": [{"w": [0] * net["input_dim"], "b": 0}]})
    for unit in out["layers"][1]["units"]:
        for p in unit["pieces"]:
            p["w"].append(0)
    return out


def _reordered(net: dict) -> dict:
    """The same network with every unit's pieces in reverse order."""
    out = copy.deepcopy(net)
    for layer in out["layers"]:
        for unit in layer["units"]:
            unit["pieces"].reverse()
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """name -> (path, JSON) of every file the commands below write: compile (plain, merged,
    scalar positions), verify/equiv --cert (layerwise and monolithic, box, polyhedral and
    flat domains, the merged construction, gzip), regions --cert and --save-model, cpwl -o
    and --reference (every kind), approx-convex -o, theorem44 --write, import -o, check
    --cert."""
    t = tmp_path_factory.mktemp("written")
    ex = {n: os.path.join(EXAMPLES, f"{n}.json") for n in
          ("tent", "relu_triangle", "maxout_d3_w4_r3")}
    inputs = {"flat.domain.json": FLAT, "tiny.json": TINY,
              "tiny_reordered.json": _reordered(TINY), "tiny_wide.json": _widened(TINY)}
    for name, obj in inputs.items():
        (t / name).write_text(json.dumps(obj))
    flat, tiny, tiny_r, tiny_w = (str(t / name) for name in inputs)
    (t / "tent.vnnlib").write_text(VNNLIB)
    (t / "onnx.vnnlib").write_text(VNNLIB.replace("(declare-const Y_0 Real)\n",
                                                  "(declare-const Y_0 Real)\n"
                                                  "(declare-const Y_1 Real)\n"))
    _write_onnx(str(t / "tiny.onnx"))
    out = {}

    def run(args, *files, code=0):
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(args) == code, args
        for f in files:
            out[f] = str(t / f)

    def cert(name, args):
        run(args + ["--cert", str(t / name), "--json", "--no-search"], name)

    run(["compile", ex["tent"], "-o", str(t / "tent.tf.json")], "tent.tf.json")
    run(["compile", ex["tent"], "-o", str(t / "tent.merged.json"), "--merged"],
        "tent.merged.json")
    run(["compile", ex["maxout_d3_w4_r3"], "-o", str(t / "d3.tf.json"), "--positional",
         "scalar"], "d3.tf.json")
    cert("tent.merged.cert.json", ["verify", ex["tent"], "--transformer",
                                   str(t / "tent.merged.json")])
    cert("tent.flat.json", ["verify", ex["tent"], "--domain", flat])
    cert("triangle.monolithic.json.gz", ["verify", ex["relu_triangle"], "--strategy",
                                         "monolithic"])
    cert("triangle.layerwise.json", ["verify", ex["relu_triangle"]])
    cert("d3.layerwise.json", ["verify", ex["maxout_d3_w4_r3"]])
    cert("tiny.layerwise.json", ["equiv", tiny, tiny_r, "--strategy", "layerwise"])
    cert("tiny.correspondence.json", ["equiv", tiny, tiny_w])
    cert("tiny.monolithic.json", ["equiv", tiny, tiny_r, "--strategy", "monolithic"])
    run(["regions", ex["tent"], "--cert", str(t / "tent.regions.json"), "--json"],
        "tent.regions.json")
    run(["regions", ex["relu_triangle"], "--compile", "--cert",
         str(t / "triangle.tf.regions.json"), "--json"], "triangle.tf.regions.json")
    run(["regions", "--sawtooth", "2,1,2", "--save-model", str(t / "saw.json"), "--cert",
         str(t / "saw.regions.json"), "--json"], "saw.json", "saw.regions.json")
    for kind in ("relu", "breakpoints", "lattice", "dc"):
        run(["cpwl", os.path.join(EXAMPLES, f"cpwl_{kind}.json"), "-o",
             str(t / f"{kind}.net.json"), "--reference", str(t / f"{kind}.ref.json"),
             "--json"], f"{kind}.net.json", f"{kind}.ref.json")
    run(["approx-convex", "x^2 + y^2", "--box", "-1,1;-1,1", "--h", "1", "-o",
         str(t / "approx.json"), "--json"], "approx.json")
    # without the count, theorem44 says unknown (exit 3) but writes the network
    run(["theorem44", "--m", "1", "--T", "2", "--q", "2", "--D", "3", "--no-count",
         "--write", str(t / "theorem44.json"), "--json"], "theorem44.json", code=3)
    run(["import", str(t / "tiny.onnx"), "-o", str(t / "onnx.json"), "--json"], "onnx.json")
    run(["check", ex["tent"], str(t / "tent.vnnlib"), "--cert", str(t / "tent.property.json"),
         "--json"], "tent.property.json")
    run(["check", str(t / "tiny.onnx"), str(t / "onnx.vnnlib"), "--cert",
         str(t / "onnx.property.json.gz"), "--json", "--no-search"], "onnx.property.json.gz")
    return {name: (path, strict_load(path)) for name, path in out.items()}


def _trees(cert):
    if "tree" in cert:
        return [cert["tree"]]
    if "correspondence" in cert:
        return []
    return [claim["tree"] for layer in cert["layerwise"]["layers"] for claim in layer]


def _features(cert) -> set[str]:
    """What of the certificate format a certificate uses (to see that the written ones cover
    the schema's branches)."""
    out = {next(k for k in ("tree", "layerwise", "correspondence") if k in cert),
           *cert["domain"]["domain"]}
    out |= {f"witness:{k}" for k in cert["domain"].get("witness", {})}
    if "layerwise" in cert:
        lw = cert["layerwise"]
        out |= {k for k in ("image", "unmerged") if k in lw}
        out.add("box_proofs:" + ("null" if lw["box_proofs"] is None else "list"))
    todo = _trees(cert)
    while todo:
        n = todo.pop()
        out |= set(n)
        if "split" in n:
            todo += [n["ge"], n["lt"]]
        holder = n.get("leaf", n)
        out |= {"same_max"} if holder.get("same_max") else set()
        for ch in holder.get("choices", ()):
            out |= {"proof:" + ("null" if p is None else "tie" if isinstance(p, dict)
                                else "farkas") for p in ch["proofs"]}
    return out


def test_every_file_exactmax_writes_validates(validators, written):
    formats, features = set(), set()
    for name, (path, obj) in written.items():
        schema = SCHEMA_OF_FORMAT[obj["format"]]
        formats.add(schema)
        assert errors(validators, schema, obj) == [], name
        if schema in ("maxout", "transformer"):
            assert errors(validators, "model", obj) == [], name
        if schema == "certificate":
            features |= _features(obj)
        _reader(schema)(path)   # exactmax reads back what it wrote
    assert formats == {"maxout", "transformer", "certificate", "region-certificate",
                       "property-certificate"}
    assert {"tree", "layerwise", "correspondence", "box", "polyhedron", "split", "leaf", "same_max",
            "proof:null", "proof:farkas", "proof:tie", "image", "unmerged", "box_proofs:null",
            "box_proofs:list", "witness:interior", "witness:member", "witness:flat"} \
        <= features, features


def test_the_domain_files_validate(validators, tmp_path):
    """exactmax writes no domain file; the ones this test uses are read by it and valid."""
    from exactmax.io.models import load_domain
    for name, obj in (("flat", FLAT), ("cut", CUT)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(obj))
        load_domain(str(path))
        assert errors(validators, "domain", obj) == []


# -------------------------------------------------------------------- tests/data/bad files

NOT_JSON = {
    "nan_literal.json": "NaN is not JSON",
    "infinity_literal.json": "Infinity is not JSON",
    "minus_infinity_literal.json": "-Infinity is not JSON",
    "meta_nan.json": "NaN (in meta) is not JSON",
    "truncated.json": "the text ends early",
    "not_utf8.json": "not UTF-8",
    "corrupt_gzip.json.gz": "not gzip data",
    "truncated_gzip.json.gz": "the gzip data ends early",
    "duplicate_key.json": "a repeated key: the JSON data model a schema sees has unique keys "
                          "(Python's json keeps the last)",
}
"""Files a strict JSON parser refuses: no schema ever sees them."""

BEYOND_SCHEMA = {
    "weight_length.json": "a weight vector's length must be input_dim, a value in the file",
    "weight_length_layer1.json": "a weight vector's length must be the previous layer's width",
    "output_shape.json": "the output's columns must be the last layer's width",
    "output_rows.json": "W's rows must be as many as the entries of b",
    "box_bound_length.json": "upper must be as long as lower",
    "polyhedron_row_length.json": "A's columns must be the input dimension",
    "relu_w_b_mismatch.json": "W's rows must be as many as the entries of b",
    "sparse_index_out_of_range.json": "a sparse index must be below the shape, a value in the "
                                      "file",
    "sparse_repeated_entry.json": "no (i, j) twice: uniqueItems compares whole [i, j, value] "
                                  "triples, not their first two items",
    "tf_sparse_key_out_of_range.json": "a sparse index must be below the shape",
    "tf_sparse_huge_shape.json": "the limit is on rows x cols summed over the file's sparse "
                                 "matrices, a product no schema computes",
    "tf_embedding_shape.json": "the embedding's rows must be d_model",
    "tf_position_length.json": "a position's length must be d_model",
    "tf_feedforward_w2_shape.json": "W2's columns must be as many as the entries of b1",
    "tf_query_shape.json": "query's columns must be d_model",
    "tf_readout_token_out_of_range.json": "the token must be below the number of positions",
    "exponent_literal_too_big.json": "the exponent bound is on a number literal's text "
                                     "(1.5e1001); a validator sees only its value (a float, "
                                     "here infinity)",
    "huge_integer.json.gz": "the million-digit limit on a JSON integer; no maximum is "
                            "practical (and the number strings' digit limit is not expressed "
                            "either)",
}
"""Files malformed in facts no JSON Schema expresses: lengths and indices that depend on other
values of the file, and limits on the text of number literals.  The schema accepts them; the
reader refuses them."""


def _bad_files():
    with open(os.path.join(BAD, "expected.json")) as f:
        expected = json.load(f)
    return [(name, expected.get(name, {})) for name in sorted(os.listdir(BAD))
            if name != "expected.json"]


def test_the_bad_file_lists_name_files_that_exist():
    names = {n for n, _ in _bad_files()}
    assert set(NOT_JSON) <= names and set(BEYOND_SCHEMA) <= names
    assert not set(NOT_JSON) & set(BEYOND_SCHEMA)


@pytest.mark.parametrize("name,entry", _bad_files(), ids=[n for n, _ in _bad_files()])
def test_every_bad_file_malformed_in_structure_is_rejected_by_the_schema(validators, name,
                                                                          entry):
    path = os.path.join(BAD, name)
    schema = "domain" if "model" in entry else "model"
    # exactmax refuses every one of them (tests/test_robustness.py checks the messages)
    with pytest.raises(InputError):
        _reader(schema)(path)
    if name in NOT_JSON:
        with pytest.raises(NOT_JSON_ERRORS):
            strict_load(path)
        return
    obj = strict_load(path)
    found = errors(validators, schema, obj)
    if name in BEYOND_SCHEMA:
        assert found == [], f"{name} is listed as beyond a schema, but the schema rejects it"
    else:
        assert found, f"the {schema} schema accepts {name} ({entry.get('stderr')})"


# ------------------------------------------------------------------- hand-made instances

def _set(obj, path, value):
    """A copy of obj with the value at path (keys and indices) set; DELETE removes it."""
    obj = copy.deepcopy(obj)
    node = obj
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return obj


DELETE = object()

TENT = json.load(open(os.path.join(EXAMPLES, "tent.json")))
TF = json.load(open(os.path.join(GOOD, "transformer_hardmax.json")))
TENT_TF_HEAD = ("sublayers", 1, "attention", "heads", 0)
LATTICE = json.load(open(os.path.join(EXAMPLES, "cpwl_lattice.json")))
BREAKPOINTS = json.load(open(os.path.join(EXAMPLES, "cpwl_breakpoints.json")))
RELU_SPEC = json.load(open(os.path.join(EXAMPLES, "cpwl_relu.json")))
DC = json.load(open(os.path.join(EXAMPLES, "cpwl_dc.json")))

MAXOUT_BAD = [
    ("top-level typo", ("ouptut",), {"W": [[1]], "b": [0]}),
    ("piece typo", ("layers", 0, "units", 0, "pieces", 0, "bias"), 0),
    ("input_dim a string", ("input_dim",), "2"),
    ("input_dim 0", ("input_dim",), 0),
    ("input_dim 2.5", ("input_dim",), 2.5),
    ("layers an object", ("layers",), {}),
    ("a weight a list", ("layers", 0, "units", 0, "pieces", 0, "w", 0), [1]),
    ("a weight true", ("layers", 0, "units", 0, "pieces", 0, "w", 0), True),
    ("a weight null", ("layers", 0, "units", 0, "pieces", 0, "w", 0), None),
    ("a bias 1/0", ("layers", 0, "units", 0, "pieces", 0, "b"), "1/0"),
    ("a bias 0x10", ("layers", 0, "units", 0, "pieces", 0, "b"), "0x10"),
    ("a bias 1e1001", ("layers", 0, "units", 0, "pieces", 0, "b"), "1e1001"),
    ("a bias with a space", ("layers", 0, "units", 0, "pieces", 0, "b"), " 1"),
    ("a bias empty", ("layers", 0, "units", 0, "pieces", 0, "b"), ""),
    ("a bias missing", ("layers", 0, "units", 0, "pieces", 0, "b"), DELETE),
    ("no pieces", ("layers", 0, "units", 0, "pieces"), []),
    ("units and relu", ("layers", 0, "relu"), {"W": [[1, 0]], "b": [0]}),
    ("an empty relu layer", ("layers", 0), {"relu": {"W": [], "b": []}}),
    ("format typo", ("format",), "exactmax/maxout "),
    ("version 2", ("version",), 2),
    ("version missing", ("version",), DELETE),
    ("sparse matrix typo", ("output",), {"W": {"shape": [1, 1], "entry": []}, "b": [0]}),
    ("sparse entry of 2", ("output",), {"W": {"shape": [1, 1], "entries": [[0, 0]]},
                                        "b": [0]}),
    ("sparse shape of 3", ("output",), {"W": {"shape": [1, 1, 1], "entries": []}, "b": [0]}),
    ("negative sparse index", ("output",), {"W": {"shape": [1, 1], "entries": [[-1, 0, 1]]},
                                            "b": [0]}),
    ("domain Box", ("domain",), {"Box": {"lower": [0, 0], "upper": [1, 1]}}),
    ("domain box and polyhedron", ("domain", "polyhedron"), {"A": [[1, 0]], "b": [1]}),
    ("domain box typo", ("domain", "box", "lo"), [0, 0]),
    ("domain with meta", ("domain", "meta"), {}),
]

TF_BAD = [
    ("top-level typo", ("sublayer",), []),
    ("d_model a string", ("d_model",), "4"),
    ("no positions", ("positions",), []),
    ("attention kind linear", TENT_TF_HEAD[:3] + ("kind",), "linear"),
    ("scale 0", TENT_TF_HEAD + ("scale",), "0"),
    ("scale -1/2", TENT_TF_HEAD + ("scale",), "-1/2"),
    ("scale 0 literal", TENT_TF_HEAD + ("scale",), 0),
    ("scale 0.000", TENT_TF_HEAD + ("scale",), "0.000e5"),
    ("head without out", TENT_TF_HEAD + ("out",), DELETE),
    ("head typo", TENT_TF_HEAD + ("values",), [[1]]),
    ("both sub-layer kinds", ("sublayers", 1, "feedforward"),
     {"W1": [[1]], "b1": [0], "W2": [[1]], "b2": [0]}),
    ("readout token -1", ("readout", "token"), -1),
    ("readout token last", ("readout", "token"), "last"),
    ("readout token 1.5", ("readout", "token"), 1.5),
    ("readout typo", ("readout", "tokens"), 0),
]

DOMAIN_BAD = [
    ("neither box nor polyhedron", ("polyhedron",), DELETE),
    ("box and polyhedron", ("box",), {"lower": [0, 0], "upper": [1, 1]}),
    ("typo", ("polyhedra",), {}),
    ("format of a model", ("format",), "exactmax/maxout"),
    ("A a string", ("polyhedron", "A"), "[[1]]"),
    ("b a number", ("polyhedron", "b"), 1),
]

CPWL_BAD = [
    (LATTICE, "kind spline", ("kind",), "spline"),
    (LATTICE, "kind missing", ("kind",), DELETE),
    (LATTICE, "an index twice", ("sets", 0), [0, 0]),
    (LATTICE, "an empty set", ("sets", 0), []),
    (LATTICE, "no sets", ("sets",), []),
    (LATTICE, "a negative index", ("sets", 0, 0), -1),
    (LATTICE, "a key of another kind", ("plus",), []),
    (BREAKPOINTS, "one breakpoint", ("x",), ["0"]),
    (BREAKPOINTS, "interval of 3", ("interval",), [0, 1, 2]),
    (BREAKPOINTS, "a domain", ("domain",), {"box": {"lower": [0], "upper": [1]}}),
    (BREAKPOINTS, "input_dim", ("input_dim",), 1),
    (RELU_SPEC, "a layer of no unit", ("layers", 0), {"W": [], "b": []}),
    (RELU_SPEC, "an output of no unit", ("output",), {"W": [], "b": []}),
    (RELU_SPEC, "a layer typo", ("layers", 0, "B"), [0]),
    (DC, "no plus", ("plus",), []),
    (DC, "a map typo", ("minus", 0, "c"), 0),
    (DC, "input_dim 0", ("input_dim",), 0),
]

# the schema is stricter than the reader here: the reader takes any integer >= 0 for a
# choice's program (the checker refuses all but 0 and 1, and 0 in a region certificate), any
# subset of the witness keys (check-cert then refuses it, or, for "member" without "flat",
# stops with an internal error), and any "stats" (never read)
READER_TAKES = {"program 2", "region program 1", "witness member without flat",
                "witness interior and empty", "stats leaves -1"}


def _certificate_bad(tree_cert: dict, layerwise: dict) -> list:
    """(base, what, path, value): one change each, to a monolithic and a layerwise one."""
    node = ("tree",)
    while "split" in _get(tree_cert, node):
        node += ("ge",)
    split = ("tree",)
    zero = [0] * tree_cert["models"]["a"]["model"]["input_dim"]
    bad = [
        (tree_cert, "top-level typo", ("tres",), {}),
        (tree_cert, "claim changed", ("claim",), "A = B"),
        (tree_cert, "both tree and layerwise", ("layerwise",), layerwise["layerwise"]),
        (tree_cert, "neither tree nor layerwise", ("tree",), DELETE),
        (tree_cert, "sha256 not hex", ("models", "a", "sha256"), "xyz"),
        (tree_cert, "models c", ("models", "c"), tree_cert["models"]["a"]),
        (tree_cert, "model of a bad format", ("models", "a", "model", "format"), "maxout"),
        (tree_cert, "domain witness typo", ("domain", "witnes"), {}),
        (tree_cert, "witness member without flat", ("domain", "witness"), {"member": zero}),
        (tree_cert, "witness interior and empty", ("domain", "witness"),
         {"interior": zero, "empty": [1]}),
        (tree_cert, "a tree node of nothing", ("tree",), {}),
        (tree_cert, "split without lt", split + ("lt",), DELETE),
        (tree_cert, "hyperplane typo", split + ("split", "b"), "0"),
        (tree_cert, "leaf typo", node + ("leaf", "choice"), []),
        (tree_cert, "same_max yes", node + ("leaf", "same_max"), "yes"),
        (tree_cert, "leaf and empty", node + ("empty",), []),
        (tree_cert, "a multiplier of 1", node + ("leaf", "choices"),
         [{"program": 0, "node": 0, "k": 0, "proofs": [[[0]]]}]),
        (tree_cert, "program 2", node + ("leaf", "choices"),
         [{"program": 2, "node": 0, "k": 0, "proofs": [None]}]),
        (tree_cert, "a tie proof without lower", node + ("leaf", "choices"),
         [{"program": 0, "node": 0, "k": 0, "proofs": [{"tie": {"dominance": [],
                                                                "upper": []}}]}]),
        (tree_cert, "stats leaves -1", ("stats", "leaves"), -1),
        (layerwise, "layerwise typo", ("layerwise", "box"), []),
        (layerwise, "box_proofs missing", ("layerwise", "box_proofs"), DELETE),
        (layerwise, "box_proofs of one", ("layerwise", "box_proofs"), [[[]]]),
        (layerwise, "a claim typo", ("layerwise", "layers", 0, 0, "output"), [0]),
        (layerwise, "a negative output", ("layerwise", "layers", 0, 0, "outputs"), [-1]),
        (layerwise, "unmerged a Maxout network", ("layerwise", "unmerged"),
         layerwise["models"]["a"]["model"]),
        (layerwise, "image typo", ("layerwise", "image"),
         [{"lower_piece": 0, "lower": [], "uper": []}]),
    ]
    return bad


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _reader_accepts(name: str, obj, tmp_path) -> bool:
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(obj))
    try:
        _reader(name)(str(path))
    except InputError:
        return False
    return True


def _check_bad(validators, tmp_path, name, base, cases):
    assert errors(validators, name, base) == [] and _reader_accepts(name, base, tmp_path)
    for case in cases:
        what, path, value = case[-3:]
        obj = _set(base, path, value)
        assert errors(validators, name, obj), f"{name}: the schema accepts: {what}"
        assert _reader_accepts(name, obj, tmp_path) == (what in READER_TAKES), \
            f"{name}: {what}: the reader disagrees"


def test_hand_made_invalid_models_are_rejected(validators, tmp_path):
    _check_bad(validators, tmp_path, "maxout", TENT, MAXOUT_BAD)
    _check_bad(validators, tmp_path, "model", TENT, MAXOUT_BAD)
    _check_bad(validators, tmp_path, "transformer", TF, TF_BAD)
    _check_bad(validators, tmp_path, "model", TF, TF_BAD)
    # the model schema picks the Transformer's schema by the format
    assert errors(validators, "model", _set(TF, ("layers",), [])) != []
    assert errors(validators, "maxout", TF) != [] and errors(validators, "transformer",
                                                             TENT) != []


def test_hand_made_valid_variants_are_accepted(validators, tmp_path):
    """Optional keys, every number form, sparse matrices, free-form meta: valid for both."""
    variants = [
        ("maxout", _set(TENT, ("meta",), {"a": [1, 2.5, None, {"b": True}], "c": "x"})),
        ("maxout", _set(TENT, ("layers", 0, "units", 0, "pieces", 0, "w"), ["+3/04", 1e-3])),
        ("maxout", _set(TENT, ("output",), DELETE)),
        ("maxout", _set(TENT, ("layers",), TENT["layers"] + [{"relu": {
            "W": {"shape": [1, 2], "entries": [[0, 1, "1/2"]]}, "b": ["0.25"]}}])
         | {"output": {"W": [["1"]], "b": ["0"]}}),
        ("transformer", _set(TF, ("readout", "token"), "mean")),
        ("transformer", _set(TF, TENT_TF_HEAD + ("scale",), DELETE)),
        ("transformer", _set(TF, TENT_TF_HEAD[:3] + ("kind",),
                             "softmax")),
        ("domain", _set(CUT, ("meta",), DELETE)),
        ("domain", {"format": "exactmax/domain", "version": 1,
                    "box": {"lower": ["-1/2", -1], "upper": ["1e-3", 1.5]}}),
        ("cpwl", _set(LATTICE, ("domain",), DELETE)),
        ("cpwl", _set(BREAKPOINTS, ("interval",), DELETE)),
        ("cpwl", _set(RELU_SPEC, ("layers",), [])),
    ]
    for n in (1, -2, 0.5, 1e-3, "+3/04", "-.5", "5.", "1E+1000", "-0/7", "123456789" * 9):
        variants.append(("maxout", _set(TENT, ("layers", 0, "units", 0, "pieces", 0, "b"), n)))
    for name, obj in variants:
        assert errors(validators, name, obj) == [], (name, obj)
        assert _reader_accepts(name, obj, tmp_path), (name, obj)


def test_hand_made_invalid_domains_and_specs_are_rejected(validators, tmp_path):
    _check_bad(validators, tmp_path, "domain", CUT, DOMAIN_BAD)
    for base, *case in CPWL_BAD:
        _check_bad(validators, tmp_path, "cpwl", base, [case])


def test_hand_made_invalid_certificates_are_rejected(validators, written, tmp_path):
    tree_cert = written["tiny.monolithic.json"][1]
    layerwise = written["tiny.layerwise.json"][1]
    assert "tree" in tree_cert and "layerwise" in layerwise
    cases = _certificate_bad(tree_cert, layerwise)
    for base in (tree_cert, layerwise):
        _check_bad(validators, tmp_path, "certificate", base,
                   [c[1:] for c in cases if c[0] is base])
    # an empty cell is a valid tree node (the written corpus has none)
    leaf_path = ("tree", "lt")
    empty = _set(tree_cert, leaf_path, {"empty": [[0, "1"], [2, "1/2"]]})
    assert errors(validators, "certificate", empty) == []
    assert _reader_accepts("certificate", empty, tmp_path)


def test_hand_made_invalid_region_certificates_are_rejected(validators, written, tmp_path):
    rc = written["saw.regions.json"][1]
    node = ("tree",)
    while "split" in _get(rc, node):
        node += ("lt",)
    cases = [
        ("top-level typo", ("merge",), []),
        ("counts missing one", ("counts", "cells"), DELETE),
        ("counts a string", ("counts", "cells"), "4"),
        ("a merge of 2", ("merges",), [[0, 1]]),
        ("a merge leaf -1", ("merges",), [[-1, 1, [0, 0]]]),
        ("region without point", node + ("region", "point"), DELETE),
        ("a leaf of the other format", node, {"leaf": {"choices": []}}),
        ("region program 1", node + ("region", "choices"),
         [{"program": 1, "node": 0, "k": 0, "proofs": [None]}]),
        ("a domain witness", ("domain", "witness"), {"interior": [0, 0]}),
        ("claim changed", ("claim",), "cells"),
    ]
    _check_bad(validators, tmp_path, "region-certificate", rc, cases)


def test_hand_made_invalid_property_certificates_are_rejected(validators, written, tmp_path):
    pc = written["tent.property.json"][1]
    node = ("cases", 0)
    while "split" in _get(pc, node):
        node += ("ge",)
    assert "excluded" in _get(pc, node)
    cases = [
        ("top-level typo", ("case",), []),
        ("cases an object", ("cases",), {}),
        ("model a Transformer", ("model", "model"), TF),
        ("model without file_sha256", ("model", "file_sha256"), DELETE),
        ("property typo", ("property", "text"), ""),
        ("vnnlib a list", ("property", "vnnlib"), []),
        ("excluded typo", node + ("excluded", "proof"), []),
        ("a phase without branches", node + ("excluded", "proofs"), [{"phase": {"node": 0}}]),
        ("a phase on node -1", node + ("excluded", "proofs"),
         [{"phase": {"node": -1, "branches": [[]]}}]),
        ("a leaf of the equivalence format", node, {"leaf": {"choices": []}}),
        ("region program 1", node + ("excluded", "choices"),
         [{"program": 1, "node": 0, "k": 0, "proofs": [None]}]),
        ("claim changed", ("claim",), "unsat"),
    ]
    _check_bad(validators, tmp_path, "property-certificate", pc, cases)


def test_what_the_schemas_cannot_express_the_reader_refuses(validators, tmp_path):
    """Accepted by the schema, refused by the reader: an integer written with a fraction part
    (JSON Schema's integers are mathematical), lengths set by another value of the file."""
    for obj in (_set(TENT, ("input_dim",), 2.0), _set(TENT, ("version",), 1.0),
                _set(TENT, ("layers", 0, "units", 0, "pieces", 0, "w"), [1, 2, 3]),
                _set(TENT, ("output", "b"), [0, 0]),
                _set(TF, ("readout", "token"), 2)):
        assert errors(validators, "model", obj) == []
        assert not _reader_accepts("model", obj, tmp_path)


# ------------------------------------------------------------------------------- numbers

@pytest.fixture(scope="module")
def number_validators():
    reg = schemas.registry()
    return {d: Draft202012Validator({"$ref": f"{schemas.BASE}common.schema.json#/$defs/{d}"},
                                    registry=reg) for d in ("number", "positive_number")}


def _reader_value(text: str):
    try:
        return parse_rational(text)
    except NumberSyntaxError:
        return None


NUMBER_STRINGS = ["0", "-3", "+3", "7/2", "-7/02", "1/0", "1/00", "1/-2", "0.125", ".5", "5.",
                  ".", "-.e1", "1e3", "1e-1000", "1E+1000", "1e1001", "1e-01000", "1e-1001",
                  "1.5e", "e5", "1/2e3", "--1", "1.2.3", "", "+", "0x1", "1_000", "NaN",
                  "Infinity", "0/5", "0.0e5", "00.001", "3/3"]


def test_number_strings_explicit(number_validators):
    for s in NUMBER_STRINGS:
        value = _reader_value(s)
        assert number_validators["number"].is_valid(s) == (value is not None), s
        assert number_validators["positive_number"].is_valid(s) == \
            (value is not None and value > 0), s
    for v, positive in ((1, True), (0, False), (-0.5, False), (0.25, True)):
        assert number_validators["number"].is_valid(v)
        assert number_validators["positive_number"].is_valid(v) == positive
    for v in (True, None, [], {}):
        assert not number_validators["number"].is_valid(v)


@given(st.text(alphabet="0123456789+-./eE", max_size=14))
def test_number_strings_agree_with_the_reader(number_validators, s):
    value = _reader_value(s)
    assert number_validators["number"].is_valid(s) == (value is not None)
    assert number_validators["positive_number"].is_valid(s) == (value is not None and value > 0)


# --------------------------------------------------------------------------- the command

def _run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_schema_command_prints_writes_and_lists(capsys, tmp_path):
    for name in schemas.NAMES:
        code, out, _ = _run(["schema", name], capsys)
        assert code == 0 and out == schemas.text(name) and json.loads(out)["$id"]
    code, out, _ = _run(["schema", "exactmax/region-certificate"], capsys)
    assert code == 0 and json.loads(out)["$id"].endswith("/region-certificate.schema.json")
    target = tmp_path / "maxout.schema.json"
    code, out, _ = _run(["schema", "maxout", "-o", str(target)], capsys)
    assert code == 0 and out == "" and target.read_text() == schemas.text("maxout")
    code, out, _ = _run(["schema", "--list"], capsys)
    assert code == 0 and all(f"{schemas.BASE}{n}.schema.json" in out for n in schemas.NAMES)
    code, out, _ = _run(["schema", "--list", "--json"], capsys)
    listed = json.loads(out)["schemas"]
    assert [r["name"] for r in listed] == list(schemas.NAMES)
    assert {r["format"] for r in listed} >= {"exactmax/maxout", "exactmax/certificate"}
    for args in (["schema", "maxnet"], ["schema"], ["schema", "maxout", "--list"],
                 ["schema", "maxout", "-o", str(tmp_path / "no" / "such" / "x.json")]):
        code, out, err = _run(args, capsys)
        assert code == 2 and err.startswith("exactmax: error: ") and out == "", args
