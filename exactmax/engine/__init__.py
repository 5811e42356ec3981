"""The proof engine (untrusted producer): split trees built by branch and bound (``certify``:
equality of two programs; ``casetree``: a case of a property; ``relaxation`` and ``phases``:
relaxed leaves), the exact and float LPs behind their Farkas proofs (``lp``, ``floatlp``,
``smt``), and work units run on any executor (``parallel``).  Every tree it builds is checked
by the kernel; the routes and commands of ``prove/`` use it, and it imports nothing from them."""
