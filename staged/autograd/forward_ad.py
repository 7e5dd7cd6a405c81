"""``staged.autograd.forward_ad``: forward-mode AD, as ``torch.autograd.forward_ad``."""
from ..eager.forward_ad import (UnpackedDualTensor, dual_level, enter_dual_level,  # noqa: F401
                                exit_dual_level, make_dual, unpack_dual)
