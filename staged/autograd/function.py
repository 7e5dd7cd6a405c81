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
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np

from ..eager.factories import zeros, zeros_like
from ..eager.grad_mode import _state, no_grad
from ..eager.interceptor import current_interceptor
from ..eager.tensor import Tensor
from ..eager.ops.inplace import check_inplace
from ..eager.views import bumped, in_custom_function
from . import forward_ad
from .node import Node, rebase
from .saved import SavedTensor
from .vmap import Batched, _local, vmap


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
        result = _backward_fn(cls)(self, *grads)
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

    generate_vmap_rule = False  # True: vmap maps forward, backward and jvp over the batch

    @staticmethod
    def vmap(info, in_dims, *args):
        """The Function's batching rule under ``vmap``: ``info`` (``batch_size``,
        ``randomness``), each argument's batch dim (None: not batched) and the arguments;
        returns ``(output, out_dims)``. Or set ``generate_vmap_rule = True``."""
        raise NotImplementedError(
            "To use autograd.Function with vmap, you must either override the vmap "
            "staticmethod or set generate_vmap_rule=True."
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
        separate = cls.setup_context is not Function.setup_context
        # Note [Functions under vmap]
        output = _on_physical(cls, args) if separate else _refuse_differentiated(cls, args)
        prev = _state.grad_enabled
        _state.grad_enabled = False
        paused, forward_ad._now.busy = forward_ad._now.busy, True  # Note [levels seen per thread]
        try:
            if separate:
                output = cls.forward(*args) if output is None else output
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args)
        finally:
            _state.grad_enabled = prev
            forward_ad._now.busy = paused
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        raw, outputs = outputs, _wrap_outputs(ctx, args, outputs, record)
        if forward_ad.active():
            forward_ad.each_level(lambda: _forward_ad(cls, ctx, args, raw, outputs))
        if record:
            _save(ctx)
        return outputs[0] if single else outputs


_DIRTY_VIEW_OF_MANY = (
    "If your Function modifies inplace an input that is a view of another Tensor, your "
    "Function cannot return more than one Tensor. This is not supported by the current "
    "autograd engine. You should either make sure the input is not a view (using .clone() "
    "for example) or make your Function only return one Tensor (potentially splitting it "
    "into two Functions: one doing the inplace that returns a single Tensor and a second one "
    "that does the other operations). You can ask on the forum "
    "https://discuss.pytorch.org/ if you need help to do this change."
)


def _check_dirty(ctx, n_outputs) -> None:
    """torch's checks of the tensors ``ctx.mark_dirty`` named, where the Function records:
    no leaf that requires grad; for a view, an in-place op's checks (no view of such a
    leaf, of a multi-output op, made under no_grad) and a Function of one output."""
    for t in ctx.dirty_tensors:
        if t._base is not None:  # (the checks read no stale view's grad_fn, as torch's)
            check_inplace(t, True)
            if n_outputs > 1:
                raise RuntimeError(_DIRTY_VIEW_OF_MANY)
        elif t._requires_grad and t.grad_fn is None:
            raise RuntimeError(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )


def _wrap_outputs(ctx, args, outputs, record):
    """Attach tensor outputs to ``ctx`` (PyTorch's ``_wrap_outputs``). A dirty view's base
    goes through CopySlices, as an in-place op's (``rebase``); any other view returned is
    marked as made inside the Function (``in_custom_function``)."""
    dirty = {id(t) for t in ctx.dirty_tensors}
    non_diff = {id(t) for t in ctx.non_differentiable}
    inputs = {id(a) for a in args if isinstance(a, Tensor)}
    if record:
        _check_dirty(ctx, len(outputs))
        # the inputs' edges, read before the dirty ones' versions move (their rebase below
        # regenerates a dirty view's grad_fn from its base's CopySlices)
        ctx.next_functions = tuple(_edge(args[i]) for i in ctx._tensor_args)
        ctx._input_avals = tuple((tuple(args[i].shape), args[i].dtype) for i in ctx._tensor_args)
    for t in ctx.dirty_tensors:
        t._vc[0] += 1
        bumped(t._vc)
    if not record:
        return outputs
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
            if id(t) in dirty and t._base is not None:
                rebase(t, SimpleNamespace(grad_fn=ctx, _output_nr=nr))  # the written value's edge
            else:
                t.grad_fn, t._output_nr, t._requires_grad = ctx, nr, True
                if t._base is not None:
                    in_custom_function(t, ctx.name(), nr)
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


