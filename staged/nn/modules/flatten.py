"""torch's module path of Flatten and Unflatten, ``torch.nn.modules.flatten`` (Note [module
paths] in ``__init__.py``): staged keeps them in ``linear.py``."""

from .linear import Flatten, Unflatten  # noqa: F401
