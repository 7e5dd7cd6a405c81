"""``vmap``: a function of one example mapped over a batch, each primitive bound once on
the whole batch through its batching rule (``batching.py``), never a loop over examples.

Note [batched payloads]: inside ``vmap`` a batched Tensor is an ordinary Tensor whose
payload is a ``Batched``: the physical Tensor ``value`` with a batch dim at ``bdim``, for
the vmap ``level`` it belongs to. Its ``shape`` is the logical (per-example) shape, so
everything above the payload (public ops, the autograd engine, Nodes, forward AD) runs
unchanged on it, as it does on symbolic payloads under capture. While a level is open, a
layer around ``dispatch.apply`` sends every primitive with a batched operand to its
batching rule on the physical values and wraps the result again; the autograd Node is
recorded on the logical tensors (``dispatch.finish``). So:

* nested vmap: a level's physical values may be batched at an outer level; a primitive is
  handled for the innermost level among its operands, and its rule's primitives for the
  levels outside it;
* vmap of grad: the logical graph is walked by the engine; VJP rules bind primitives on
  batched cotangents, which batch again (a per-example gradient is one batched matmul);
* grad of vmap: the physical primitives record the physical graph of whatever required
  grad outside the vmap;
* under capture the physical values are symbolic: the batched step traces into the graph;
* eager Fused kernels (``linear``, ``cross_entropy`` ...) reach the layer too: one with a
  rule (``batching.FUSED_RULES``) binds itself on the batch, any other its decomposition;
* an in-place write into a batched tensor replaces its payload (``_write``); one into an
  input, or a view of it, is copied into the caller's tensor when ``vmap`` returns, where
  torch's lands.
* a batched tensor's ``stride()`` is its physical value's without the batch dim, as
  torch's; a random draw that fills one (``uniform_``) or is made like one (``rand_like``)
  fills its physical value in memory order (``_layout``), as torch's do.

A tensor of no batch is *lifted* into a level (``lift``: ``bdim`` None) where a transform
inside it makes a new leaf of it (``staged.func.grad``): its logical graph then stays
apart from the physical one, as functorch's levels keep them.
"""

from __future__ import annotations

import threading

import numpy as np

from .._locks import fork_safe
from .. import autodiff as ad
from ..eager import dispatch
from ..eager.ops import inplace
from ..eager.ops.shape import cat
from ..eager.random import generator
from ..eager.tensor import Tensor
from . import forward_ad
from .batching import FUSED_RULES, RULES, UNSUPPORTED, move, to_batch


# Note [levels per thread]: vmap's levels are the thread's own, as functorch's level stack
# is thread-local: a vmap on one thread neither batches, nor closes a level of, nor
# refuses the random draws of another (with one list for the process, a thread leaving
# vmap popped the level of another still inside, and a draw on any thread raised
# "randomness error mode"). The dispatch layer and the draw and write hooks are shared
# by the process, installed while some thread has a level open; for a thread with none
# they pass every call through.
class _Levels(threading.local):
    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []  # (batch size, randomness); level k at k - 1


_local = _Levels()
_open_threads = [0]  # threads with a level open (the hooks are installed while any)
_install_lock = fork_safe()

RANDOMNESS = ("error", "different", "same")


class Batched:
    """The payload of a batched Tensor (Note [batched payloads])."""

    __slots__ = ("value", "bdim", "level", "shape", "dtype")

    def __init__(self, value: Tensor, bdim, level: int):
        self.value, self.bdim, self.level = value, bdim, level
        shape = tuple(value._payload.shape)
        self.shape = shape if bdim is None else shape[:bdim] + shape[bdim + 1 :]
        self.dtype = value._payload.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __array__(self, *args, **kwargs):
        raise RuntimeError(
            "vmap: It looks like you're calling .item() on a Tensor. We don't "
            "support vmap over calling .item() on a Tensor, please try to "
            "rewrite what you're doing with other operations (data of a batched "
            "tensor: .item(), .numpy(), bool(), printing, data-dependent ops)."
        )

    def __repr__(self) -> str:
        return f"Batched(level={self.level}, bdim={self.bdim}, value={self.value!r})"


