"""What ``exactmax export-coq --check`` checks besides coqc's exit status.

1. The binding: the file states exactly what the certificate says.  Its sentences (comments
   and layout aside) are read back and compared, sentence by sentence and number by number,
   with the export of the certificate: the models' data, the domain, the packed tree, the
   hashes in ``Module Sha256`` and the statement of the theorem.  So a file whose domain was
   edited (to a smaller one: still a true theorem, and it still compiles) is caught, and the
   first difference is named.
2. The axioms: an exported file ends with ``Print Assumptions net_equiv``; coqc's output
   is read completely and every name on the list checked against ``ALLOWED``.
3. That the library is current (``coqlib.check_current``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from fractions import Fraction

REALS_AXIOMS = (
    # the two axioms of Coq's standard library of real numbers that the library's theorems use
    "ClassicalDedekindReals.sig_forall_dec",
    "FunctionalExtensionality.functional_extensionality_dep",
)
PRIMITIVES = (
    tuple(
        f"PrimInt63.{n}"
        for n in (
            # Coq's primitive 63-bit integers (Coq.Numbers.Cyclic.Int63.PrimInt63): the packed
            # certificate is an array of them
            "int",
            "lsl",
            "lsr",
            "land",
            "lor",
            "lxor",
            "asr",
            "add",
            "sub",
            "mul",
            "mulc",
            "div",
            "mod",
            "divs",
            "mods",
            "eqb",
            "ltb",
            "leb",
            "ltsb",
            "lesb",
            "addc",
            "addcarryc",
            "subc",
            "subcarryc",
            "diveucl",
            "diveucl_21",
            "addmuldiv",
            "compare",
            "compares",
            "head0",
            "tail0",
        )
    )
    + tuple(
        f"PArray.{n}"
        for n in (
            # primitive persistent arrays (Coq.Array.PArray)
            "array",
            "make",
            "get",
            "default",
            "set",
            "length",
            "copy",
            "max_length",
        )
    )
    + tuple(
        f"PrimFloat.{n}"
        for n in (
            # primitive floats (Coq.Floats.PrimFloat): not used today, primitives of the same kind
            "float",
            "classify",
            "abs",
            "sqrt",
            "opp",
            "eqb",
            "ltb",
            "leb",
            "compare",
            "mul",
            "add",
            "sub",
            "div",
            "of_uint63",
            "normfr_mantissa",
            "frshiftexp",
            "ldshiftexp",
            "next_up",
            "next_down",
        )
    )
)
UINT63_SPECS = tuple(
    f"Uint63.{n}"
    for n in (
        # the standard library's specification of the primitive integers
        # (Coq.Numbers.Cyclic.Int63.Uint63, all its axioms): what each primitive above computes,
        # as a function of Z.  The checker's Farkas combinations of dyadic rationals run in
        # machine words (Bignums' BigZ, Checker.Dy), proved through these.
        "of_to_Z",
        "lsl_spec",
        "lsr_spec",
        "land_spec",
        "lor_spec",
        "lxor_spec",
        "add_spec",
        "sub_spec",
        "mul_spec",
        "mulc_spec",
        "div_spec",
        "mod_spec",
        "eqb_correct",
        "eqb_refl",
        "ltb_spec",
        "leb_spec",
        "compare_def_spec",
        "head0_spec",
        "tail0_spec",
        "addc_def_spec",
        "addcarryc_def_spec",
        "subc_def_spec",
        "subcarryc_def_spec",
        "diveucl_def_spec",
        "diveucl_21_spec",
        "addmuldiv_def_spec",
    )
)
ALLOWED = frozenset(REALS_AXIOMS + PRIMITIVES + UINT63_SPECS)
"""The only names ``Print Assumptions net_equiv`` may list."""


class BindingMismatch(Exception):
    """The Coq file does not state what the certificate says (one line, naming where)."""


class AssumptionsRejected(Exception):
    """Print Assumptions listed an axiom outside ALLOWED, or output it could not read."""


# ------------------------------------------------------------------ 1. the binding

_TOKEN = re.compile(
    r"""
    (?P<q>\(\s*-?\d+\s*\#\s*\d+\s*\))      # a rational (p#q)
  | (?P<n>-?\d+)                           # an integer
  | (?P<s>"(?:[^"]|"")*")                  # a string
  | (?P<end>\.(?=\s|$))                    # the end of a sentence
  | (?P<id>[A-Za-z_](?:[A-Za-z0-9_'.]*[A-Za-z0-9_'])?)   # a (qualified) name
  | (?P<sym>:=|->|/\\|\[\||\|\]|%[A-Za-z0-9_]+|\S)  # anything else, one symbol
""",
    re.X,
)


_LEXEME = re.compile(r'\(\*|\*\)|"')
_STRING = re.compile(r'"(?:[^"]|"")*"')


def _strip_comments(text: str) -> str:
    """The text with Coq's comments (nested, strings inside them included) blanked; strings
    outside comments are kept."""
    out, depth, i = [], 0, 0
    while True:
        m = _LEXEME.search(text, i)
        if m is None:
            if depth:
                raise BindingMismatch("a comment is not closed")
            out.append(text[i:])
            return "".join(out)
        lexeme, j = m.group(), m.start()
        if lexeme == '"':
            s = _STRING.match(text, j)
            if s is None:
                raise BindingMismatch("a string is not closed")
            if not depth:
                out.append(text[i : s.end()])
            i = s.end()
            continue
        if not depth:
            out.append(text[i:j] if lexeme == "(*" else text[i : m.end()])
        if lexeme == "(*":
            if not depth:
                out.append(" ")  # a comment separates tokens
            depth += 1
        elif depth:
            depth -= 1
        i = m.end()


def sentences(text: str) -> list[tuple[str, list]]:
    """The file's sentences as (name, tokens): a name such as "Definition upper" (inside
    ``Module M``: "Definition M.upper") or the sentence's first words; numbers as Fractions."""
    out, toks, module = [], [], None
    for m in _TOKEN.finditer(_strip_comments(text)):
        kind, s = m.lastgroup, m.group()
        if kind == "q":
            p, q = re.sub(r"[()\s]", "", s).split("#")
            toks.append(Fraction(int(p), int(q)))
        elif kind == "n":
            toks.append(Fraction(int(s)))
        elif kind == "end":
            words = [t for t in toks if isinstance(t, str)]
            if words[:1] == ["Module"] and len(words) > 1:
                module = words[1]
            elif words[:1] == ["End"]:
                module = None
            if (
                words[:1]
                and words[0] in ("Definition", "Lemma", "Theorem", "Fixpoint")
                and len(words) > 1
            ):
                name = f"{words[0]} {module + '.' if module else ''}{words[1]}"
            else:
                name = "the sentence " + repr(" ".join(words[:4]))
            out.append((name, toks))
            toks = []
        else:
            toks.append(s)
    if toks:
        out.append(("the text after the last sentence", toks))
    return out


