"""Collectives have no MLIR lowering yet: a compiled step that calls one fails to lower,
naming the op and the user's line."""
from ...autodiff.collective import COLLECTIVES
from ...autodiff.primitive import CLASSES
from .emitter import unsupported

WHY = ("compiled steps with collectives are not supported yet (DDP and staged.distributed "
       "run eagerly): run this step without staged.compile")
for _prim in COLLECTIVES:
    unsupported(_prim.name, dict.fromkeys(CLASSES, WHY))
