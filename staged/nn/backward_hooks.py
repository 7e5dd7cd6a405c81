"""Module backward hooks, built as PyTorch builds them (``torch.utils.hooks.BackwardHook``).

One identity custom Function is applied to all tensor inputs of a module and one to all
its tensor outputs, so a single Node sees all their gradients at once. A post-hook on the
outputs' Node records ``grad_output`` (running the backward pre-hooks, which may replace
it); a post-hook on the inputs' Node then calls the full backward hooks with
``grad_input`` and ``grad_output``. Special cases, as in torch 2.13:

- no input requires grad but an output does: the hooks run from the outputs' Node, with
  ``grad_input`` all None (and a UserWarning);
- the inputs' Node runs before the outputs' Node (a gradient reached the inputs without
  passing through the outputs): nothing is called;
- grad mode is off: no Function is applied and no hook will fire;
- a tensor input not requiring grad (beside one that does) gets zeros in ``grad_input``:
  torch's hook sees what the identity's backward returned for it, the zeros its
  non-differentiable output's gradient was materialized as.
"""

from __future__ import annotations

from .._where import warn_user
from ..autograd.function import Function
from ..eager.factories import zeros
from ..eager.grad_mode import is_grad_enabled
from ..eager.tensor import Tensor


class BackwardHookFunction(Function):
    """Identity on a tuple of tensors: one Node (``BackwardHookFunctionBackward``) for all."""

    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *grads):
        return grads


def _pack_with_none(indices, values, size):
    res = [None] * size
    for i, v in zip(indices, values):
        res[i] = v
    return tuple(res)


class BackwardHook:
    """State shared by the input and output captures of one module call."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_outputs = self.n_inputs = -1
        self.output_tensors_index = self.input_tensors_index = None
        self.no_grad_inputs: dict = {}  # position among the input tensors -> (shape, dtype)

    def _apply_on_tensors(self, on_node, args):
        """``args`` with their tensors passed through one ``BackwardHookFunction``, whose
        Node ``on_node`` hooks; ``(args, None)`` when no tensor requires grad."""
        idx = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in idx]
        if not (any(t.requires_grad for t in tensors) and is_grad_enabled()):
            return args, None
        new = BackwardHookFunction.apply(*tensors)
        if not new:
            raise RuntimeError(
                "Cannot set Module backward hook for a Module with no input Tensors."
            )
        on_node(next(t.grad_fn for t in new if t.grad_fn is not None))
        out = list(args)
        for i, t in zip(idx, new):
            out[i] = t
        return (tuple(out) if type(args) is tuple else type(args)(*out)), idx  # a namedtuple

    def setup_input_hook(self, args):
        def on_node(node):
            def hook(grad_input, _):
                if self.grad_outputs is None:
                    return None  # the gradient did not pass through the outputs
                grad_input = list(grad_input)
                for k, (shape, dtype) in self.no_grad_inputs.items():
                    grad_input[k] = zeros(shape, dtype=dtype)
                res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
                for user_hook in self.user_hooks:
                    out = user_hook(self.module, res, self.grad_outputs)
                    if out is None:
                        continue
                    if len(out) != len(res):
                        raise RuntimeError(
                            f"Backward hook returned an invalid number of "
                            f"grad_input, got {len(out)}, but expected "
                            f"{len(res)}"
                        )
                    res = out
                self.grad_outputs = None
                return tuple(  # None where staged's Node has no edge to take a gradient
                    None if k in self.no_grad_inputs else res[i]
                    for k, i in enumerate(self.input_tensors_index)
                )

            node.register_hook(hook)

        res, self.input_tensors_index = self._apply_on_tensors(on_node, args)
        self.n_inputs = len(args)
        tensors = [a for a in args if isinstance(a, Tensor)]
        self.no_grad_inputs = {
            k: (tuple(t.shape), t.dtype) for k, t in enumerate(tensors) if not t.requires_grad
        }
        return res

    def setup_output_hook(self, result):
        def on_node(node):
            def hook(_, grad_output):
                self.grad_outputs = _pack_with_none(
                    self.output_tensors_index, grad_output, self.n_outputs
                )
                for pre_hook in self.user_pre_hooks:
                    new = pre_hook(self.module, self.grad_outputs)
                    if new is None:
                        continue
                    if len(new) != len(self.grad_outputs):
                        raise RuntimeError(
                            f"Backward pre hook returned an invalid number of "
                            f"grad_output, got {len(new)}, but expected "
                            f"{len(self.grad_outputs)}"
                        )
                    self.grad_outputs = new
                local = self.grad_outputs
                if self.input_tensors_index is None:
                    self._call_without_inputs()
                return tuple(local[i] for i in self.output_tensors_index)

            node.register_hook(hook)

        single = not isinstance(result, tuple)
        res, self.output_tensors_index = self._apply_on_tensors(
            on_node, (result,) if single else result
        )
        self.n_outputs = 1 if single else len(result)
        return res[0] if single else res

    def _call_without_inputs(self):
        warn_user(
            "Full backward hook is firing when gradients are computed with respect "
            "to module outputs since no inputs require gradients. See "
            "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
            "#torch.nn.Module.register_full_backward_hook for more details."
        )
        grad_inputs = (None,) * self.n_inputs
        for user_hook in self.user_hooks:
            res = user_hook(self.module, grad_inputs, self.grad_outputs)
            if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                raise RuntimeError(
                    "Backward hook for Modules where no input requires gradient "
                    "should always return None or None for all gradients."
                )
        self.grad_outputs = None


def legacy_hook_warning(inputs, result, node):
    """PyTorch's FutureWarning when a legacy backward hook's Node does not stand for the
    whole module (several Nodes, nested or non-tensor inputs/outputs); None otherwise."""
    result = (result,) if isinstance(result, Tensor) else result
    inputs = (inputs,) if isinstance(inputs, Tensor) else inputs
    if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
        return (
            "Using non-full backward hooks on a Module that does not return a single "
            "Tensor or a tuple of Tensors is deprecated and will be removed in future "
            "versions. This hook will be missing some of the grad_output. Please use "
            "register_full_backward_hook to get the documented behavior."
        )
    if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
        return (
            "Using non-full backward hooks on a Module that does not take as input a "
            "single Tensor or a tuple of Tensors is deprecated and will be removed in "
            "future versions. This hook will be missing some of the grad_input. Please "
            "use register_full_backward_hook to get the documented behavior."
        )
    out_nodes = {r.grad_fn for r in result if r.grad_fn is not None}
    if not out_nodes or (len(out_nodes) == 1 and node not in out_nodes):
        return (
            "Using a non-full backward hook when outputs are nested in python data "
            "structure is deprecated and will be removed in future versions. This hook "
            "will be missing some grad_output."
        )
    if len(out_nodes) > 1:
        return (
            "Using a non-full backward hook when outputs are generated by different "
            "autograd Nodes is deprecated and will be removed in future versions. This "
            "hook will be missing some grad_output. Please use register_full_backward_hook "
            "to get the documented behavior."
        )
    if {i.grad_fn for i in inputs if i.grad_fn is not None} != {n for n, _ in node.next_functions}:
        return (
            "Using a non-full backward hook when the forward contains multiple autograd "
            "Nodes is deprecated and will be removed in future versions. This hook will be "
            "missing some grad_input. Please use register_full_backward_hook to get the "
            "documented behavior."
        )
    return None
