"""``staged.autograd.function``: custom Functions, as ``torch.autograd.function``."""
from ..eager.function import (BackwardCFunction, Function, FunctionCtx,  # noqa: F401
                              once_differentiable)
