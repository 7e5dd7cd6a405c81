"""``staged.nn``: modules, layers, losses and initialisers, as in ``torch.nn``."""

from . import functional, init, utils  # noqa: F401
from .module import Module  # noqa: F401
from .modules import *  # noqa: F401,F403
from .parameter import Parameter  # noqa: F401
from . import parallel  # noqa: F401
from .parallel import DataParallel  # noqa: F401
from .utils import parametrizations, parametrize  # noqa: F401,E402  (after .modules)
