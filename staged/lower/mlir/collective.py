"""Collectives have no MLIR lowering: on llvm-cpu and vulkan-spirv, whose IREE drivers have
no collective channel, ``staged.compile`` runs a step with collectives as compiled segments
with the collectives between them on the host (Note [segments] in
``staged/tracing/segments.py``; ``save()`` keeps the segments); lowering one into a
single module (cuda) fails, naming the op and the user's line."""

from ...autodiff.collective import COLLECTIVES
from ...autodiff.primitive import CLASSES
from .emitter import unsupported

WHY = (
    "collectives run on the host between compiled segments (staged.compile on llvm-cpu "
    "and vulkan-spirv, and the steps save() writes from them); they cannot be lowered "
    "into one module, so compiling such a step for cuda is not supported yet: run it "
    "eagerly or on llvm-cpu"
)
for _prim in COLLECTIVES:
    unsupported(_prim.name, dict.fromkeys(CLASSES, WHY))
