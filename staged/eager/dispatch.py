"""apply(): run one primitive on Tensors and record its Node. The eager hot path.

Evaluation is by payload: NumPy arrays run the primitive's impl. A capture installs an
*interceptor* (``interceptor.set_interceptor``) that evaluates instead; eager code does not
know what it does (DESIGN.md: one engine, two payloads). The Node recorded is autograd's,
installed with ``set_recorder``.
"""

from __future__ import annotations

import threading
from typing import Any
from functools import partial

import numpy as np

from .._locks import fork_safe
from ..autodiff.primitive import Fused, _bind, _constant, _constant_like, _fused_here, _plain
from . import interceptor as _icpt
from . import meta as _meta
from .grad_mode import _state
from .tensor import Tensor
from .views import record as record_view

_ndarray = np.ndarray
_wrap = Tensor._wrap
_DIFFERENTIABLE = "fcV"  # NumPy kinds that carry gradients (V: bfloat16)
_record = None  # autograd.node.record, installed by staged.autograd (set_recorder)


# Note [NumPy warnings]: log(0), 0/0, exp(1000) are inf/NaN results, not events: PyTorch
# is silent, so impls run with NumPy's floating-point error state set to "ignore". The state
# is a context variable (NumPy 2; a thread-local object in 1.x): setting and resetting it
# costs two C calls, where ``np.errstate`` builds a new object per call (~10 us). The
# caller's own NumPy code keeps its error state. View primitives (reshape, slice, expand,
# permute ...) at most copy memory, which sets no floating-point flag: they run as they are.
try:
    # NumPy 2 private API, absent from its stubs
    from numpy._core._ufunc_config import (  # type: ignore[attr-defined]
        _extobj_contextvar as _errstate,
    )

    with np.errstate(all="ignore"):
        _QUIET = _errstate.get()
    _quiet, _restore = partial(_errstate.set, _QUIET), _errstate.reset
except ImportError:  # NumPy 1.x
    from numpy.core.umath import geterrobj, seterrobj

    with np.errstate(all="ignore"):
        _QUIET = geterrobj()

    def _quiet():  # type: ignore[misc]  # NumPy 1.x: a function, not a partial
        prev = geterrobj()
        seterrobj(_QUIET)
        return prev

    _restore = seterrobj


def apply(prim, inputs, params, out=None):
    """Bind ``prim`` to Tensor ``inputs``: evaluate, wrap, and record the backward Node.
    Given ``out``, a payload evaluated elsewhere (vmap's batched ones), only wrap it and
    record its view and Node (``finish``)."""
    if out is None:
        if prim.np_domain is not None and inputs[0]._payload.dtype not in prim.np_domain:
            raise prim.domain_error(inputs[0]._payload.dtype)
        icpt = _icpt.active
        if icpt is not None and icpt[0] == threading.get_ident():
            out = icpt[1](prim, inputs, params)
        else:
            payloads = []
            for t in inputs:  # (a loop: cheaper than a comprehension for one or two)
                p = t._payload
                if type(p) is not _ndarray:
                    payloads = [t._payload for t in inputs]
                    if _meta.among(payloads):  # shapes and dtypes only (Note [meta tensors])
                        return _on_meta(prim, inputs, params, payloads)
                    payloads = [t._host() for t in inputs]
                    break
                payloads.append(p)
            if prim.view:  # no arithmetic, no floating-point error (Note [NumPy warnings])
                out = prim.impl(*payloads, **params)
            else:
                token = _quiet()
                try:
                    out = prim.impl(*payloads, **params)
                finally:
                    _restore(token)
            if type(out) is not _ndarray:
                out = np.asarray(out)
    requires = False
    grad_mode = _state.grad_enabled
    if grad_mode and prim.vjp is not None:
        for t in inputs:
            if t._requires_grad:
                requires = out.dtype.kind in _DIFFERENTIABLE  # int/bool results: none (torch)
                break
    result = _wrap(out, requires)
    if prim.view:
        record_view(result, inputs[0], prim, params, grad_mode)
    elif not grad_mode and _state.inference:
        result._vc = None  # an inference tensor (Note [version counters])
    if requires:
        _record(prim, inputs, result, params)  # sets result.grad_fn
    return result


finish = apply  # finish(prim, inputs, params, out): for payloads evaluated elsewhere


def _on_meta(prim, inputs, params, payloads):
    """``apply`` with meta operands: the result's metadata, or a Fused kernel's
    decomposition (it has no shape rule)."""
    if isinstance(prim, Fused):
        return prim.decomposition(*inputs, **params)
    return apply(prim, inputs, params, _meta.evaluate(prim, payloads, params))


_bind[0] = apply
_constant[0] = Tensor._wrap  # the strict vocabulary's constants (autodiff/lax.py)
_constant_like[0] = lambda array, like: Tensor._wrap(_meta.like(array, like))


