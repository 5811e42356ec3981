"""``check-cert``'s comparison of a certificate with the files a user names: does it speak
about them?  Each certificate records the SHA-256 its producer computed, and this recomputes it
from the file, the same way:

- an equivalence or pair-property certificate (``--models A B``, ``--domain D``): the SHA-256 of
  each model's and the domain's canonical JSON (``io.certificates.content_hash``, "meta" left
  out), from the file read as the producer read it (an .onnx model imported);
- a property certificate (``--model NET``, ``--property PROP``): the model file's bytes
  (``file_sha256``: the .onnx or JSON file ``check`` read; a different file holding the same
  network, such as the JSON ``import`` wrote from that .onnx, is accepted by its network's
  canonical SHA-256, and said so), and the property's text as ``check`` hashed it (UTF-8, a
  .gz file decompressed), VNN-LIB 1.0 or 2.0 alike.

A file that does not match is refused, in one line naming it with the expected and the actual
SHA-256 (exit 1, "rejected"); files not given are reported as not compared, in the text answer
and in ``--json`` (``"files": {"compared": {role: path}, "not_compared": [role, ...]}``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exits import UsageError


@dataclass
class Binding:
    """What was compared: ``compared`` (role -> path), ``not_compared`` (roles),
    ``same_network`` (roles of a file matched by its network's canonical SHA-256, not its
    bytes), ``notes`` (text about those), and ``mismatch`` (None, or the refusal: role, file,
    expected, actual, and the one line printed)."""

    compared: dict = field(default_factory=dict)
    not_compared: list = field(default_factory=list)
    same_network: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    mismatch: dict | None = None

    def as_json(self) -> dict:
        out = {"compared": dict(self.compared), "not_compared": list(self.not_compared)}
        if self.same_network:
            out["same_network"] = list(self.same_network)
        return out

    def line(self, options: str) -> str:
        """The text answer's line about the files (for a match, or none given)."""
        given = [
            p
            for role, v in self.compared.items()
            if role not in self.same_network
            for p in (v if isinstance(v, list) else [v])
        ]
        said = []
        if len(given) > 1:
            said.append(" and ".join(given) + " are the files the certificate names")
        elif given:
            said.append(f"{given[0]} is a file the certificate names")
        said.extend(self.notes)
        if self.not_compared:
            said.append(
                " and ".join(self.not_compared)
                + (
                    " files"
                    if len(self.not_compared) > 1 or self.not_compared == ["models"]
                    else " file"
                )
                + f" not compared (give {options} to check that the certificate is about yours)"
            )
        return "files: " + "; ".join(said)

    def refuse(self, role: str, path: str, expected: str, actual: str, how: str) -> None:
        self.mismatch = {
            "role": role,
            "file": path,
            "expected": expected,
            "actual": actual,
            "line": f"rejected: {path} is not the {role} the certificate speaks about: {how} "
            f"sha256 {actual}, expected {expected}",
        }


PROPERTY_OPTIONS = "--model NET --property PROP"
PAIR_OPTIONS = "--models A B --domain D"


def _given_models(args) -> list[str]:
    return list(getattr(args, "models", None) or ()) + (
        [args.model] if getattr(args, "model", None) else []
    )


def check_options(args, kind: str) -> None:
    """Refuse the options of another kind of certificate (a usage error, exit 2)."""
    models = _given_models(args)
    if kind == "property":
        if len(models) > 1:
            raise UsageError(
                f"a property certificate is about one model and one property: "
                f"{PROPERTY_OPTIONS} (got {len(models)} models)"
            )
        if getattr(args, "domain", None):
            raise UsageError(
                "a property certificate has no domain file: its input set is in the property "
                "(--property PROP)"
            )
        return
    if getattr(args, "model", None) or getattr(args, "property", None):
        raise UsageError(
            f"an equivalence or pair-property certificate is about two models and a domain: "
            f"{PAIR_OPTIONS}"
        )
    if getattr(args, "models", None) and len(args.models) != 2:
        raise UsageError(
            f"--models: an equivalence or pair-property certificate is about two models "
            f"(--models A B), got {len(args.models)}"
        )


