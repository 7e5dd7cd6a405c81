"""torch's module path of the batch norms, ``torch.nn.modules.batchnorm`` (Note [module
paths] in ``__init__.py``): staged keeps them in ``normalization.py``."""

from .normalization import BatchNorm1d, BatchNorm2d  # noqa: F401
