from .activation import LogSoftmax, ReLU, Sigmoid, Softmax, Tanh  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .linear import Flatten, Identity, Linear  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from .. import module  # noqa: F401,E402  (nn.modules.module.register_module_* as in PyTorch)