def _draw(what: str, shape, like=None):
    """Random numbers drawn inside the open levels (an MT draw of ``shape``, or, for
    ``shape`` None, one that cannot be batched): ``"error"`` raises; each ``"different"``
    level puts its batch size in front of ``shape`` and the draw is batched along it
    (torch's draws of the batched shape), in the layout of ``like``'s physical value
    where the draw fills ``like`` or is made like it (``_layout``); ``"same"`` levels
    share one draw."""
    levels = _local.stack
    different = [k for k, (_, randomness) in enumerate(levels, 1) if randomness != "same"]
    if any(levels[k - 1][1] == "error" for k in different):
        raise RuntimeError(
            "vmap: called random operation while in randomness error mode. "
            "Please either use the 'same' or 'different' randomness flags "
            "on vmap or perform the randomness operation out of vmap"
        )
    if not different:
        return shape, None
    if shape is None:
        raise NotImplementedError(
            f"vmap: {what} is not supported with randomness='different' (it makes one "
            "draw for the whole batch): draw it outside vmap, or use randomness='same'"
        )

    def wrap(t: Tensor) -> Tensor:
        for level in different:  # outermost first: its batch dim leads
            t = Tensor._wrap(Batched(t, 0, level), False)
        return t

    layout = None if like is None else _layout(like, different)
    return (tuple(levels[k - 1][0] for k in different) + shape if layout is None else layout), wrap


def _layout(like: Tensor, different: list[int]):
    """The layout torch's random ops fill for ``like`` batched at (at least) the
    ``different`` levels, else None: its physical value with those batch dims moved in
    front (a permuted view, so filled in the physical value's memory order, and through
    the serial path where that is not row-major) and its first entry along those of
    ``"same"`` levels, as an int8 array."""
    dims = list(range(like.ndim))  # the physical value's dims: like's, and -level
    p, batched = like._payload, []
    while type(p) is Batched:
        if p.bdim is not None:
            dims.insert(p.bdim, -p.level)
            batched.append(p.level)
        p = p.value._payload
    if not set(different) <= set(batched):
        return None
    a = np.empty_like(p, np.int8) if type(p) is np.ndarray else np.empty(p.shape, np.int8)
    same = [k for k, d in enumerate(dims) if d < 0 and -d not in different]
    a = a[tuple(0 if k in same else slice(None) for k in range(a.ndim))]  # one draw for them
    dims = [d for k, d in enumerate(dims) if k not in same]
    return a.transpose(sorted(range(a.ndim), key=lambda k: (dims[k] >= 0, abs(dims[k]))))


def _layer(apply):
    def apply_batched(prim, inputs, params):
        level = 0
        for t in inputs:
            p = t._payload
            if type(p) is Batched and p.level > level:
                level = p.level
        if not level:
            if prim is ad.uniform:  # the counter-based stream: one draw for the batch
                _draw(prim.name, None)
            return apply(prim, inputs, params)
        args, bdims, batched = [], [], False
        for t in inputs:
            p = t._payload
            if type(p) is Batched and p.level == level:
                args.append(p.value)
                bdims.append(p.bdim)
                batched = batched or p.bdim is not None
            else:
                args.append(t)
                bdims.append(None)
        if not batched:
            out, bdim = prim(*args, **params), None
        else:
            rule = RULES.get(prim) or _missing_rule(prim)
            res = rule(_local.stack[level - 1][0], args, bdims, **params)
            if res is NotImplemented:  # a Fused kernel's rule declined: its composite
                return prim.decomposition(*inputs, **params)
            out, bdim = res
        return dispatch.finish(prim, inputs, params, Batched(out, bdim, level))

    return apply_batched


def _decline(size, args, bdims, **params):
    return NotImplemented


def _missing_rule(prim):
    """The rule of a primitive not in ``RULES``: a Fused kernel's (Note [fused kernels] in
    ``eager/dispatch.py``), or one that declines and so decomposes it; none for another."""
    if type(prim) is ad.Fused:
        return FUSED_RULES.get(prim.name, _decline)
    why = UNSUPPORTED.get(prim, "")
    raise NotImplementedError(
        f"vmap: there is no batching rule for primitive {prim.name!r}{': ' + why if why else ''}"
    )


def _write(t: Tensor, result: Tensor):
    """An in-place write inside vmap (``inplace.on_write``): a value batched at a level
    where ``t`` is not raises torch's error (``t`` would become batched, and stay so after
    vmap); into a batched ``t`` a value not batched at its level is written as one shared
    by the batch. Returns the value to write and whether ``t`` is batched (its payload is
    replaced)."""
    tp, rp = t._payload, result._payload
    tl = tp.level if type(tp) is Batched else 0
    rl = rp.level if type(rp) is Batched else 0
    if rl > tl:
        raise RuntimeError(
            "vmap: inplace arithmetic(self, *extra_args) is not possible because there "
            "exists a Tensor `other` in extra_args that has more elements than `self`. This "
            "happened due to `other` being vmapped over but `self` not being vmapped over in "
            "a vmap. Please try to use out-of-place operators instead of inplace arithmetic."
        )
    if tl and rl < tl:
        shared = Tensor._wrap(Batched(result, None, tl), False)
        shared.grad_fn, shared._output_nr = result.grad_fn, result._output_nr
        shared._requires_grad = result._requires_grad
        result = shared
    return result, bool(tl)


