"""``torch.optim.adamw``'s path of ``AdamW`` (staged keeps it beside Adam in ``adam.py``)."""

from .adam import AdamW  # noqa: F401
