"""Errors shared by the package: unknown names get one readable message listing what is allowed."""

from __future__ import annotations

import difflib


class UnknownNameError(KeyError, ValueError):
    """An unknown chip, model or question id. A KeyError (lookup) and a ValueError (bad input).

    KeyError's own str() wraps the message in quotes; this one prints it as written.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: leading vendor words a lookup ignores ("Meta-Llama-3-8B", "NVIDIA H100", "AMD Instinct MI300X")
VENDOR_PREFIXES = ("meta", "nvidia", "amd", "instinct", "google")


def squash_name(name: str) -> str:
    """A name's lookup key: lower case, the part after an "org/" prefix, letters and digits only, without
    leading vendor words (`VENDOR_PREFIXES`) or a trailing "hf" (Llama-2-7b-hf)."""
    key = "".join(ch for ch in str(name).strip().lower().rsplit("/", 1)[-1] if ch.isalnum())
    for prefix in VENDOR_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix) :]
    return key[:-2] if key.endswith("hf") and len(key) > 2 else key


def name_index(names, aliases: dict[str, str]) -> dict[str, str]:
    """Squashed spelling → canonical name for `names` and `aliases`; a clash between two targets is a bug."""
    index: dict[str, str] = {}
    for spelling, target in [(n, n) for n in names] + list(aliases.items()):
        key = squash_name(spelling)
        if index.setdefault(key, target) != target:
            raise AssertionError(f"{spelling!r} and {index[key]!r} squash to the same key {key!r}")
    return index


def resolve_name(name: str, index: dict[str, str], what: str, known) -> str:
    """The canonical name for `name` in `index` (see `name_index`), or UnknownNameError naming the close
    matches (difflib, on the squashed spellings) and every known name."""
    key = squash_name(name)
    if key in index:
        return index[key]
    close = dict.fromkeys(index[k] for k in difflib.get_close_matches(key, list(index), n=5, cutoff=0.6))
    hint = f"close matches: {', '.join(close)}; " if close else ""
    raise UnknownNameError(f"unknown {what} {name!r}; {hint}known {what}s: {', '.join(known)}")


class WrongTypeError(TypeError, ValueError):
    """An argument of the wrong type (a string or None where a number belongs). A TypeError, and a ValueError
    so that code catching the package's bad-input errors (always ValueError) still catches it."""