# Note [fused kernels]: a Fused primitive (autodiff/primitive.py) is one NumPy kernel and
# one Node for a composite (linear: permute, matmul, expand and add forward, eight
# primitives backward). It runs only here, in plain eager mode: under a capture or forward
# AD it calls its decomposition, so graphs and lowerings never see it, and tangents are
# the primitives'. Under a capture its result that needs a gradient still gets eager's
# one Node (``_decomposed_node``): the graph computes the forward by the decomposition
# and the backward by the kernel's own VJP rules, so a compiled step's gradients are
# eager's formulas (torch's: Note [half softmax] in autodiff/fused.py), not the
# derivatives of the decomposition's parts. vmap's layer is given it like a primitive:
# with a batching rule (autograd/batching.py) it binds the kernel once on the batch,
# otherwise the kernel's decomposition. A Fused kernel without VJP rules (a backward
# kernel: layer norm's input gradient) also decomposes where its result would need a
# grad_fn, which makes double backward differentiate the decomposition. The flop counter
# (utils/flop_counter.py) and a profile ``with_flops`` decompose them too: they count the
# matmul primitives the kernels run.
_DECOMPOSING_LAYERS = frozenset({"forward_ad", "flop_counter", "profiler_flops"})
_decomposing = [False]  # a layer in _DECOMPOSING_LAYERS is on


def _fused(prim, args):
    """True where ``prim`` runs its kernel, False where it decomposes, or
    ``_decomposed_node`` (Note [fused kernels])."""
    if _decomposing[0]:
        return False
    icpt = _icpt.active
    if icpt is not None and icpt[0] == threading.get_ident():
        if prim.vjp is None or prim.view or not _state.grad_enabled:
            return False
        return _decomposed_node if any(t._requires_grad for t in args) else False
    if prim.vjp is None and _state.grad_enabled:
        for t in args:
            if t._requires_grad:
                return False
    return True


def _decomposed_node(prim, args, params):
    """``prim``'s decomposition, its result given the Node eager gives ``prim``'s in place
    of the one its last part made (Note [fused kernels]). Its parts are recorded as they
    were, for a call that runs the trace's ops eagerly (Note [first eager call] in
    runtime/boundary.py), whose graph is theirs."""
    out = prim.decomposition(*args, **params)
    if isinstance(out, Tensor) and out._requires_grad and out._base is None:
        out._output_nr = 0
        _record(prim, args, out, params)
    return out


_fused_here[0] = _fused


# Note [plain rules]: a backward without create_graph runs its VJP rules with grad off, so
# a primitive they bind records nothing and ``apply`` only evaluates and wraps. The
# commonest rules (mul's, relu's, matmul's) call their NumPy function through ``plain``
# instead, one frame rather than four (matmul's: and no transposed view recorded), where
# that is all a bind would do: grad and inference mode off, no layer (forward AD, vmap,
# the profiler), no capture on this thread, NumPy operands. Anywhere else it returns None
# and the rule binds its primitives as written (tests/autograd/test_plain_rules.py).
# Sum's rule (every loss's) broadcasts the gradient back with one wrap, where binding
# reshape and expand recorded two views: 9% of bench/op_overhead.py's step (callgrind,
# 386k -> 349k instructions). The gradient it passes on is then not a view of the one it
# got, where torch's is an expanded view: ``_is_view()`` of what a hook or autograd.grad
# sees differs; its values, memory and the error for writing it in place are torch's.
def plain(fn, args, params):
    if _state.grad_enabled or _state.inference or _bind[0] is not apply:
        return None
    icpt = _icpt.active
    if icpt is not None and icpt[0] == threading.get_ident():
        return None
    payloads = []
    for t in args:
        p = t._payload
        if type(p) is not _ndarray:
            return None
        payloads.append(p)
    token = _quiet()
    try:
        out = fn(*payloads, **params)
    finally:
        _restore(token)
    return _wrap(out if type(out) is _ndarray else np.asarray(out), False)


_plain[0] = plain


def set_recorder(record) -> None:
    """Install the function ``apply`` records a Node with (autograd's; eager does not
    import it)."""
    global _record
    _record = record


_layers: dict[str, Any] = {}  # name -> wrap(apply) -> apply; see set_layer
# one change at a time: a thread composing the layers it saw and binding them after
# another thread bound more would drop that one's layer
_layers_lock = fork_safe()


def set_layer(name: str, wrap) -> None:
    """Install (or with None remove) a layer around ``apply`` for every primitive bound:
    forward-mode AD and the profiler. Off, they cost nothing: ``apply`` stays the bound
    function. Layers compose in name order ("forward_ad" inside "profiler")."""
    with _layers_lock:
        if wrap is None:
            _layers.pop(name, None)
        else:
            _layers[name] = wrap
        _decomposing[0] = not _DECOMPOSING_LAYERS.isdisjoint(_layers)
        fn = apply
        for key in sorted(_layers):
            fn = _layers[key](fn)
        _bind[0] = fn
