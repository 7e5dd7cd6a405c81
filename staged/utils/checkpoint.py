"""``staged.utils.checkpoint``: activation checkpointing (``torch.utils.checkpoint``).

Note [checkpoint]: non-reentrant checkpointing (``use_reentrant=False``) is
PyTorch's design on saved-tensor hooks. The forward runs under a
``saved_tensors_hooks`` pair whose pack hook keeps a small ``_Holder`` in place of
every tensor a Node saves; the inputs are saved (as ``SavedTensor``s, so their
versions are checked). The first unpack in a backward pass (a graph task) reruns the
function on the inputs, under grad mode on and the RNG states of the forward, under a
second hook pair that drops each tensor saved there, detached, into its holder, and
stops once the last holder is filled (``early_stop``). Each holder is emptied when
unpacked, also under ``retain_graph=True``; a second backward recomputes again.
Nested checkpoints work because an inner checkpoint's inputs are tensors saved under
the outer one's hooks: unpacking them recomputes the outer region first.

Under ``staged.compile`` the hooks run while tracing (they are Python), so the
recompute is recorded in the backward part of the graph, with the counter-based RNG
state replayed. Its tensor inputs pass through ``barrier`` (``util.optimization_barrier``,
the identity) first: without it the recomputed ops have the forward's operands, IREE's
common-subexpression elimination merged them back into the forward, and the compiled
step kept every activation until backward. The barrier makes them new values, computed
where the backward needs them (README, "Activation checkpointing").

``use_reentrant=True`` is PyTorch's reentrant variant: a custom Function whose forward
runs the function under ``no_grad`` and whose backward reruns it under grad mode and
calls ``backward`` inside the backward pass; it works with ``.backward()`` only, needs
an input or output that requires grad, and takes no keyword arguments.
"""

from __future__ import annotations

import contextlib
import itertools
import warnings
import weakref

from .. import autodiff as ad
from .. import dtypes as dt
from ..autograd.engine import backward, current_graph_task
from ..autograd.function import Function
from ..autograd.graph import saved_tensors_hooks
from ..autograd.saved import SavedTensor
from ..eager.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..eager.random import get_rng_state, set_rng_state
from ..eager.random.counter import rng_state as counter_state
from ..eager.tensor import Tensor

__all__ = [
    "CheckpointError",
    "checkpoint",
    "checkpoint_sequential",
    "get_device_states",
    "noop_context_fn",
    "set_device_states",
]

_UNPASSED_MESSAGE = (
    "{}: the use_reentrant parameter should be passed explicitly. {} use_reentrant=False "
    "is recommended, but if you need to preserve the current default behavior, you can "
    "pass use_reentrant=True. Refer to docs for more details on the differences between "
    "the two variants."
)
_METADATA = {
    "default": lambda x: {"shape": tuple(x.shape), "dtype": x.dtype},
    "none": lambda x: None,
}


class CheckpointError(RuntimeError):
    pass


def noop_context_fn():
    return contextlib.nullcontext(), contextlib.nullcontext()


def get_device_states(*args) -> tuple[list, list]:
    """torch's ids and RNG states of the accelerators ``args``' tensors live on: none, as
    staged's tensors are on the CPU (whose RNG state callers keep themselves) or meta."""
    return [], []


def set_device_states(devices, states, *, device_type=None) -> None:
    """Restore the accelerator RNG states ``get_device_states`` gave: there are none."""
    if len(devices):
        raise RuntimeError(
            f"set_device_states: staged has no accelerator devices, got device ids {list(devices)}"
        )