def _open(size: int, randomness: str) -> int:
    levels = _local.stack
    levels.append((size, randomness))
    if len(levels) == 1:  # Note [levels per thread]
        with _install_lock:
            _open_threads[0] += 1
            if _open_threads[0] == 1:
                dispatch.set_layer("batching", _layer)
                generator.on_draw.append(_draw)
                inplace.on_write.append(_write)
    return len(levels)


def _close() -> None:
    levels = _local.stack
    levels.pop()
    if not levels:
        with _install_lock:
            _open_threads[0] -= 1
            if not _open_threads[0]:
                dispatch.set_layer("batching", None)
                generator.on_draw.remove(_draw)
                inplace.on_write.remove(_write)


def lift(t: Tensor) -> Tensor:
    """``t`` as a tensor of the innermost open level (unchanged outside vmap, or if it is
    batched there), for a transform that makes a new leaf of it (Note [batched payloads])."""
    p, levels = t._payload, _local.stack
    if not levels or type(p) is Batched and p.level == len(levels):
        return t
    lifted = Tensor._wrap(Batched(t, None, len(levels)), False)
    for level, tangent in forward_ad.tangents(t):  # forward AD then runs at the level too
        forward_ad.set_tangent(lifted, lift(tangent), level)
    return lifted


def unlift(t):
    """Undo ``lift`` for a transform's result that is not batched and has no graph at the
    level (it is its physical value; forward AD's tangents, for one, live there)."""
    p = getattr(t, "_payload", None)
    if (
        type(p) is Batched
        and p.bdim is None
        and p.level == len(_local.stack)
        and not t._requires_grad
    ):
        return p.value
    return t


def requires_grad(t: Tensor) -> bool:
    """Whether ``t``, or a physical value it is batched over, requires grad (a graph that a
    transform outside the vmap differentiates)."""
    while True:
        if t._requires_grad:
            return True
        p = t._payload
        if type(p) is not Batched:
            return False
        t = p.value


# --- in_dims, out_dims and the pytrees they follow --------------------------------------------
def _name(func) -> str:
    name = getattr(func, "__name__", None)
    return repr(func) if name is None else name


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        for x in tree:
            yield from _leaves(x)
    elif isinstance(tree, dict):
        for x in tree.values():
            yield from _leaves(x)
    else:
        yield tree


def _zip_dims(dims, tree, mismatch):
    """``(leaf, dim)`` pairs: ``dims`` is an int or None for a whole subtree, else a tuple,
    list or dict of the structure of ``tree`` (torch's broadcast of in_dims/out_dims)."""
    if dims is None or isinstance(dims, int):
        return [(x, dims) for x in _leaves(tree)]
    if (
        isinstance(dims, (tuple, list))
        and isinstance(tree, (tuple, list))
        and len(dims) == len(tree)
    ):
        return [pair for d, x in zip(dims, tree) for pair in _zip_dims(d, x, mismatch)]
    if isinstance(dims, dict) and isinstance(tree, dict) and dims.keys() == tree.keys():
        return [pair for k in tree for pair in _zip_dims(dims[k], tree[k], mismatch)]
    raise mismatch()


def rebuild(tree, leaves):
    """``tree`` with its leaves replaced by the next ones of the iterator ``leaves``; a
    namedtuple (``torch.return_types``: ``max``, ``sort`` ...) keeps its type."""
    if isinstance(tree, (tuple, list)):
        items = [rebuild(x, leaves) for x in tree]
        return type(tree)(*items) if hasattr(tree, "_fields") else type(tree)(items)
    if isinstance(tree, dict):
        return {k: rebuild(x, leaves) for k, x in tree.items()}
    return next(leaves)


def _batch_inputs(func, in_dims, args):
    """The batch size and ``[(arg, in_dim normalised)]``, checked as torch checks them."""
    where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"{where}: expected `in_dims` to be int or a (potentially nested) "
            f"tuple matching the structure of inputs, got: {type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"vmap({_name(func)})(<inputs>): got no inputs. Maybe you forgot to "
            "add inputs, or you are trying to vmap over a function with no "
            "inputs. The latter is unsupported."
        )
    pairs = _zip_dims(
        in_dims,
        args,
        lambda: ValueError(f"{where}: in_dims is not compatible with the structure of `inputs`."),
    )
    out, sizes = [], []
    for x, d in pairs:
        if d is not None and not isinstance(d, int):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but in_dim must be either "
                "an integer dimension or None."
            )
        if d is not None and not isinstance(x, Tensor):
            raise ValueError(
                f"{where}: Got in_dim={d} for an input but the input is of type "
                f"{type(x)}. We cannot vmap over non-Tensor arguments, please use "
                "None as the respective in_dim"
            )
        if d is not None:
            n = x.ndim
            if not -n <= d < n:
                raise ValueError(
                    f"{where}: Got in_dim={d} for some input, but that input is a "
                    f"Tensor of dimensionality {n} so expected in_dim to satisfy "
                    f"-{n} <= in_dim < {n}."
                )
            d %= n
            sizes.append(x.shape[d])
        out.append((x, d))
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            f"vmap: Expected all tensors to have the same size in the mapped "
            f"dimension, got sizes {sizes} for the mapped dimension"
        )
    return sizes[0], out


