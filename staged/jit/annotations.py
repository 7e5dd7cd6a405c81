"""``staged.jit.annotations``: the typing names TorchScript code imports from
``torch.jit.annotations`` (timm's DenseNet: ``List``), which are typing's."""

from typing import Any, Callable, Dict, List, Optional, Tuple, Union  # noqa: F401, UP035

BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = List  # noqa: UP006