def _forward_ad(cls, ctx, args, raw, outputs):
    """Tangents of the outputs (``raw`` as ``forward`` returned them) from ``cls.jvp``,
    given the inputs' tangents, checked as PyTorch's ``_process_forward_mode_AD``."""
    tangents = [forward_ad.tangent_of(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tangents):
        return
    if ctx.materialize_grads:
        tangents = [
            _zeros(tuple(a.shape), a.dtype) if t is None and isinstance(a, Tensor) else t
            for a, t in zip(args, tangents)
        ]
    versions = [None if t is None else t._vc[0] for t in tangents]
    ctx._in_jvp = True
    try:
        result = cls.jvp(ctx, *tangents)
    finally:
        ctx._in_jvp = False
    result = result if isinstance(result, tuple) else (result,)
    tensor_outs = [(o, t) for o, t in zip(raw, outputs) if isinstance(t, Tensor)]
    if len(result) != len(tensor_outs):
        raise RuntimeError(
            f"{cls.__name__}.jvp returned an incorrect number of tangents "
            f"(expected {len(tensor_outs)}, got {len(result)})"
        )
    for i, ((o, t), tangent) in enumerate(zip(tensor_outs, result)):
        _check_tangent(ctx, i, o, tangent, args, tangents, versions)
        if tangent is not None:
            forward_ad.set_tangent(t, tangent)


def _check_tangent(ctx, i, out, tangent, args, tangents, versions):
    """PyTorch's checks of the tangent ``cls.jvp`` gave output ``i`` (``out`` as
    ``forward`` returned it): none for a non-differentiable output; a dirty input's own
    tangent, modified in place; for an input returned as-is or a view of one, a view of
    that input's tangent."""
    if any(out is t for t in ctx.non_differentiable):
        if tangent is not None:
            raise RuntimeError(
                f"Function's jvp returned a gradient at position {i}, but  the corresponding "
                "forward output is not a differentiable Tensor.You should return None at "
                "that position instead."
            )
        return
    root = _root(out)
    k = next((k for k, a in enumerate(args) if a is out), None)
    if k is None and out._base is not None:  # a view of an input (a dual is a view too)
        k = next(
            (k for k, a in enumerate(args) if isinstance(a, Tensor) and _root(a) is root),
            None,
        )
    if k is None or tangents[k] is None:
        return
    given = tangents[k]
    if any(out is t for t in ctx.dirty_tensors):
        if tangent is None or tangent._vc[0] == versions[k]:  # as torch compares them
            raise RuntimeError(
                "An inplace custom Function is not modifying the forward mode gradients "
                "inplace. If the forward is modifying an input inplace, then the jvp "
                "function must modify the corresponding gradient inplace."
            )
        if tangent is not given:
            raise RuntimeError(
                "An inplace custom Function is not returning the forward mode gradients "
                "as-is. If the forward is modifying an input inplace, then the jvp function "
                "must modify the gradient inplace and return it as-is."
            )
    elif tangent is not None and tangent._base is None:
        raise RuntimeError(
            "A custom Function's forward is returning a view (or an input as-is) but the "
            "jvp is not returning a view."
        )
    elif tangent is not None and tangent._base is not _root(given):
        raise RuntimeError(
            "A custom Function is returning a view but the jvp is not returning a view of "
            "the given grad input."
        )


# Note [Functions under vmap]: a Function applied to tensors batched at a vmap level runs
# on their physical values, as functorch's ``custom_function_call`` goes down its levels:
# mapped by ``vmap`` at that level (generate_vmap_rule), or, where no argument is batched
# there (only lifted), as itself; its outputs are wrapped again, and the level records its
# own Node (``setup_context`` on the logical tensors, the forward not run twice). So a
# transform outside the vmap, which differentiates the physical values, sees the Function
# (its backward and jvp mapped over the batch): with the forward's ops run with grad off and
# hidden from forward AD at every level, it saw nothing (a zero gradient or tangent).
# Functions whose ``forward`` takes ``ctx`` (which torch.func refuses) run as before under
# vmap alone, and raise torch.func's error where a transform outside would differentiate
# them (``_refuse_differentiated``).
def _on_physical(cls, args):
    """``cls`` applied to the physical values of ``args`` at their innermost vmap level,
    outputs wrapped at it; None where no argument is batched."""
    level = max(
        (a._payload.level for a in args if isinstance(a, Tensor) and type(a._payload) is Batched),
        default=0,
    )
    if not level:
        return None
    here = [
        isinstance(a, Tensor) and type(a._payload) is Batched and a._payload.level == level
        for a in args
    ]
    physical = tuple(a._payload.value if h else a for a, h in zip(args, here))
    dims = tuple(a._payload.bdim if h else None for a, h in zip(args, here))
    randomness = _local.stack[level - 1][1]
    if not any(d is not None for d in dims):
        output, out_dims = cls.apply(*physical), None
    elif cls.generate_vmap_rule or cls.__module__.startswith("staged."):
        output, out_dims = _vmapped(cls, dims, randomness).apply(*physical), 0
    elif cls.vmap is Function.vmap:
        raise RuntimeError(
            f"You tried to vmap over {cls.__name__}, but it does not have vmap support. "
            "Please override and implement the vmap staticmethod or set "
            "generate_vmap_rule=True. For more details, please see "
            "https://pytorch.org/docs/main/notes/extending.func.html"
        )
    else:
        size = next(a.shape[d] for a, d in zip(physical, dims) if d is not None)
        result = cls.vmap(VmapInfo(size, randomness), dims, *physical)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError(
                "Expected the vmap staticmethod to have two returns, an output and out_dims "
                f"with pytree structure compatible with the output. Got a {type(result)} instead"
            )
        output, out_dims = result

    def wrap(o, d):
        if not isinstance(o, Tensor):
            return o
        return Tensor._wrap(Batched(o, d if d is None or d >= 0 else d + o.ndim, level), False)

    if not isinstance(output, tuple):
        return wrap(output, out_dims)
    out_dims = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(output)
    return tuple(map(wrap, output, out_dims))


class VmapInfo(NamedTuple):
    """What a Function's ``vmap`` staticmethod is told: the batch size and vmap's
    ``randomness``."""

    batch_size: int
    randomness: str


def _refuse_differentiated(cls, args) -> None:
    """torch.func's error for a user's Function whose ``forward`` takes ``ctx`` applied
    under vmap to values that are differentiated (a gradient or a tangent), which a
    transform outside the vmap could not see (Note [Functions under vmap]); under vmap
    alone it runs. (staged's own such Functions are written for the transforms.)"""
    if cls.__module__.startswith("staged."):
        return
    for a in args:
        while isinstance(a, Tensor) and type(a._payload) is Batched:
            a = a._payload.value
            if a._requires_grad or forward_ad.active() and forward_ad.tangents(a):
                raise RuntimeError(
                    "In order to use an autograd.Function with functorch transforms (vmap, "
                    "grad, jvp, jacrev, ...), it must override the setup_context staticmethod. "
                    "For more details, please see "
                    "https://pytorch.org/docs/main/notes/extending.func.html"
                )


@functools.lru_cache(maxsize=128)
def _vmapped(cls, in_dims, randomness):
    """``cls`` mapped over the batch dims ``in_dims`` of its arguments (torch's
    ``vmapify_autograd_function``): forward, backward and jvp under ``vmap``, the last two
    on the inputs and outputs that ``cls.setup_context`` is replayed on."""

    def replay(ctx, body):
        """``(inputs, outputs, their out_dims, one)``: the saved inputs and outputs, and
        ``one(inputs, outputs, extra)``, to be vmapped: ``body(inner, inputs, outputs,
        extra)`` with ``inner`` a ctx that ``cls.setup_context`` filled from them."""
        n = len(ctx.consts)
        pairs = zip(ctx.consts + ctx.out_consts, ctx.saved_tensors)
        full = [c if s is None else s for c, s in pairs]
        inputs, outputs = tuple(full[:n]), tuple(full[n:])
        out_dims = tuple(0 if isinstance(o, Tensor) else None for o in outputs)

        def one(inputs, outputs, extra):
            inner = cls._backward_cls()
            inner.needs_input_grad = ctx.needs_input_grad
            cls.setup_context(inner, inputs, outputs[0] if ctx.single else outputs)
            return body(inner, inputs, outputs, extra)

        return inputs, outputs, out_dims, one

    class Vmapped(Function):
        @staticmethod
        def forward(*args):
            return vmap(cls.forward, in_dims, 0, randomness)(*args)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.single = not isinstance(output, tuple)
            outs = (output,) if ctx.single else output
            ctx.consts = [None if isinstance(a, Tensor) else a for a in inputs]
            ctx.out_consts = [None if isinstance(o, Tensor) else o for o in outs]
            tensors = [a if isinstance(a, Tensor) else None for a in (*inputs, *outs)]
            ctx.save_for_backward(*tensors)
            ctx.save_for_forward(*tensors)

        @staticmethod
        def backward(ctx, *grads):
            def body(inner, inputs, outputs, grads):
                res = _backward_fn(cls)(inner, *grads)
                res = res if isinstance(res, tuple) else (res,)
                return tuple(
                    _fit(inner, k, zeros_like(x) if g is None else g, (tuple(x.shape), x.dtype))
                    if isinstance(x, Tensor)
                    else None
                    for k, (x, g) in enumerate(zip(inputs, res))
                )

            inputs, outputs, out_dims, one = replay(ctx, body)
            arg_dims = tuple(None if d is None else 0 for d in in_dims)
            gs = vmap(one, (in_dims, out_dims, out_dims), arg_dims, randomness)(
                inputs, outputs, grads
            )
            # back to each input's batch dim; summed over the batch for one not batched
            return tuple(
                g if g is None else g.sum(0) if d is None else g.movedim(0, d)
                for g, d in zip(gs, in_dims)
            )

        @staticmethod
        def jvp(ctx, *tangents):
            def body(inner, inputs, outputs, tangents):
                inner._in_jvp = True
                res = cls.jvp(inner, *tangents)
                res = res if isinstance(res, tuple) else (res,)
                tensors = [o for o in outputs if isinstance(o, Tensor)]
                return tuple(zeros_like(o) if t is None else t for o, t in zip(tensors, res))

            inputs, outputs, out_dims, one = replay(ctx, body)
            res = vmap(one, (in_dims, out_dims, in_dims), 0, randomness)(inputs, outputs, tangents)
            return res[0] if ctx.single else res

    Vmapped.__name__ = Vmapped.__qualname__ = f"Vmapped{cls.__name__}"
    return Vmapped


def _backward_fn(cls):
    """The user's backward: ``vjp`` where that is overridden."""
    return cls.vjp if cls.vjp is not Function.vjp else cls.backward


def _root(t):
    """The tensor ``t`` is a view of, or ``t``."""
    return t if t._base is None else t._base


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
