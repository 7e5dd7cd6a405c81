"""Custom autograd Functions: ``class Exp(Function)`` with static forward/backward.

As in PyTorch, ``ctx`` *is* the backward Node: each Function subclass gets a Node class
``<Name>Backward`` (``BackwardCFunction``) whose ``apply`` calls the user's backward.
The forward runs with grad mode off; its tensor outputs are then attached to the Node.
Saved tensors are ``SavedTensor``s, so they get the version check, freeing after
backward, saved-tensor hooks and forward-AD tangents (saved after ``jvp``) like any op's. Nothing here knows about capture: under
``staged.capture`` forward and backward simply run on symbolic tensors.
"""

from __future__ import annotations

import functools

import numpy as np

from ..eager.factories import zeros
from ..eager.grad_mode import _state, no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from ..eager.views import bumped
from . import forward_ad
from .node import Node
from .saved import SavedTensor


class FunctionCtx:
    """What ``forward``/``setup_context`` may call on ``ctx``."""

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (or None) for ``backward``; read them back as ``ctx.saved_tensors``."""
        _check_saveable("save_for_backward", tensors)
        self.to_save = tensors

    def save_for_forward(self, *tensors) -> None:
        """Save tensors (or None) for ``jvp``, where ``ctx.saved_tensors`` returns them."""
        _check_saveable("save_for_forward", tensors)
        self.saved_for_forward = tensors

    def mark_dirty(self, *tensors) -> None:
        """Declare inputs that ``forward`` modified in place (and returns)."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Declare outputs that get no gradient (``requires_grad=False``; zeros in backward)."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (default) or None for outputs without a grad."""
        self.materialize_grads = bool(value)


def _check_saveable(what, tensors):
    for i, t in enumerate(tensors):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(
                f"{what} can only save variables, but argument {i} is of type {type(t).__name__}"
            )


class BackwardCFunction(FunctionCtx, Node):
    """The Node (and ``ctx``) of one ``Function.apply``; named ``<Function>Backward``."""

    _forward_cls = None

    def __init__(self):
        Node.__init__(self, ())
        self.to_save = ()
        self.saved_for_forward = None
        self.dirty_tensors = ()
        self.non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()
        self._saved = None  # [SavedTensor or None] after forward
        self._in_jvp = False
        self._tensor_args = ()  # forward-argument positions holding tensors
        self._input_avals = ()  # (shape, dtype) of each tensor input
        self._output_avals = ()  # (shape, dtype) or None per forward output

    @property
    def saved_tensors(self):
        if self._in_jvp:
            return tuple(self.saved_for_forward or ())
        if self._saved is None:
            return tuple(self.to_save)  # forward and setup_context see what they saved
        return tuple(None if s is None else s.unpack() for s in self._saved)

    def apply(self, grads):
        cls = self._forward_cls
        if self.materialize_grads:
            grads = [
                _zeros(*aval) if g is None and aval is not None else g
                for g, aval in zip(grads, self._output_avals)
            ]
        fn = cls.vjp if cls.vjp is not Function.vjp else cls.backward
        result = fn(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n = len(self.needs_input_grad)
        if len(result) != n:
            if len(result) < n or any(g is not None for g in result[n:]):
                raise RuntimeError(
                    f"function {self.name()} returned an incorrect number of "
                    f"gradients (expected {n}, got {len(result)})"
                )
            result = result[:n]
        tensor_pos = set(self._tensor_args)
        for i, g in enumerate(result):
            if g is not None and i not in tensor_pos:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than "
                    f"None at position {i + 1}, but the corresponding forward "
                    "input was not a Variable"
                )
        return [
            _fit(self, k, result[i], aval) if self.next_functions[k][0] is not None else None
            for k, (i, aval) in enumerate(zip(self._tensor_args, self._input_avals))
        ]

    def release_variables(self) -> None:
        for s in self._saved or ():
            if s is not None:
                s.release()


def _zeros(shape, dtype):
    return zeros(shape, dtype=dtype)


def _fit(node, k, g, aval):
    """``g`` summed to the input's shape (if it broadcasts to it) and cast to its dtype."""
    if g is None:
        return None
    shape, dtype = aval
    if tuple(g.shape) != shape:
        try:
            ok = np.broadcast_shapes(shape, tuple(g.shape)) == tuple(g.shape)
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index "
                f"{k} - got {list(g.shape)} but expected shape compatible with "
                f"{list(shape)}"
            )
        lead = g.ndim - len(shape)
        dims = tuple(range(lead)) + tuple(
            lead + d for d, s in enumerate(shape) if s == 1 and g.shape[lead + d] != 1
        )
        g = g.sum(dims, keepdim=True) if dims else g
        g = g.reshape(shape)
    if g.dtype is not dtype:
        g = g.to(dtype)
    return g


