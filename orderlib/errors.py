"""The one exception a caller of the protocols or the file readers catches for bad input."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input: `path` (a file, or the argument's name) and `what` is wrong with it.

    The `orderlib` command prints it as `orderlib: error: <path>: <what>` and exits 2."""

    def __init__(self, path, what: str):
        super().__init__(f"{path}: {what}")
        self.path = str(path)
        self.what = what
