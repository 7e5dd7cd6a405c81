"""Eager mode: NumPy-backed Tensors and the define-by-run reverse-mode engine."""
from . import ops  # noqa: F401  (attaches Tensor methods)
from .dispatch import apply  # noqa: F401
from .engine import backward, grad  # noqa: F401
from .factories import *  # noqa: F401,F403
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled,  # noqa: F401
                        is_inference_mode_enabled, no_grad, set_grad_enabled)
from .node import AccumulateGrad, Node, PrimitiveBackward  # noqa: F401
from .tensor import Size, Tensor  # noqa: F401
