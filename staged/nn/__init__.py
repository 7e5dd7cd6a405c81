"""``staged.nn``: modules, layers, losses and initialisers, as in ``torch.nn``."""

from importlib import import_module as _import_module

from . import functional, init  # noqa: F401
from .module import Module  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Parameter  # noqa: F401
from . import parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from .utils import parametrizations, parametrize  # noqa: F401,E402  (after .modules)

# torch.nn.attention and torch.nn.utils (the star import bound the names to modules'
# attention.py and utils.py, which ``from . import attention`` would return)
attention = _import_module(".attention", __name__)
utils = _import_module(".utils", __name__)
