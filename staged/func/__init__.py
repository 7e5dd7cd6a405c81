"""``staged.func``: torch.func's composable transforms (JAX's in spirit): ``grad``,
``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap`` (with a
batching rule per primitive: ``staged/autograd/batching.py``), ``linearize``,
``functional_call`` and ``stack_module_state``.

Example (per-example gradients):
    >>> params = {k: v.detach() for k, v in model.named_parameters()}
    >>> def loss(params, x, y):
    ...     return F.cross_entropy(functional_call(model, params, (x[None],)), y[None])
    >>> grads = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
"""

from ..autograd.vmap import vmap
from .batch_norm import replace_all_batch_norm_modules_
from .functional_call import functional_call, stack_module_state
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize, vjp

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "replace_all_batch_norm_modules_",
    "stack_module_state",
    "vjp",
    "vmap",
]
