"""Eager mode: NumPy-backed Tensors, dispatch, factories, versions and views, and the public
ops. The autograd engine that runs their graph is ``staged.autograd``, which attaches
``Tensor.backward`` and the hooks."""

from .. import _where
from . import factories as _factories
from . import ops  # noqa: F401  (attaches Tensor methods)
from . import subclasses  # noqa: F401  (Tensor.__torch_function__, subclasses' wrappers)
from .devices import device, get_default_device, set_default_device  # noqa: F401
from .dispatch import apply  # noqa: F401
from .factories import *  # noqa: F401,F403
from .grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,  # noqa: F401
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from .tensor import Size, Tensor  # noqa: F401

# the public factories name the user's line in their errors (staged/_where.py); staged's
# own calls of them skip the wrapper
globals().update({_n: _where.sited(getattr(_factories, _n)) for _n in _factories.__all__})
