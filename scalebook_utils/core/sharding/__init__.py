"""Chapter 3 in one namespace (public name `sharding`): the notation (`notation`: meshes, sharded arrays,
what each device holds), the sharded matmul (`matmul`, the public `sharded_matmul`: the four cases
`cases`, their collectives `comm`, the plans `plans`, the JAX program `program`) and layers as chains of
matmuls (`layers`: their time and bytes per device). Each module imports only `notation` and the siblings
listed before it, so there is no import cycle; this door imports all of them."""

from scalebook_utils.core.sharding.layers import *  # noqa: F403  (the door re-exports the parts' __all__)
from scalebook_utils.core.sharding.layers import __all__ as _layers_all
from scalebook_utils.core.sharding.matmul import *  # noqa: F403
from scalebook_utils.core.sharding.matmul import __all__ as _matmul_all
from scalebook_utils.core.sharding.notation import *  # noqa: F403
from scalebook_utils.core.sharding.notation import __all__ as _notation_all

__all__ = sorted(set(_notation_all) | set(_matmul_all) | set(_layers_all))
