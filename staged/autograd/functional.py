"""``staged.autograd.functional``: jacobian, hessian, vjp, jvp, vhp, hvp."""
from ..eager.functional import hessian, hvp, jacobian, jvp, vhp, vjp  # noqa: F401