def compare_property_files(args, hashes: dict) -> Binding:
    """--model / --property against a property certificate's hashes ({"model": canonical,
    "model_file": bytes, "property": text})."""
    from ..io import load_model
    from ..io.certificates import content_hash
    from ..io.models import model_to_json
    from ..io.property_certificate import file_sha256

    check_options(args, "property")
    b = Binding()
    models = _given_models(args)
    if models:
        path = models[0]
        actual = _file_sha256(path, file_sha256)
        if actual == hashes["model_file"]:
            b.compared["model"] = path
        else:
            canonical = content_hash(model_to_json(load_model(path)))
            if canonical == hashes["model"]:
                b.compared["model"] = path
                b.same_network.append("model")
                b.notes.append(
                    f"{path} is not the file the certificate names but holds the same network "
                    f"(its canonical JSON's sha256 {canonical[:16]}... is the certificate's)"
                )
            else:
                b.refuse("model", path, hashes["model_file"], actual, "its file has")
                return b
    else:
        b.not_compared.append("model")
    prop = getattr(args, "property", None)
    if prop:
        import hashlib

        from ..io.jsonfile import read_text_file

        actual = hashlib.sha256(read_text_file(prop, "a VNN-LIB text file").encode()).hexdigest()
        if actual != hashes["property"]:
            b.refuse("property", prop, hashes["property"], actual, "its text has")
            return b
        b.compared["property"] = prop
    else:
        b.not_compared.append("property")
    return b


def compare_pair_files(args, hashes: dict, input_dim: int) -> Binding:
    """--models A B / --domain D against an equivalence or pair-property certificate's hashes
    ({"a", "b", "domain"}: canonical JSON)."""
    from ..io import load_domain, load_model
    from ..io.certificates import content_hash
    from ..io.models import domain_to_json, model_to_json

    check_options(args, "pair")
    b = Binding()
    if args.models:
        for path, key in zip(args.models, ("a", "b")):
            actual = content_hash(model_to_json(load_model(path)))
            if actual != hashes[key]:
                b.refuse(
                    f"model {key.upper()}", path, hashes[key], actual, "its canonical JSON has"
                )
                return b
        b.compared["models"] = list(args.models)
    else:
        b.not_compared.append("models")
    if args.domain:
        actual = content_hash(domain_to_json(load_domain(args.domain, input_dim)))
        if actual != hashes["domain"]:
            b.refuse("domain", args.domain, hashes["domain"], actual, "its canonical JSON has")
            return b
        b.compared["domain"] = args.domain
    else:
        b.not_compared.append("domain")
    return b


def _file_sha256(path: str, file_sha256) -> str:
    from ..io import InputError

    try:
        return file_sha256(path)
    except FileNotFoundError:
        raise InputError(path, "", "no such file") from None
    except IsADirectoryError:
        raise InputError(path, "", "is a directory, expected a model file") from None
    except OSError as e:
        raise InputError(path, "", f"cannot read: {e.strerror or e}") from None


def refuse_binding(args, binding: Binding, sha: dict) -> int:
    """A named file is not the one the certificate is about: rejected (exit 1), one line
    naming the file, the expected and the actual sha256."""
    from .. import jsonout
    from ..exits import EXIT_REFUTED

    m = binding.mismatch
    assert m is not None
    if args.json:
        print(
            jsonout.dumps(
                {
                    "verdict": "rejected",
                    "trust": None,
                    "reason": m["line"].removeprefix("rejected: "),
                    "sha256": sha,
                    "files": binding.as_json(),
                    "mismatch": {k: m[k] for k in ("role", "file", "expected", "actual")},
                }
            )
        )
    else:
        print(m["line"])
    return EXIT_REFUTED