class FunctionMeta(type):
    """Gives every Function subclass its Node class ``<Name>Backward``."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Base class of custom autograd operations (PyTorch's ``torch.autograd.Function``).

    Example:
        >>> class Exp(staged.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, i):
        ...         result = i.exp()
        ...         ctx.save_for_backward(result)
        ...         return result
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         result, = ctx.saved_tensors
        ...         return grad_output * result
        >>> y = Exp.apply(staged.ones(2, requires_grad=True))
    """

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is "
            "deprecated. Please use new-style autograd function with static "
            "forward method."
        )

    @staticmethod
    def forward(*args, **kwargs):
        raise NotImplementedError(
            "You must implement the forward function for custom autograd.Function."
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError(
            "You must implement either the backward or vjp method for "
            "your custom autograd.Function to use it with backward mode "
            "AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError(
            "You must implement the jvp function for custom "
            "autograd.Function to use it with forward mode AD."
        )

    @classmethod
    def apply(cls, *args):
        """Run ``forward`` on ``args`` and record the Node whose backward is ``backward``."""
        if (
            cls.backward is not Function.backward
            and cls.vjp is not Function.vjp
            and cls.vjp is not cls.backward
        ):
            raise RuntimeError(
                "Implementing both 'backward' and 'vjp' for a custom Function "
                "is not allowed. You should only implement one of them."
            )
        icpt = current_interceptor()
        if icpt is not None:  # Note [hooks' reads] in staged/tracing/capture.py
            for fn in (cls.forward, cls.setup_context, cls.backward, cls.vjp, cls.jvp):
                icpt.hook(fn)
        ctx = cls._backward_cls()
        ctx._tensor_args = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        record = _state.grad_enabled and any(ctx.needs_input_grad)
        prev = _state.grad_enabled
        _state.grad_enabled = False
        paused, forward_ad._now.busy = forward_ad._now.busy, True  # Note [levels seen per thread]
        try:
            if cls.setup_context is not Function.setup_context:
                output = cls.forward(*args)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args)
        finally:
            _state.grad_enabled = prev
            forward_ad._now.busy = paused
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        outputs = _wrap_outputs(ctx, args, outputs, record)
        if forward_ad.active():
            forward_ad.each_level(lambda: _forward_ad(cls, ctx, args, outputs))
        if record:
            _save(ctx)
        return outputs[0] if single else outputs


def _wrap_outputs(ctx, args, outputs, record):
    """Attach tensor outputs to ``ctx`` (PyTorch's ``_wrap_outputs``)."""
    dirty = {id(t) for t in ctx.dirty_tensors}
    non_diff = {id(t) for t in ctx.non_differentiable}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    for t in ctx.dirty_tensors:
        if record and t._requires_grad and t.grad_fn is None:
            raise RuntimeError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )
        t._vc[0] += 1
        bumped(t._vc)
    if not record:
        return outputs
    ctx.next_functions = tuple(_edge(args[i]) for i in ctx._tensor_args)
    ctx._input_avals = tuple((tuple(args[i].shape), args[i].dtype) for i in ctx._tensor_args)
    wrapped, avals = [], []
    for nr, t in enumerate(outputs):
        if not isinstance(t, Tensor):
            wrapped.append(t)
            avals.append(None)
            continue
        if id(t) not in dirty and (id(t) in inputs or t.grad_fn is not None):
            with no_grad():
                t = forward_ad._alias(t)  # returned as-is: a view, as in PyTorch
        avals.append((tuple(t.shape), t.dtype))
        if id(outputs[nr]) not in non_diff:
            t.grad_fn, t._output_nr, t._requires_grad = ctx, nr, True
        wrapped.append(t)
    ctx.num_outputs = len(outputs)
    ctx._output_avals = tuple(avals)
    return tuple(wrapped)


def _save(ctx):
    """Save what was asked once ``jvp`` gave the outputs their tangents (PyTorch's
    ``_save_variables`` after ``_wrap_outputs``): the SavedTensors keep them, so a backward
    run inside the forward-AD levels differentiates through them (forward-over-reverse)."""
    tensors, ctx.to_save = ctx.to_save, ()
    ctx._saved = [None if t is None else SavedTensor(t, ctx) for t in tensors]
    if forward_ad.active():
        forward_ad.keep_saved_tangents(ctx._saved, tensors)


def _edge(t):
    if not t._requires_grad:
        return (None, 0)
    return (t.grad_fn, t._output_nr) if t.grad_fn is not None else (t._grad_accumulator(), 0)


def _forward_ad(cls, ctx, args, outputs):
    """Tangents of the outputs from ``cls.jvp``, given the inputs' tangents."""
    tangents = [forward_ad.tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tangents):
        return
    if ctx.materialize_grads:
        tangents = [
            _zeros(tuple(a.shape), a.dtype) if t is None and isinstance(a, Tensor) else t
            for a, t in zip(args, tangents)
        ]
    ctx._in_jvp = True
    try:
        result = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
    result = result if isinstance(result, tuple) else (result,)
    tensor_outs = [t for t in outputs if isinstance(t, Tensor)]
    if len(result) != len(tensor_outs):
        raise RuntimeError(
            f"{cls.__name__}.jvp returned an incorrect number of tangents "
            f"(expected {len(tensor_outs)}, got {len(result)})"
        )
    for t, tangent in zip(tensor_outs, result):
        if tangent is not None:
            forward_ad.set_tangent(t, tangent)


class _DelayedError(Node):
    """The Node of a ``once_differentiable`` backward's outputs: differentiating it raises."""

    def __init__(self, msg, num_outputs):
        super().__init__(())
        self.msg = msg
        self.num_outputs = num_outputs

    def name(self) -> str:
        return "DelayedError"

    def apply(self, grads):
        raise RuntimeError(self.msg)


def once_differentiable(fn):
    """Decorate a ``backward`` that is not itself differentiable: it runs without
    recording, and differentiating its result raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *args):
        prev = _state.grad_enabled
        _state.grad_enabled = False
        try:
            outputs = fn(ctx, *args)
        finally:
            _state.grad_enabled = prev
        if not prev or not any(isinstance(a, Tensor) and a._requires_grad for a in args):
            return outputs
        single = not isinstance(outputs, tuple)
        outputs = (outputs,) if single else outputs
        node = _DelayedError(
            "trying to differentiate twice a function that was marked with @once_differentiable",
            len(outputs),
        )
        wrapped = []
        for nr, v in enumerate(outputs):
            if isinstance(v, Tensor):
                v = v.detach()
                v.grad_fn, v._output_nr, v._requires_grad = node, nr, True
            wrapped.append(v)
        return wrapped[0] if single else tuple(wrapped)

    return wrapper
