"""``torch.utils.data._utils``: the module paths programs import collation from."""

from . import collate  # noqa: F401
