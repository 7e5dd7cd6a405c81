"""``staged.autograd``: the reverse- and forward-mode engine over eager Tensors, with
PyTorch's ``torch.autograd`` names."""

from . import tensor_methods  # noqa: F401  (attaches Tensor.backward, hooks, Node recording)
from .anomaly import (
    detect_anomaly,
    is_anomaly_check_nan_enabled,  # noqa: F401
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .engine import backward, grad  # noqa: F401
from ..eager.grad_mode import (
    enable_grad,
    inference_mode,
    no_grad,  # noqa: F401
    set_grad_enabled,
)
from . import graph  # noqa: F401
from . import forward_ad, functional, profiler  # noqa: F401
from .profiler import _profiler_enabled  # noqa: F401
from .function import Function, once_differentiable  # noqa: F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .variable import Variable  # noqa: F401
from . import grad_mode  # noqa: F401
from .grad_mode import set_multithreading_enabled  # noqa: F401
