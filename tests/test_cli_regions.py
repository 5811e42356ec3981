"""exactmax regions: output, JSON keys, certificates re-checked by the kernel, bad input."""

import json
import os

import pytest

from exactmax.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENT = os.path.join(ROOT, "examples", "tent.json")


def _domain(tmp_path, body, name="d.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"format": "exactmax/domain", "version": 1, **body}))
    return str(p)


def test_json_keys_and_sawtooth(capsys):
    assert main(["regions", "--sawtooth", "3,2,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["activation_regions"] == out["linear_regions"] == 81
    assert out["expected_linear_regions"] == 81 and out["kind"] == "maxout"
    assert main(["regions", "--sawtooth", "2,1,3", "--compile", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["linear_regions"] == 8 and out["kind"] == "transformer"
    assert out["linear_certified"] is True     # 1-D: 8 distinct maps, the kernel's bound


def test_text_output(capsys):
    assert main(["regions", TENT]) == 0
    out = capsys.readouterr().out
    assert "activation regions" in out and "linear regions on the domain" in out
    assert "kernel-checked" in out


def test_certificate_round_trip_and_tampering(tmp_path, capsys):
    cert = str(tmp_path / "c.json")
    assert main(["regions", TENT, "--cert", cert, "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert main(["regions", "--check-cert", cert, "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    assert checked["verdict"] == "valid" and checked["activation_regions"] == counted["activation_regions"]
    assert checked["merge_components"] == counted["linear_regions"]
    data = json.loads(open(cert).read())
    node = data["tree"]
    while "split" in node:
        node = node["ge"]
    node["region"]["b"][0] = "12345/7"          # a wrong affine map
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert main(["regions", "--check-cert", str(bad)]) == 1
    assert "rejected" in capsys.readouterr().out
    data = json.loads(open(cert).read())
    data["model"]["model"]["layers"][0]["units"][0]["pieces"][0]["b"] = "7"
    bad.write_text(json.dumps(data))
    assert main(["regions", "--check-cert", str(bad)]) == 2
    assert "sha256" in capsys.readouterr().err


def test_stated_counts_must_be_the_kernels(tmp_path, capsys):
    """A certificate whose counts block says anything but what the kernel finds is rejected;
    so is a dropped merge (the merge components then differ from the stated ones)."""
    cert = str(tmp_path / "c.json")
    assert main(["regions", TENT, "--cert", cert]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.json"
    for key, delta in [("activation_regions", 1), ("linear_regions", -1),
                       ("linear_regions", 1), ("cells", 1), ("distinct_maps", 1),
                       ("merge_components", -1)]:
        data = json.loads(open(cert).read())
        data["counts"][key] += delta
        bad.write_text(json.dumps(data))
        assert main(["regions", "--check-cert", str(bad)]) == 1, key
        assert f"counts.{key}" in capsys.readouterr().out
    data = json.loads(open(cert).read())
    assert data["merges"]
    data["merges"] = data["merges"][1:]
    bad.write_text(json.dumps(data))
    assert main(["regions", "--check-cert", str(bad)]) == 1
    assert "merge_components" in capsys.readouterr().out
    data = json.loads(open(cert).read())
    data["counts"]["regions"] = 3                       # an unknown key
    bad.write_text(json.dumps(data))
    assert main(["regions", "--check-cert", str(bad)]) == 2
    assert 'counts' in capsys.readouterr().err


def test_unbounded_empty_and_flat_domains(tmp_path, capsys):
    unb = _domain(tmp_path, {"polyhedron": {"A": [[1, 0]], "b": [1]}})
    assert main(["regions", TENT, "--domain", unb]) == 2
    err = capsys.readouterr().err
    assert err.startswith("exactmax: error: ") and "unbounded" in err and err.count("\n") == 1
    empty = _domain(tmp_path, {"box": {"lower": [1, 0], "upper": [0, 1]}})
    assert main(["regions", TENT, "--domain", empty]) == 2
    assert "empty" in capsys.readouterr().err
    flat = _domain(tmp_path, {"polyhedron": {"A": [[1, 0], [-1, 0], [0, 1], [0, -1]],
                                             "b": [0, 0, 1, 1]}})
    assert main(["regions", TENT, "--domain", flat]) == 2
    assert "interior" in capsys.readouterr().err


def test_usage_errors(tmp_path, capsys):
    assert main(["regions"]) == 2
    assert "MODEL.json or --sawtooth" in capsys.readouterr().err
    assert main(["regions", "--sawtooth", "3,2"]) == 2
    assert "K,d,D" in capsys.readouterr().err
    assert main(["regions", "--sawtooth", "1,2,2"]) == 2
    capsys.readouterr()
    assert main(["regions", "--sawtooth", "2,1,2", "--plot", str(tmp_path / "p.png")]) == 2
    assert "2-D" in capsys.readouterr().err


def test_max_cells_gives_unknown(capsys):
    assert main(["regions", "--sawtooth", "3,2,2", "--max-cells", "5", "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["linear_regions"] is None and "5 cells" in out["reason"]


def test_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "r.png"
    assert main(["regions", "--sawtooth", "2,2,2", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_plot_path_that_cannot_be_written_is_refused_before_the_count(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    for path, words in [(tmp_path / "no" / "such" / "dir" / "r.png", "does not exist"),
                        (tmp_path / "r.xyz", "must end in one of"),
                        (tmp_path / "r", "no suffix")]:
        assert main(["regions", "--sawtooth", "2,2,2", "--plot", str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1 and "Traceback" not in err
        assert not path.exists()


def test_help(capsys):
    with pytest.raises(SystemExit):
        main(["regions", "--help"])
    assert "linear regions" in capsys.readouterr().out


def test_check_cert_points_a_region_certificate_to_regions(tmp_path, capsys):
    cert = str(tmp_path / "c.json")
    assert main(["regions", TENT, "--cert", cert]) == 0
    capsys.readouterr()
    assert main(["check-cert", cert]) == 2
    err = capsys.readouterr().err
    assert "regions --check-cert" in err and err.count("\n") == 1


def test_check_cert_with_a_model_checks_it_is_about_that_model(tmp_path, capsys):
    cert = str(tmp_path / "c.json")
    assert main(["regions", TENT, "--cert", cert]) == 0
    capsys.readouterr()
    assert main(["regions", TENT, "--check-cert", cert]) == 0
    assert "valid" in capsys.readouterr().out
    other = os.path.join(ROOT, "examples", "relu_triangle.json")
    assert main(["regions", other, "--check-cert", cert]) == 1
    assert "another model" in capsys.readouterr().out
    assert main(["regions", "--sawtooth", "2,1,1", "--check-cert", cert]) == 2


def test_all_units_counts_a_dead_units_patterns_and_the_default_does_not(tmp_path, capsys):
    """y = max(x, 0) with a second unit max(x - 1/2, 0) whose output weight is 0: over the
    units the output depends on there are 2 activation regions on [-1, 1] (x < 0, x > 0),
    over all units 3 (the dead unit switches at 1/2); 2 linear regions either way.  Both
    certificates pass check-cert, each counting as it says, and a certificate whose "units"
    is changed is rejected for its claimed counts."""
    import json
    net = {"format": "exactmax/maxout", "version": 1, "input_dim": 1,
           "layers": [{"units": [{"pieces": [{"w": [1], "b": 0}, {"w": [0], "b": 0}]},
                                 {"pieces": [{"w": [1], "b": "-1/2"}, {"w": [0], "b": 0}]}]}],
           "output": {"W": [[1, 0]], "b": [0]},
           "domain": {"box": {"lower": [-1], "upper": [1]}}}
    path = tmp_path / "dead.json"
    path.write_text(json.dumps(net))
    got = {}
    for flag in ([], ["--all-units"]):
        cert = tmp_path / f"c{len(flag)}.json"
        assert main(["regions", str(path), "--json", "--cert", str(cert)] + flag) == 0
        out = json.loads(capsys.readouterr().out)
        got[out["units"]] = (out["activation_regions"], out["linear_regions"])
        assert main(["regions", "--check-cert", str(cert), "--json"]) == 0
        chk = json.loads(capsys.readouterr().out)
        assert chk["verdict"] == "valid" and chk["activation_regions"] == out["activation_regions"]
        assert chk["units"] == out["units"]
    assert got == {"outputs": (2, 2), "all": (3, 2)}
    c = json.loads((tmp_path / "c1.json").read_text())
    c["units"] = "outputs"            # the all-units tree, read as if it counted the cone
    (tmp_path / "t.json").write_text(json.dumps(c))
    assert main(["regions", "--check-cert", str(tmp_path / "t.json"), "--json"]) != 0
    capsys.readouterr()
