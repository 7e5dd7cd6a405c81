"""Graph IR -> MLIR text (linalg on tensors), verified before it is compiled."""

from .emitter import LOWERINGS, TABLE, LoweringError  # noqa: F401
from .module import to_mlir, verify  # noqa: F401
from . import elementwise, indexing, linalg, reduction, shape  # noqa: F401  (register the emitters)
from . import collective, nn, random  # noqa: F401
