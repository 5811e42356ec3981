"""``exactmax eval --inputs FILE``: every point of a file, evaluated as one batch, equals the
point-by-point kernel evaluation; bad files give one line naming file and line."""

import json
import os

import pytest

from exactmax.cli import main
from exactmax.io import load_model
from exactmax.io.numbers import q_str
from exactmax.kernel.rational import Q
from exactmax.vectorized.scaled import MaxoutEvaluator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "maxout_d3_w4_r3.json")


def write(tmp_path, text, name="points.txt"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_a_large_batch_equals_the_kernel_point_by_point(tmp_path, capsys):
    net = load_model(EXAMPLE)
    xs = [(Q(i, 97), Q(-i, 13), Q(i % 5, 3)) for i in range(-300, 300)]
    text = "# i/97, -i/13, (i mod 5)/3\n\n" + "\n".join(",".join(map(str, x)) for x in xs)
    assert main(["eval", EXAMPLE, "--inputs", write(tmp_path, text), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["outputs"]
    kernel = MaxoutEvaluator(net)
    assert out == [[q_str(v) for v in kernel.evaluate(x)] for x in xs]


def test_text_output_and_the_domain_note(tmp_path, capsys):
    path = write(tmp_path, "0,0,0\n5, 0, 0  # outside\n0.5,-1/2,0\n")
    assert main(["eval", EXAMPLE, "--inputs", path]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 3
    assert all(line.startswith("y = (") for line in captured.out.splitlines())
    assert "1 of 3 inputs are outside the domain (the first on line 2" in captured.err


@pytest.mark.parametrize("text, message", [
    ("1,2\n", "points.txt: line 1: expected 3 comma-separated numbers (the model's input "
              "dimension), got 2"),
    ("1,2,3\n1,NaN,3\n", "points.txt: line 2: item 1: "),
    ("\n# nothing\n", "points.txt: no points"),
])
def test_bad_points_files(tmp_path, capsys, text, message):
    assert main(["eval", EXAMPLE, "--inputs", write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_missing_file_and_both_options(tmp_path, capsys):
    assert main(["eval", EXAMPLE, "--inputs", str(tmp_path / "none.txt")]) == 2
    assert "none.txt: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["eval", EXAMPLE, "--inputs", "p.txt", "--input", "0,0,0"])
    assert e.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_transformer_batch_and_softmax_refused(tmp_path, capsys):
    from exactmax.vectorized.scaled import TransformerEvaluator
    tf_path = os.path.join(ROOT, "examples", "tent_broken.transformer.json")
    tf = load_model(tf_path)
    xs = [(Q(i, 7), Q(-i, 11)) for i in range(-40, 40)]
    path = write(tmp_path, "\n".join(",".join(map(str, x)) for x in xs))
    assert main(["eval", tf_path, "--inputs", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["outputs"]
    kernel = TransformerEvaluator(tf)
    assert out == [[q_str(v) for v in kernel.evaluate(x)] for x in xs]
    assert main(["eval", tf_path, "--inputs", path, "--softmax-lambda", "10"]) == 2
    assert "evaluate softmax attention one --input at a time" in capsys.readouterr().err