_WHAT = {
    "net_a": "model a",
    "net_b": "model b",
    "lower": "the domain",
    "upper": "the domain",
    "A": "the domain",
    "b": "the domain",
    "packed": "the certificate's tree",
    "top_packed": "the certificate's tree",
    "splits": "the unmerged Transformer",
    # property files (export.coq_property)
    "net": "the network",
    "cases": "the property",
}


def _what(name: str) -> str:
    word = name.split()[-1]
    if word.startswith("Sha256."):
        return "the sha256 the file is bound to"
    if re.fullmatch(r"case\d+", word):
        return "the property"
    if word.startswith("net_a_"):  # a Transformer's parts (a pair certificate's model a)
        return "model a"
    return _WHAT.get(word) or (
        "model b" if word.startswith(("net_b_", "split_")) else "the statement"
    )


def _show(t) -> str:
    if isinstance(t, Fraction):
        return str(t)
    return t if len(t) <= 40 else t[:37] + "..."


def check_binding(
    path: str, text: str, expected: str, cert: str, what=None, stream=None, verb: str = "has"
) -> int:
    """The number of sentences compared; BindingMismatch names the first difference between
    the file ``text`` and ``expected``, the export of ``cert`` (a certificate, or the JSON
    inputs): sentence by sentence (comments and layout aside), number by number, then the
    sha256 lines of the opening comment.  ``what(name)`` says what a sentence defines;
    ``stream(numbers)``, when given, decodes a packed array into the numbers it holds, which
    are then compared one by one."""
    what = what or _what
    got, want = sentences(text), sentences(expected)
    for i, (g, w) in enumerate(zip(got, want)):
        if g == w:
            continue
        if g[0] != w[0]:
            raise BindingMismatch(
                f"{path}: sentence {i + 1} is {g[0]}, but the export of {cert} has {w[0]} there"
            )
        where = f"{path}: {g[0]} ({what(g[0])})"
        gn = [t for t in g[1] if isinstance(t, Fraction)]
        wn = [t for t in w[1] if isinstance(t, Fraction)]
        unit = "number"
        if stream is not None and "[|" in g[1] and "[|" in w[1] and gn and wn:
            try:
                gn, wn, unit = stream(gn[:-1]), stream(wn[:-1]), "number of the stream"
            except (OverflowError, ValueError, TypeError):
                pass
        for k, (a, b) in enumerate(zip(gn, wn)):
            if a != b:
                raise BindingMismatch(f"{where}: {unit} {k} is {a}, but {cert} {verb} {b}")
        if len(gn) != len(wn):
            raise BindingMismatch(f"{where}: {len(gn)} numbers, but {cert} {verb} {len(wn)}")
        for a, b in zip(g[1], w[1]):
            if a != b:
                raise BindingMismatch(f"{where}: {_show(a)!r} where {cert} has {_show(b)!r}")
        raise BindingMismatch(f"{where}: {len(g[1])} tokens, but {cert} has {len(w[1])}")
    if len(got) != len(want):
        extra = got[len(want)][0] if len(got) > len(want) else want[len(got)][0]
        raise BindingMismatch(
            f"{path}: {len(got)} sentences, but the export of {cert} has "
            f"{len(want)} (first unmatched: {extra})"
        )
    # the hashes in the opening comment, which a reader sees first
    stated, bound = dict(_HASH_LINE.findall(text)), dict(_HASH_LINE.findall(expected))
    for key, h in bound.items():
        if stated.get(key) != h:
            raise BindingMismatch(
                f"{path}: the opening comment gives {key} sha256 "
                f"{stated.get(key, 'none')}, but {cert} has {h}"
            )
    return len(got)


