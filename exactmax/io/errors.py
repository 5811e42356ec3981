"""Input errors: one line naming the source (file or option), the JSON path and the fix."""

import re

_LONG_DIGITS = re.compile(r"\d{41,}")
# what str.splitlines() or a terminal would break a line at, written as escapes
_ONE_LINE = {c: ascii(chr(c))[1:-1] for c in (*range(32), 0x7F, 0x85, 0x2028, 0x2029)}


def shorten_numbers(text: str) -> str:
    """Runs of more than 40 digits written as their first 20 and last 5 digits and their
    length, so that an error about a huge number stays one readable line."""
    return _LONG_DIGITS.sub(
        lambda m: f"{m.group()[:20]}...{m.group()[-5:]} ({len(m.group())} digits)", text
    )


class InputError(Exception):
    """Bad user input.  ``str(e)`` is the one line the command prints before exiting with 2
    (control characters and line separators of a key or value in it are written as escapes)."""

    def __init__(self, source: str, path: str, message: str):
        self.source, self.path, self.message = source, path, message
        where = f"{source}: {path}: " if path else f"{source}: "
        super().__init__(shorten_numbers(where + message).translate(_ONE_LINE))
