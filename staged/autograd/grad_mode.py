"""``torch.autograd.grad_mode``'s path to the grad modes (``staged/eager/grad_mode.py``)."""

from ..eager.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)