_HASH_LINE = re.compile(
    r"^ {5}(net_a|net_b|domain|model|model_file|property) +([0-9a-f]{64})$", re.M
)


# ------------------------------------------------------------------ 2. the axioms

_HEADER = re.compile(r"[A-Z][A-Za-z/() -]*:")
_ENTRY = re.compile(r"([^\s:]+)(?:\s+:.*)?")


def parse_assumptions(out: str) -> dict[str, list[str]]:
    """``Print Assumptions``' output as {section: names} ({} for "Closed under the global
    context").  An entry starts at the line's first column with its name, followed by
    " : type" on the same line or, when the type is long, on the next lines (indented);
    sections are "Axioms:", "Section Variables:", "... relying on type-in-type:" and the
    like.  Anything else is refused: the output is trusted only when read completely."""
    lines = [l for l in out.splitlines() if l.strip()]
    if [l.strip() for l in lines] == ["Closed under the global context"]:
        return {}
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines:
        if line[0].isspace():
            if current is None or not sections[current]:
                raise AssumptionsRejected(f"cannot read Print Assumptions' output: {line!r}")
            continue  # a type that wraps onto further lines
        if _HEADER.fullmatch(line):
            current = line[:-1]
            sections.setdefault(current, [])
            continue
        m = _ENTRY.fullmatch(line)
        if current is None or m is None:
            raise AssumptionsRejected(f"cannot read Print Assumptions' output: {line!r}")
        sections[current].append(m.group(1))
    if not sections:
        raise AssumptionsRejected("Print Assumptions printed nothing")
    return sections


def check_assumptions(out: str) -> list[str]:
    """The axioms listed (all in ALLOWED); AssumptionsRejected names the first one that is
    not, or a section other than "Axioms"."""
    sections = parse_assumptions(out)
    for section, names in sections.items():
        if section != "Axioms":
            raise AssumptionsRejected(f"Print Assumptions lists {section}: " + ", ".join(names))
        for name in names:
            if name not in ALLOWED:
                raise AssumptionsRejected(
                    f"the theorem depends on the axiom {name}, which is "
                    "not among the Reals axioms and Coq primitives "
                    "allowed"
                )
    return sections.get("Axioms", [])


