"""scalebook_utils — the package behind the scalebook notebooks.

The core (units, hardware, roofline, questions, check) is pure Python + numpy. The shell modules
(`jaxlab`, `plots`, `widgets`) import jax, matplotlib or ipywidgets and are imported explicitly.
"""

from .check import check

__all__ = ["check"]
__version__ = "0.1.0"
