"""Errors shared by the package: unknown names get one readable message listing what is allowed."""

from __future__ import annotations


class UnknownNameError(KeyError, ValueError):
    """An unknown chip, model or question id. A KeyError (lookup) and a ValueError (bad input).

    KeyError's own str() wraps the message in quotes; this one prints it as written.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
