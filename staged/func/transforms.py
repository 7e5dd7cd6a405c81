"""torch.func's differentiation transforms: grad, grad_and_value, vjp, jvp, jacrev, jacfwd,
hessian. Each is a function of functions built on the autograd engine (reverse mode) or
forward AD, and composes with ``vmap`` and with itself.

Note [transform leaves]: a transform differentiates with respect to fresh leaves made from
its inputs. An input that already requires grad (it belongs to an enclosing transform)
enters as a view, so that the result stays differentiable for the enclosing one, and the
backward pass then records its graph (``create_graph``); so it does inside any enclosing
transform, whose graph may run through what the inputs were made from, and where the
function's graph reaches a tensor from outside it that requires grad (a closure's weight:
the result is then differentiable with respect to it, as torch.func's is). Inside
``vmap`` an unbatched input is first lifted into the innermost level (``vmap.lift``), so
that its logical graph stays apart from the physical one. Only the thread's own
transforms count: functorch's level stack is thread-local, and a transform running on
another thread must not make this one's results carry a graph (nor, with one counter for
the process, could the threads' increments be lost, leaving every later transform nested).
"""

from __future__ import annotations

import functools
import threading

from ..autograd import forward_ad
from ..autograd.engine import grad as _autograd_grad
from ..autograd.functional import one_hots
from ..autograd.vmap import lift, requires_grad, unlift, vmap
from ..autograd.vmap import rebuild as _rebuild
from ..eager.factories import zeros_like
from ..eager.grad_mode import enable_grad, is_grad_enabled
from ..eager.tensor import Tensor


class _Depth(threading.local):
    n = 0  # reverse-mode transforms running on this thread (Note [transform leaves])


_depth = _Depth()


def _leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _leaves(t)]
    if isinstance(tree, dict):
        return [x for t in tree.values() for x in _leaves(t)]
    return [tree]


def _tensors(tree, what="Thing passed to transform API"):
    xs = _leaves(tree)
    for x in xs:
        if not isinstance(x, Tensor):
            raise ValueError(f"{what} must be Tensor, got {type(x)}")
    return xs


