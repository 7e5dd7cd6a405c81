"""``torch.utils.hooks``' path of ``RemovableHandle``, what every ``register_*hook``
returns (staged keeps it in ``staged/autograd/hooks.py``)."""

from ..autograd.hooks import RemovableHandle  # noqa: F401
