"""``staged.autograd.gradcheck``: where PyTorch keeps gradcheck and gradgradcheck."""
from ..eager.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
