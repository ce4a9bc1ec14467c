"""Chapter 3 in one namespace (public name `sharding`): the notation (`notation`: meshes, sharded arrays,
what each device holds) and the sharded matmul (`matmul`: the four cases, their communication plans, the
JAX program). `notation` never imports `matmul`, so there is no import cycle; this door imports both."""

from scalebook_utils.core.sharding.matmul import *  # noqa: F403  (the door re-exports the two halves' __all__)
from scalebook_utils.core.sharding.matmul import __all__ as _matmul_all
from scalebook_utils.core.sharding.notation import *  # noqa: F403
from scalebook_utils.core.sharding.notation import __all__ as _notation_all

__all__ = sorted(set(_notation_all) | set(_matmul_all))