def _check_argnums(argnums, n):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
        if not -n <= a < n:
            raise RuntimeError(f"Got argnum={a}, but only {n} positional inputs")
    if len({a % n for a in nums}) != len(nums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(a % n for a in nums)


def _select(args, argnums):
    nums = _check_argnums(argnums, len(args))
    return tuple(args[a] for a in nums) if isinstance(argnums, tuple) else args[nums[0]]


def _replace(args, argnums, new):
    nums = _check_argnums(argnums, len(args))
    new = new if isinstance(argnums, tuple) else (new,)
    out = list(args)
    for a, v in zip(nums, new):
        out[a] = v
    return tuple(out)


def _restrict(func, args, kwargs, argnums):
    """``(f, primals, as_tuple)``: ``func`` as a function of the ``argnums`` arguments
    alone (the others, and ``kwargs``, fixed at ``args``), those arguments (one or a tuple,
    as ``argnums``), and them as a tuple."""

    def f(*diff):
        return func(
            *_replace(args, argnums, diff if isinstance(argnums, tuple) else diff[0]), **kwargs
        )

    primals = _select(args, argnums)
    return f, primals, primals if isinstance(argnums, tuple) else (primals,)


def _fresh(tree):
    """``(tree of leaves, their flat list, nested)`` (Note [transform leaves])."""
    xs = _tensors(tree)
    nested = _depth.n > 0 or any(requires_grad(x) for x in xs)
    leaves = []
    for x in xs:
        x = lift(x)
        if x.requires_grad:
            leaves.append(x.view_as(x))
            continue
        leaf = x.detach().requires_grad_()
        # forward over reverse keeps the tangents, on the leaf itself: an alias (make_dual)
        # would hide them from the physical value of a batched leaf
        for level, tangent in forward_ad.tangents(x):
            forward_ad.set_tangent(leaf, tangent, level)
        leaves.append(leaf)
    return _rebuild(tree, iter(leaves)), leaves, nested


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(
            f"{api}(f)(*args): output of function f should be a tuple: "
            "(output, aux) if has_aux is True"
        )
    return out


def _captures(outs, leaves) -> bool:
    """Whether the graph of ``outs`` reaches a leaf other than ``leaves``: a tensor from
    outside the function that requires grad, through which the result keeps a graph."""
    ours = {id(x) for x in leaves}
    seen: set[int] = set()
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.variable is not None and id(node.variable) not in ours:
            return True
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return False


def _vjp(func, primals, has_aux, api):
    """Run ``func`` on fresh leaves: (output, leaves, tree of primals, aux, nested)."""
    outer = is_grad_enabled()
    tree, leaves, nested = _fresh(primals)
    _depth.n += 1
    try:
        with enable_grad():
            out, aux = _split_aux(func(*tree), has_aux, api)
    finally:
        _depth.n -= 1
    return out, leaves, aux, nested or outer and _captures(_leaves(out), leaves)


def _grads(outputs, leaves, cotangents, nested, retain):
    """The gradients of ``outputs`` (an output that does not require grad contributes
    none: a function constant in its inputs has zero gradients, as in torch.func)."""
    keep = [k for k, o in enumerate(outputs) if o.requires_grad]
    gs: tuple = (None,) * len(leaves)
    _depth.n += nested
    try:
        with enable_grad():
            if keep:
                gs = _autograd_grad(
                    tuple(outputs[k] for k in keep),
                    leaves,
                    None if cotangents is None else tuple(cotangents[k] for k in keep),
                    retain_graph=retain or None,
                    create_graph=nested,
                    allow_unused=True,
                )
    finally:
        _depth.n -= nested
    return [unlift(zeros_like(x) if g is None else g) for g, x in zip(gs, leaves)]


def _result(t, nested):
    return unlift(t if nested or not isinstance(t, Tensor) else t.detach())


def grad_and_value(func, argnums=0, has_aux=False):
    """``func`` -> a function returning ``(gradient, value)`` of the scalar ``func`` with
    respect to the arguments ``argnums`` (``(gradient, (value, aux))`` with ``has_aux``).

    Example:
        >>> g, v = grad_and_value(lambda x: (x * x).sum())(staged.tensor([1.0, 2.0]))
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        f, primals, tup = _restrict(func, args, kwargs, argnums)
        out, leaves, aux, nested = _vjp(f, tup, has_aux, "grad_and_value")
        if not isinstance(out, Tensor):
            raise RuntimeError(
                f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}"
            )
        if out.ndim != 0:
            raise RuntimeError(
                f"grad_and_value(f)(*args): Expected f(*args) to return a "
                f"scalar Tensor, got tensor with {out.ndim} dims. Maybe you "
                "wanted to use the vjp or jacrev APIs instead?"
            )
        gs = _rebuild(primals, iter(_grads((out,), leaves, None, nested, False)))
        value = _result(out, nested)
        return (gs, (value, aux)) if has_aux else (gs, value)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``func`` -> the gradient of the scalar ``func`` with respect to ``argnums``
    (``(gradient, aux)`` with ``has_aux``): torch.func.grad.

    Example:
        >>> grad(lambda x: x.sin().sum())(staged.zeros(3))   # cos(0) = 1
        tensor([1., 1., 1.])
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gs, value = gv(*args, **kwargs)
        return (gs, value[1]) if has_aux else gs

    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(func(*primals), vjp_fn)`` (and ``aux``): ``vjp_fn(cotangents)`` gives the
    vector-Jacobian products, one per primal (a tuple); it may be called many times.

    Example:
        >>> out, vjp_fn = vjp(staged.sin, staged.zeros(3))
        >>> vjp_fn(staged.ones(3))
        (tensor([1., 1., 1.]),)
    """
    out, leaves, aux, nested = _vjp(func, primals, has_aux, "vjp")
    outs = _tensors(
        out, "vjp(f, *primals): Expected f to be a function that has only Tensor outputs. Output"
    )
    for o in outs:
        if not (o.dtype.is_floating_point or o.dtype.is_complex):
            raise RuntimeError(
                "vjp(f, ...): All outputs of f must be floating-point or complex Tensors, "
                f"got Tensor with dtype {o.dtype}"
            )

    def vjp_fn(cotangents):
        cts = _tensors(cotangents, "vjp_fn: Expected cotangents")
        if len(cts) != len(outs):
            raise RuntimeError(
                f"Expected pytree structure of cotangents to be the same as "
                f"pytree structure of outputs to the function: {len(cts)} "
                f"cotangents for {len(outs)} outputs"
            )
        gs = _grads(tuple(outs), leaves, tuple(cts), nested, True)
        return _rebuild(primals, iter(gs))

    value = _rebuild(out, iter([_result(o, nested) for o in outs]))
    return (value, vjp_fn, aux) if has_aux else (value, vjp_fn)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(func(*primals), J @ tangents)`` (and ``aux``) by forward-mode AD: torch.func.jvp.

    Example:
        >>> jvp(staged.sin, (staged.zeros(3),), (staged.ones(3),))[1]
        tensor([1., 1., 1.])
    """
    for name, t in (("primals", primals), ("tangents", tangents)):
        if not isinstance(t, tuple):
            raise RuntimeError(
                f"jvp(f, primals, tangents): Expected {name} to be a tuple. "
                "E.g. it should be valid to call f(*primals)."
            )
    ps, ts = _tensors(primals), _tensors(tangents)
    if len(ps) != len(ts):
        raise RuntimeError(
            "jvp(f, primals, tangents): Expected primals and tangents to have "
            "the same python structure."
        )
    with forward_ad.transform_level():  # its own level: jvp nests (Note [nested levels])
        duals = [forward_ad.make_dual(p, t) for p, t in zip(ps, ts)]
        out, aux = _split_aux(func(*_rebuild(primals, iter(duals))), has_aux, "jvp")
        pairs = [
            forward_ad.unpack_dual(o)
            for o in _tensors(
                out,
                "jvp(f, primals, tangents): Expected f(*primals) to return only tensors. Output",
            )
        ]
        values = _rebuild(out, iter([p.primal for p in pairs]))
        jvps = _rebuild(
            out, iter([zeros_like(p.primal) if p.tangent is None else p.tangent for p in pairs])
        )
    return (values, jvps, aux) if has_aux else (values, jvps)


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``, ``jvp_fn(*tangents)`` giving ``J @ tangents`` at
    ``primals`` (torch.func.linearize). Each call of ``jvp_fn`` runs forward AD again: the
    same values as torch's, which replays a traced graph instead.

    Example:
        >>> out, jvp_fn = linearize(staged.sin, staged.zeros(3))
        >>> jvp_fn(staged.ones(3))
        tensor([1., 1., 1.])
    """
    output = func(*primals)
    flat = _tensors(primals)
    specs = [(p.shape, p.dtype) for p in flat]

    def jvp_fn(*tangents):
        if _structure(tangents) != _structure(primals):
            raise RuntimeError(
                f"Expected the tangents {_structure(tangents)} to have the same argspec as "
                f"the primals {_structure(primals)}"
            )
        for i, (t, (shape, dtype)) in enumerate(zip(_tensors(tangents), specs)):
            for what, got, want in (("shape", t.shape, shape), ("dtype", t.dtype, dtype)):
                if got != want:
                    raise RuntimeError(
                        f"tangent:{i} with {what} {got} in flattened pytree doesn't match "
                        f"the {what} {want} of the corresponding primal."
                    )
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn


def _structure(tree) -> str:
    """A pytree's nesting, its leaves as ``*`` (for error messages)."""
    return repr(_rebuild(tree, iter(["*"] * len(_leaves(tree))))).replace("'*'", "*")


def _jacobian(rows, out, inp, leading):
    """``(numel, ...)`` rows of one Jacobian block to ``out.shape + inp.shape``: the
    vmapped dim leads (jacrev: one row per output element) or trails (jacfwd: one column
    per input element)."""
    shape = tuple(out.shape) + tuple(inp.shape)
    return rows.reshape(shape) if leading else rows.permute(*range(1, rows.ndim), 0).reshape(shape)


def _real_only(api: str, tree, what: str) -> None:
    """torch.func's jacrev and jacfwd take real inputs and outputs only: a complex leaf
    (counted among all of ``tree``'s leaves) raises torch's error."""
    for i, x in enumerate(_leaves(tree)):
        if isinstance(x, Tensor) and x.dtype.is_complex:
            raise RuntimeError(
                f"{api}: Expected all {what} to be real but received complex tensor at "
                f"flattened input idx: {i}"
            )


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """``func`` -> its Jacobian with respect to ``argnums``, by reverse mode: ``vjp``
    vmapped over the one-hot cotangents (torch.func.jacrev), ``chunk_size`` rows at a time
    where given. Each output's entry has shape ``output.shape + input.shape``.

    Example:
        >>> jacrev(staged.sin)(staged.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """

    @functools.wraps(func)
    def wrapper(*args):
        _real_only("jacrev", args, "inputs")
        f, primals, tup = _restrict(func, args, {}, argnums)
        res = vjp(f, *tup, has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        _real_only("jacrev", out, "outputs")
        outs = _leaves(out)
        blocks = []
        for i, o in enumerate(outs):

            def row(ct, i=i):
                return vjp_fn(
                    _rebuild(
                        out, iter([ct if j == i else zeros_like(p) for j, p in enumerate(outs)])
                    )
                )

            rows = vmap(row, chunk_size=chunk_size)(one_hots(o))
            blocks.append(
                _rebuild(
                    primals,
                    iter(
                        [_jacobian(r, o, p, True) for r, p in zip(_leaves(rows), _leaves(primals))]
                    ),
                )
            )
        jac = _rebuild(out, iter(blocks))
        return (jac, res[2]) if has_aux else jac

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``func`` -> its Jacobian with respect to ``argnums``, by forward mode: ``jvp``
    vmapped over the one-hot tangents (torch.func.jacfwd).

    Example:
        >>> jacfwd(staged.sin)(staged.zeros(2))
        tensor([[1., 0.],
                [0., 1.]])
    """

    @functools.wraps(func)
    def wrapper(*args):
        _real_only("jacfwd", args, "inputs")
        f, primals, tup = _restrict(func, args, {}, argnums)
        ps = _tensors(tup)
        columns, aux, out = [], None, None
        for k, p in enumerate(ps):

            def push(t, k=k):
                tangents = _rebuild(
                    tup, iter([t if j == k else zeros_like(q) for j, q in enumerate(ps)])
                )
                res = jvp(f, tup, tangents, has_aux=has_aux)
                return res[1], res[0], res[2] if has_aux else None

            cols, out, aux = vmap(push, out_dims=(0, None, None), randomness=randomness)(
                one_hots(p)
            )
            _real_only("jacfwd", out, "outputs")
            columns.append(_leaves(cols))
        outs = _leaves(out)
        jac = _rebuild(
            out,
            iter(
                [
                    _rebuild(
                        primals,
                        iter([_jacobian(columns[k][i], o, p, False) for k, p in enumerate(ps)]),
                    )
                    for i, o in enumerate(outs)
                ]
            ),
        )
        return (jac, aux) if has_aux else jac

    return wrapper


def hessian(func, argnums=0):
    """``func`` -> its Hessian with respect to ``argnums``: ``jacfwd(jacrev(func))``
    (forward over reverse, as torch.func.hessian).

    Example:
        >>> hessian(lambda x: (x ** 3).sum())(staged.ones(2))   # diag(6 x)
        tensor([[6., 0.],
                [0., 6.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)
