"""``staged.autograd``: PyTorch's ``torch.autograd`` names over the eager engine."""
from ..eager.engine import backward, grad  # noqa: F401
from ..eager.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                               set_grad_enabled)
