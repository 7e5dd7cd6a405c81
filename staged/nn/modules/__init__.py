from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh  # noqa: F401
from .attention import MultiheadAttention  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .linear import Flatten, Identity, Linear, Unflatten  # noqa: F401
from .loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm  # noqa: F401
from .pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d  # noqa: F401
from .sparse import Embedding  # noqa: F401
from .. import module  # noqa: F401,E402  (nn.modules.module.register_module_* as in PyTorch)