def checkpoint(
    function,
    *args,
    use_reentrant=None,
    context_fn=noop_context_fn,
    determinism_check="default",
    debug=False,
    early_stop=True,
    **kwargs,
):
    """``function(*args, **kwargs)`` without keeping its intermediate tensors for backward:
    backward recomputes them (Note [checkpoint]). ``preserve_rng_state=True`` (a keyword)
    replays the forward's random numbers in the recompute, so dropout masks match.
    ``use_reentrant`` should be passed: left out, it warns and means True, as in torch
    2.13. ``debug=True`` is accepted (torch adds operator traces to its errors; staged
    does not)."""
    if use_reentrant is None:
        warnings.warn(
            _UNPASSED_MESSAGE.format(
                f"{dt.PACKAGE}.utils.checkpoint",  # torch's name standing in for it
                "Starting in PyTorch 2.9, calling checkpoint without "
                "use_reentrant will raise an exception.",
            ),
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError(
                "Passing `context_fn` or `debug` is only supported when use_reentrant=False."
            )
        return _Reentrant.apply(function, preserve, *args)
    if debug and context_fn is not noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check not in _METADATA:
        raise ValueError(
            f"determinism_check should be one of {list(_METADATA)}, but got {determinism_check}"
        )
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():
        return function(*args, **kwargs)
    rng = _rng_states() if preserve else None

    def recompute(*inputs):
        with _replayed_rng(rng), recompute_context:
            function(*inputs, **{k: _apart(v) for k, v in kwargs.items()})

    frame = _Frame(recompute, _METADATA[determinism_check], early_stop, args)
    with _checkpoint_hooks(frame), forward_context:
        out = function(*args, **kwargs)
    frame.forward_completed = True
    return out


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a Sequential or a list) in ``segments`` chunks, checkpointing
    every chunk but the last."""
    if use_reentrant is None:
        warnings.warn(
            _UNPASSED_MESSAGE.format(
                f"{dt.PACKAGE}.utils.checkpoint.checkpoint_sequential",
                "In version 2.9 we will raise an exception if use_reentrant is not passed.",
            ),
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    functions = list(functions.children()) if hasattr(functions, "children") else functions

    def run(start, end):
        def forward(x):
            for f in functions[start : end + 1]:
                x = f(x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(
            run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve
        )
    return run(end + 1, len(functions) - 1)(input)


def _apart(x):
    """A tensor input of the recompute behind an optimization barrier (the identity), so
    that a compiler cannot merge the recompute with the forward (Note [checkpoint])."""
    return ad.barrier(x) if isinstance(x, Tensor) else x


# --- RNG ---------------------------------------------------------------------------------
def _rng_states():
    """The default generator's state and the counter-based generator's (the one dropout
    draws from under capture)."""
    with no_grad():
        return get_rng_state(), counter_state().clone()


@contextlib.contextmanager
def _replayed_rng(states):
    """Run the block from the RNG ``states`` (None: as they are); restore the current ones
    after it (torch's ``fork_rng`` + ``set_rng_state``)."""
    if states is None:
        yield
        return
    now = _rng_states()
    _set_rng_states(states)
    try:
        yield
    finally:
        _set_rng_states(now)


def _set_rng_states(states):
    set_rng_state(states[0])
    with no_grad():
        counter_state().copy_(states[1])


# --- non-reentrant -----------------------------------------------------------------------
class _Holder:
    """What a checkpointed forward saves in place of a tensor: per backward pass, the
    recomputed tensor until it is unpacked, then None."""

    __slots__ = ("values", "__weakref__")

    def __init__(self):
        self.values = {}


class _StopRecomputation(Exception):
    pass


_outside_ids = itertools.count(-1, -1)  # unpacks outside backward: each its own pass


class _Frame:
    """One checkpointed call: its inputs, its holders (weakly, in saving order), the
    recompute counts per backward pass (graph task id)."""

    def __init__(self, recompute, metadata, early_stop, args):
        self.recompute, self.metadata, self.early_stop = recompute, metadata, early_stop
        # saved as inputs (the frame is no tensor's grad_fn), under any outer checkpoint
        self.inputs = [SavedTensor(a, self) if isinstance(a, Tensor) else a for a in args]
        self.holders, self.metas = [], []
        self.counts, self.recomputed = {}, set()
        self.forward_completed = self.ignore_mismatch = False

    def recompute_for(self, gid) -> None:
        self.counts[gid] = 0
        try:
            with _recompute_hooks(self, gid), enable_grad():
                self.recompute(
                    *[_apart(a.unpack()) if isinstance(a, SavedTensor) else a for a in self.inputs]
                )
        except _StopRecomputation:
            pass
        self.recomputed.add(gid)
        self.check(gid)

    def check(self, gid) -> None:
        if self.ignore_mismatch:
            return
        if len(self.holders) != self.counts[gid]:
            raise CheckpointError(
                f"{dt.PACKAGE}.utils.checkpoint: A different number of tensors was saved during the "
                "original forward and recomputation.\nNumber of tensors saved during forward: "
                f"{len(self.holders)}\nNumber of tensors saved during recomputation: "
                f"{self.counts[gid]}."
            )
        diff = ""
        for i, ref in enumerate(self.holders):
            holder = ref()
            if holder is not None and self.metas[i] != self.metadata(holder.values[gid]):
                diff += (
                    f"tensor at position {i}:\nsaved metadata: {self.metas[i]}\n"
                    f"recomputed metadata: {self.metadata(holder.values[gid])}\n"
                )
        if diff:
            raise CheckpointError(
                f"{dt.PACKAGE}.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass.\n{diff}."
            )


def _checkpoint_hooks(frame):
    def pack(x):
        holder = _Holder()
        frame.holders.append(weakref.ref(holder))
        frame.metas.append(frame.metadata(x))
        return holder

    def unpack(holder):
        task = current_graph_task()
        gid = task.id if task is not None else next(_outside_ids)
        if gid not in frame.recomputed:
            frame.recompute_for(gid)
        x = holder.values[gid]
        if x is None:
            raise CheckpointError(
                f"{dt.PACKAGE}.utils.checkpoint: Unpack is being triggered for a tensor that was "
                "already unpacked once. If you are calling ctx.saved_tensors in backward, make "
                "sure to do so only once. Otherwise please open an issue with details on your "
                "use case."
            )
        holder.values[gid] = None  # freed as soon as used, even with retain_graph=True
        return x

    return saved_tensors_hooks(pack, unpack)


def _recompute_hooks(frame, gid):
    def pack(x):
        x = x.detach() if x.requires_grad else x
        i = frame.counts[gid]
        frame.counts[gid] = i + 1
        if i >= len(frame.holders):
            if not frame.forward_completed:  # backward inside the checkpointed forward
                frame.ignore_mismatch = True
                return x
            raise CheckpointError(
                f"{dt.PACKAGE}.utils.checkpoint: trying to save more tensors "
                "during recomputation than during the original forward "
                "pass."
            )
        holder = frame.holders[i]()
        if holder is not None:  # else freed by an earlier backward: not needed
            holder.values[gid] = x
        if frame.early_stop and i + 1 == len(frame.holders):
            raise _StopRecomputation
        return x

    return saved_tensors_hooks(pack, lambda x: x)


# --- reentrant ---------------------------------------------------------------------------
class _Reentrant(Function):
    """torch's ``CheckpointFunction``."""

    @staticmethod
    def forward(ctx, function, preserve, *args):
        ctx.function, ctx.rng = function, _rng_states() if preserve else None
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]  # tensors: saved
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_indices])
        with no_grad():
            return function(*args)

    @staticmethod
    def backward(ctx, *grads):
        task = current_graph_task()
        if task is not None and task.needed is not None:
            raise RuntimeError(
                "When use_reentrant=True, staged.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you "
                "can either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument."
            )
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = _apart(t.detach()).requires_grad_(t.requires_grad)
        with _replayed_rng(ctx.rng), enable_grad():
            outputs = ctx.function(*inputs)
        outputs = (outputs,) if isinstance(outputs, Tensor) else outputs
        pairs = [
            (o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad
        ]
        if not pairs:
            raise RuntimeError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        backward(*zip(*pairs))
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)
