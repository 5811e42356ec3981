"""Exit statuses and the command-line error, shared by every command.

Each command module takes them from here, so no module imports ``cli.py`` (which imports the
command modules): the import graph has no cycle.
"""

EXIT_OK = 0  # proved (kernel-checked), valid, certified, or the command's job done
EXIT_REFUTED = 1  # refuted (a counterexample the kernel evaluated), or rejected
EXIT_INPUT = 2  # a bad input or command line: one line on stderr
EXIT_UNKNOWN = 3  # unknown, with the reason
EXIT_SOLVER_ONLY = 4  # proved by z3 alone: no certificate the kernel checked
EXIT_VACUOUS = 5  # the domain is empty (kernel-checked): the claim says nothing
EXIT_BUG = 70
"""Exit status of an unexpected exception (a bug): never one of the statuses above."""


class UsageError(Exception):
    """A bad command-line value; the message is the one line printed."""
