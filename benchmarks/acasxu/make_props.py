"""Write ACAS Xu properties 1-4 (Katz et al. 2017, "Reluplex", Appendix VI) as VNN-LIB files.

Each VNN-LIB file states the *negation* of the property (an input in the box whose output is
unsafe): "unsat" means the property holds.  Inputs are scaled as (v - mean) / range with the
means and ranges of ../shared/data/vnncomp2022-test/README.md, outputs as (y - 7.5188840201005975)
/ 373.94992.  Every scaled constant is an exact rational, rounded *outward* to 9 decimals (lower
bounds down, upper bounds up, the property 1 threshold down), so the written box contains the
paper's box and the written unsafe set contains the paper's: an unsat answer here implies the
paper's property.  pi is bracketed by 3.14159265358 < pi < 3.14159265359.

    python benchmarks/acasxu/make_props.py     # rewrites prop_1.vnnlib ... prop_4.vnnlib here
"""

from fractions import Fraction as F
from math import ceil, floor
from pathlib import Path

MEANS = [F("19791.091"), F(0), F(0), F(650), F(600)]
RANGES = [F(60261), F("6.28318530718"), F("6.28318530718"), F(1100), F(1200)]
OUT_MEAN, OUT_RANGE = F("7.5188840201005975"), F("373.94992")
PI_LO, PI_HI = F("3.14159265358"), F("3.14159265359")
DIGITS = 10**9

# (lower, upper) per input, unscaled, from the paper; pi is given as (PI_LO, PI_HI) bracket ends
BOXES = {
    1: [(F("55947.691"), F(60760)), (-PI_HI, PI_HI), (-PI_HI, PI_HI), (F(1145), F(1200)), (F(0), F(60))],
    3: [(F(1500), F(1800)), (F("-0.06"), F("0.06")), (F("3.10"), PI_HI), (F(980), F(1200)), (F(960), F(1200))],
    4: [(F(1500), F(1800)), (F("-0.06"), F("0.06")), (F(0), F(0)), (F(1000), F(1200)), (F(700), F(800))],
}
BOXES[2] = BOXES[1]

TEXT = {
    1: "Property 1: if the intruder is distant and significantly slower than the ownship,\n"
       "; the score of a COC advisory is at most 1500.  Unsafe: Y_0 >= the scaled 1500.",
    2: "Property 2: if the intruder is distant and significantly slower than the ownship,\n"
       "; the score of a COC advisory is never maximal.  Unsafe: Y_0 >= Y_i for every i.",
    3: "Property 3: if the intruder is directly ahead and moving towards the ownship,\n"
       "; the score for COC is not minimal.  Unsafe: Y_0 <= Y_i for every i.",
    4: "Property 4: if the intruder is directly ahead and moving away from the ownship but at\n"
       "; a lower speed than that of the ownship, the score for COC is not minimal.  Unsafe: Y_0 <= Y_i.",
}


def dec(v: F) -> str:
    s = "-" if v < 0 else ""
    n = abs(v.numerator) * DIGITS // v.denominator
    assert F(n, DIGITS) == abs(v)
    return f"{s}{n // DIGITS}.{n % DIGITS:09d}"


def down(v: F) -> F:
    return F(floor(v * DIGITS), DIGITS)


def up(v: F) -> F:
    return F(ceil(v * DIGITS), DIGITS)


def vnnlib(n: int) -> str:
    out = [f"; ACAS Xu {TEXT[n]}", "; Written by benchmarks/acasxu/make_props.py (scaled, rounded outward).", ""]
    out += [f"(declare-const X_{i} Real)" for i in range(5)] + [""]
    out += [f"(declare-const Y_{i} Real)" for i in range(5)] + [""]
    for i, (lo, hi) in enumerate(BOXES[n]):
        out.append(f"; unscaled input {i}: [{lo}, {hi}]")
        out.append(f"(assert (<= X_{i} {dec(up((hi - MEANS[i]) / RANGES[i]))}))")
        out.append(f"(assert (>= X_{i} {dec(down((lo - MEANS[i]) / RANGES[i]))}))")
    out.append("")
    if n == 1:
        out.append(f"(assert (>= Y_0 {dec(down((1500 - OUT_MEAN) / OUT_RANGE))}))")
    elif n == 2:
        out += [f"(assert (<= Y_{i} Y_0))" for i in range(1, 5)]
    else:
        out += [f"(assert (<= Y_0 Y_{i}))" for i in range(1, 5)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    here = Path(__file__).parent
    for n in range(1, 5):
        (here / f"prop_{n}.vnnlib").write_text(vnnlib(n))
