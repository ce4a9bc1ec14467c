"""Errors shared by the package: unknown names get one readable message listing what is allowed."""

from __future__ import annotations


class UnknownNameError(KeyError, ValueError):
    """An unknown chip, model or question id. A KeyError (lookup) and a ValueError (bad input).

    KeyError's own str() wraps the message in quotes; this one prints it as written.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class WrongTypeError(TypeError, ValueError):
    """An argument of the wrong type (a string or None where a number belongs). A TypeError, and a ValueError
    so that code catching the package's bad-input errors (always ValueError) still catches it."""