def _unbatch(func, out, d, level, size):
    name = _name(func)
    p = getattr(out, "_payload", None)
    batched = type(p) is Batched and p.level == level and p.bdim is not None
    if d is None:
        if batched:
            raise ValueError(
                f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None"
            )
        return p.value if type(p) is Batched and p.level == level else out
    if not isinstance(out, Tensor):
        raise ValueError(
            f"vmap({name}, ...): `{name}` must only return Tensors, got type "
            f"{type(out)}. Did you mean to set out_dims= to None for output?"
        )
    n = out.ndim + 1
    if not -n <= d < n:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {d})"
        )
    if batched:
        return move(p.value, p.bdim, d % n)
    # lifted into this level (bdim None): its value; batched at an outer level only (a
    # closure's tensor, a draw of an outer "different" level): the tensor itself
    here = type(p) is Batched and p.level == level
    return to_batch(p.value if here else out, None, size, d % n)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dim of its inputs: torch.func.vmap (JAX's vmap).

    Each primitive ``func`` binds runs once on the whole batch, through its batching rule;
    ``in_dims`` says which dim of each input is mapped (None: not mapped), as an int for
    all or a (nested) tuple, list or dict matching the arguments; ``out_dims`` where the
    mapped dim goes in each output (None: the output does not depend on the batch).
    ``randomness``: ``"error"`` (random draws inside raise), ``"different"`` (each draw is
    made for the whole batch, the batch dim in front, as torch draws it) or ``"same"`` (one
    draw shared by the batch); ``chunk_size`` maps that many entries at a time (peak memory
    of one chunk; 1 is a loop), the outputs concatenated along ``out_dims``.

    Example:
        >>> vmap(staged.dot)(staged.ones(8, 3), staged.ones(8, 3)).shape   # 8 dot products
        staged.Size([8])
    """
    if randomness not in RANDOMNESS:
        raise RuntimeError(
            f"Only allowed values for randomness are 'error', 'different', or "
            f"'same'. Got {randomness}"
        )

    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    def wrapped(*args, **kwargs):
        size, pairs = _batch_inputs(func, in_dims, args)
        if chunk_size is not None and size > chunk_size:
            return _chunked(mapped, args, kwargs, pairs, size)
        return mapped(size, pairs, args, kwargs)

    def _chunked(call, args, kwargs, pairs, size):
        """``call`` on ``chunk_size`` entries at a time, outputs joined along out_dims."""
        outs = []
        for start in range(0, size, chunk_size):
            n = min(chunk_size, size - start)
            part = [(x if d is None else x.narrow(d, start, n), d) for x, d in pairs]
            outs.append(call(n, part, rebuild(args, iter(x for x, _ in part)), kwargs))
        dims = _single_out_dims(outs[0])
        flat = [[x for x, _ in _zip_dims(dims, o, _bad_out_dims)] for o in outs]
        joined = [
            f0 if d is None else cat([f[k] for f in flat], d)
            for k, (f0, d) in enumerate(_zip_dims(dims, outs[0], _bad_out_dims))
        ]
        return rebuild(outs[0], iter(joined))

    def _single_out_dims(out):
        if isinstance(out, Tensor) and isinstance(out_dims, tuple) and len(out_dims) == 1:
            return out_dims[0]  # torch's edge case: a 1-tuple for a single output
        return out_dims

    def _bad_out_dims():
        return ValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
            "compatible with the structure of `outputs`."
        )

    def mapped(size, pairs, args, kwargs):
        level = _open(size, randomness)
        try:
            leaves = [
                x if d is None else Tensor._wrap(Batched(x, d, level), False) for x, d in pairs
            ]
            payloads = [None if d is None else t._payload for t, (_, d) in zip(leaves, pairs)]
            out = func(*rebuild(args, iter(leaves)), **kwargs)
            outs = _zip_dims(_single_out_dims(out), out, _bad_out_dims)
            out = rebuild(out, iter([_unbatch(func, o, d, level, size) for o, d in outs]))
            # an input written in place (its payload replaced: Note [batched payloads])
            written = [
                (x, d, t._payload)
                for (x, d), t, p in zip(pairs, leaves, payloads)
                if p is not None and t._payload is not p
            ]
        finally:
            _close()
        for x, d, p in written:  # ... is written back into the caller's tensor, as torch's
            x.copy_(to_batch(p.value, p.bdim, size, d))
        return out

    return wrapped
