"""Input errors: one line naming the source (file or option), the JSON path and the fix."""


class InputError(Exception):
    """Bad user input.  ``str(e)`` is the one line the command prints before exiting with 2."""

    def __init__(self, source: str, path: str, message: str):
        self.source, self.path, self.message = source, path, message
        where = f"{source}: {path}: " if path else f"{source}: "
        super().__init__(where + message)
