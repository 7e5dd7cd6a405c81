"""``staged.autograd.graph``: PyTorch's ``torch.autograd.graph``."""
from ..eager.graph import (GradientEdge, Node, allow_mutation_on_saved_tensors,  # noqa: F401
                           disable_saved_tensors_hooks, get_gradient_edge, increment_version,
                           register_multi_grad_hook, save_on_cpu, saved_tensors_hooks)