# ------------------------------------------------------------------ coqc


@dataclass(frozen=True, slots=True)
class CoqResult:
    ok: bool
    message: str
    seconds: float
    axioms: tuple = ()


def _coqc_argv(library: str, path: str) -> list[str]:
    """coqc on ``path`` (run in its folder) against the library as ``ExactMax``."""
    return [
        shutil.which("coqc") or "coqc",
        "-Q",
        library,
        "ExactMax",
        "-no-glob",
        os.path.basename(path),
    ]


def run_coqc(path: str, library: str, timeout_s: float = 600.0) -> CoqResult:
    """coqc on ``path`` against the library: ok iff coqc accepts the file and the output of
    its last command, ``Print Assumptions net_equiv`` (coqc's only output on stdout for an
    exported file), lists only ALLOWED names."""
    t0 = time.monotonic()
    folder = os.path.dirname(os.path.abspath(path))
    try:
        r = subprocess.run(
            _coqc_argv(library, path),
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return CoqResult(False, f"coqc did not finish in {timeout_s:.0f} s", time.monotonic() - t0)
    if r.returncode != 0:
        return CoqResult(False, (r.stdout + r.stderr).strip(), time.monotonic() - t0)
    try:
        axioms = check_assumptions(r.stdout)
    except AssumptionsRejected as e:
        return CoqResult(False, f"{path}: {e}", time.monotonic() - t0)
    return CoqResult(True, r.stderr.strip(), time.monotonic() - t0, tuple(axioms))


def run_coqc_stages(stages: list[list[str]], library: str, timeout_s: float = 600.0) -> CoqResult:
    """coqc on files that import one another (an export in parts): the stages in turn, the
    files of a stage side by side (one process each), every file compiled here, so that no
    .vo of an earlier run is used.  ok iff coqc accepts every file and the last stage's one
    file prints a ``Print Assumptions`` that lists only ALLOWED names; the message names
    the first file refused."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    for stage in stages:
        for path in stage:
            stem = os.path.splitext(os.path.abspath(path))[0]
            for ext in (".vo", ".vos", ".vok", ".glob"):
                with contextlib.suppress(OSError):
                    os.remove(stem + ext)
    out = ""
    for stage in stages:
        procs = [
            (
                path,
                subprocess.Popen(
                    _coqc_argv(library, path),
                    cwd=os.path.dirname(os.path.abspath(path)),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
            for path in stage
        ]
        failed = None
        try:
            for path, p in procs:
                try:
                    o, e = p.communicate(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    failed = failed or f"{path}: coqc did not finish in {timeout_s:.0f} s"
                    break
                if p.returncode != 0 and failed is None:
                    failed = f"{path}: " + (o + e).strip()
                out = o
        finally:
            for _, p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        if failed is not None:
            return CoqResult(False, failed, time.monotonic() - t0)
    try:
        axioms = check_assumptions(out)
    except AssumptionsRejected as e:
        return CoqResult(False, f"{stages[-1][0]}: {e}", time.monotonic() - t0)
    return CoqResult(True, "", time.monotonic() - t0, tuple(axioms))


def library_and_file(args, text: str, check: bool):
    """(the Coq library to check against, or None without ``check``; the file's text as on
    disk): the library located and made current (``coqlib``), then the exported ``text``
    written atomically to ``args.output`` and read back, or (``--existing``) the file there
    read as it is, so that what is checked is what is on disk."""
    import sys

    from ..exits import UsageError
    from ..io import InputError
    from ..io.models import write_bytes_atomic
    from . import coqlib

    lib = None
    if check:
        try:
            lib = coqlib.locate(args.coq_lib)
            coqlib.ready(lib, log=lambda m: print(f"exactmax: {m}", file=sys.stderr))
        except coqlib.LibraryError as e:
            raise UsageError(f"--check: {e}") from None
    if not args.existing:
        write_bytes_atomic(args.output, text.encode())
    try:
        with open(args.output, encoding="utf-8") as f:
            return lib, f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(args.output, "", f"cannot be read: {e}") from None
