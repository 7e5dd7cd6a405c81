"""``staged.utils.model_zoo``: torch's old name for the hub's download (torchvision imports
``tqdm`` from here)."""

from ..hub import load_state_dict_from_url as load_url, tqdm  # noqa: F401
