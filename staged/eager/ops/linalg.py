"""matmul with PyTorch's rank rules (1-D operands, broadcast batch dims) over the strict
batched primitive; einsum, outer, dot, mv, the addmm family and linear over it."""

from __future__ import annotations

import math
import string

from ... import autodiff as ad
from ... import dtypes as dt
from ...autodiff import Fused, fused
from ...autodiff.avals import wrap_dim
from .. import views
from ..checks import require
from ..tensor import Tensor, type_label
from ._operands import broadcast_shapes, expand_to, half, in_float32, promote_types
from ..factories import ones_like as _ones_like
from .elementwise import add, clamp, conj, imag, mul, real, sqrt, sub, where
from .reduction import amax, norm, sum
from .shape import cat, diagonal, expand, permute, reshape, select, squeeze, stack, unsqueeze


def _matmul(a, b):
    """The strict primitive, with PyTorch's errors on mismatched shapes or dtypes."""
    pa, pb = a._payload, b._payload
    if pa.shape[-1] != pb.shape[-2] or pa.shape[:-2] != pb.shape[:-2] or pa.dtype != pb.dtype:
        ad.matmul.abstract_eval(a._aval(), b._aval())  # raises the error
    if pa.dtype.itemsize == 2 and pa.dtype.kind in "fV":  # float16, bfloat16
        return in_float32(ad.matmul, a, b)
    return ad.matmul(a, b)


def _not_tensors(a, b):
    """torch's TypeError for a matmul operand that is no tensor (``@`` then asks the other
    operand)."""
    for i, (name, t) in enumerate((("input", a), ("other", b))):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"matmul(): argument '{name}' (position {i + 1}) must be Tensor, not "
                f"{type_label(t)}"
            )


def matmul(a, b):
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
        _not_tensors(a, b)
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        raise RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D"
        )
    if na == 1 and nb == 1:
        if a._payload.shape != b._payload.shape:
            raise RuntimeError(
                f"inconsistent tensor size, expected tensor [{a.shape[0]}] and "
                f"src [{b.shape[0]}] to have the same number of elements, but "
                f"got {a.shape[0]} and {b.shape[0]} elements respectively"
            )
        n = a._payload.shape[0]
        out = _matmul(ad.reshape(a, shape=(1, n)), ad.reshape(b, shape=(n, 1)))
        return views.owned(ad.reshape(out, shape=()), (a, b), {})  # Note [own results]
    args = a, b
    squeeze_a = na == 1
    squeeze_b = nb == 1
    if squeeze_a:
        a = ad.reshape(a, shape=(1,) + tuple(a._payload.shape))
    if squeeze_b:
        b = ad.reshape(b, shape=tuple(b._payload.shape) + (1,))
    sa, sb = a._payload.shape, b._payload.shape
    if sa[:-2] != sb[:-2]:
        batch = broadcast_shapes(sa[:-2], sb[:-2])
        a = expand_to(a, tuple(batch) + tuple(sa[-2:]))
        b = expand_to(b, tuple(batch) + tuple(sb[-2:]))
    out = _matmul(a, b)
    if squeeze_a or squeeze_b:
        s = tuple(out._payload.shape)
        s = s[:-2] + ((s[-2],) if not squeeze_a else ()) + ((s[-1],) if not squeeze_b else ())
        out = views.owned(ad.reshape(out, shape=s), args, {})  # Note [own results]
    return out


def mm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {a.ndim}D and {b.ndim}D")
    return _matmul(a, b)


def bmm(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"batch{1 if a.ndim != 3 else 2} must be a 3D tensor")
    return _matmul(a, b)


def outer(a, b):
    for name, t in (("self", a), ("vec2", b)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {t.ndim}-D")
    return mul(
        ad.reshape(a, shape=(a._payload.shape[0], 1)), ad.reshape(b, shape=(1, b._payload.shape[0]))
    )


def _vectors(a, b):
    """torch's checks of dot's and vdot's operands: 1-D, of one dtype."""
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.dtype is not b.dtype:
        raise RuntimeError(
            "dot : expected both vectors to have same dtype, but found "
            f"{a.dtype.title} and {b.dtype.title}"
        )


def dot(a, b):
    """The inner product of two 1-D tensors of one dtype."""
    _vectors(a, b)
    return matmul(a, b)


def vdot(input, other):
    """``dot`` with ``input`` conjugated."""
    _vectors(input, other)
    return matmul(conj(input), other)


def inner(input, other):
    """The sum of products over the last dims (a product where either is 0-d)."""
    if input.ndim == 0 or other.ndim == 0:
        return mul(input, other)
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            "inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}"
        )
    return tensordot(input, other, ([-1], [-1]))


def dist(input, other, p=2):
    """The ``p``-norm of ``input - other`` (broadcast together)."""
    d = promote_types(input, other)
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(
            f"norm(): input dtype should be either floating point or complex. Got {d.title} "
            "instead."
        )
    return norm(sub(input, other), p)


def mv(a, b):
    """Matrix (n, m) times vector (m,)."""
    if a.ndim != 2 or b.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(
            f"size mismatch, got input ({a.shape[0]}), mat ({a.shape[0]}x{a.shape[1]}), "
            f"vec ({b.shape[0]})"
        )
    return matmul(a, b)


def _add_product(input, out, beta, alpha):
    """``beta * input + alpha * out``, ``input`` broadcast to ``out``; with ``beta == 0``
    ``input`` is not read (nor its NaNs), as in PyTorch; for integer results ``beta`` and
    ``alpha`` are truncated as torch's kernels cast them."""
    beta, alpha = dt.scalar_as(beta, out.dtype), dt.scalar_as(alpha, out.dtype)
    out = out if alpha == 1 else mul(out, alpha)
    base = expand(input, tuple(out._payload.shape))
    if beta == 0:
        return out
    return add(out, base if beta == 1 else mul(base, beta))


def _matrices(input, x, y):
    """addmm's and baddbmm's operands: one dtype."""
    for a, b in ((x, y), (input, x)):
        if a.dtype is not b.dtype:
            raise RuntimeError(
                f"self and mat2 must have the same dtype, but got "
                f"{a.dtype.title} and {b.dtype.title}"
            )


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    _matrices(input, mat1, mat2)
    if half(input, mat1, mat2):
        return in_float32(addmm, input, mat1, mat2, beta=beta, alpha=alpha)
    return _add_product(input, mm(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    _matrices(input, batch1, batch2)
    if half(input, batch1, batch2):
        return in_float32(baddbmm, input, batch1, batch2, beta=beta, alpha=alpha)
    return _add_product(input, bmm(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum(batch1[i] @ batch2[i])``: baddbmm's products summed
    over the batch."""
    _matrices(input, batch1, batch2)
    if half(input, batch1, batch2):
        return in_float32(addbmm, input, batch1, batch2, beta=beta, alpha=alpha)
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    (_, n, k), (_, k2, m) = batch1.shape, batch2.shape
    if k != k2:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({n}x{k} and {k2}x{m})")
    products = bmm(batch1, batch2)
    return _add_product(input, sum(products, 0, dtype=products.dtype), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``."""
    if not input.dtype is mat.dtype is vec.dtype:
        raise RuntimeError(
            "addmv input tensors must have the same dtype, but got "
            f"{input.dtype.title}, {mat.dtype.title}, and {vec.dtype.title}"
        )
    if input.ndim > 1 or mat.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(
            f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, {vec.ndim}"
        )
    (n, m), k = mat.shape, vec.shape[0]
    if m != k or input.numel() not in (1, n):
        size = input.shape[0] if input.ndim else 1
        raise RuntimeError(f"size mismatch, got input ({size}), mat ({n}x{m}), vec ({k})")
    if half(input, mat, vec):
        return in_float32(addmv, input, mat, vec, beta=beta, alpha=alpha)
    return _add_product(input, mv(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)`` (dtypes promoted)."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    kind = promote_types(input, vec1, vec2)
    for name, s in (("beta", beta), ("alpha", alpha)):
        if isinstance(s, bool) and kind is not dt.bool_:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
        if isinstance(s, float) and kind._category <= 1:
            raise RuntimeError(
                f"For integral input tensors, argument {name} must not be a floating point number."
            )
    return _add_product(input, outer(vec1, vec2), beta, alpha)


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (its columns are
    observations; a 1-D ``input`` is one variable), the observations weighted by integer
    ``fweights`` and float ``aweights``; torch's formula, operation for operation."""
    if input.ndim > 2:
        raise RuntimeError(
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{input.ndim} dimensions"
        )
    if input.dtype is dt.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = reshape(input, 1, -1) if input.ndim < 2 else input
    n = x.shape[1]
    w = None
    for name, weights, kinds, kind in (
        ("fweights", fweights, ("int", "uint"), "integral"),
        ("aweights", aweights, ("float",), "floating point"),
    ):
        if weights is not None:
            _observation_weights(name, weights, n, kinds, kind)
            w = weights if w is None else mul(w, weights)
    if w is None:
        w_sum = n
        factor = n - correction if n > correction else 0  # torch warns about factor <= 0
    else:
        w_sum = sum(w)
        require(w_sum != 0, RuntimeError, "cov(): weights sum to zero, can't be normalized")
        if aweights is not None and correction != 0:
            factor = w_sum - sum(mul(w, aweights)) * correction / w_sum
        else:
            factor = w_sum - correction
        factor = where(factor <= 0, 0, factor)
    x = x - unsqueeze(sum(x if w is None else x * w, 1) / w_sum, 1)
    return squeeze(mm(x, conj(x if w is None else x * w).mT) / factor)


def _observation_weights(name, w, n, kinds, kind):
    if w.ndim > 1:
        raise RuntimeError(
            f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
            f"{w.ndim} dimensions"
        )
    if w.dtype.dclass not in kinds:
        raise RuntimeError(
            f"cov(): expected {name} to have {kind} dtype but got {name} with {w.dtype.title} dtype"
        )
    if w.numel() != n:
        raise RuntimeError(
            f"cov(): expected {name} to have the same numel as there are observations in the "
            f"input but got {w.numel()} != {n}"
        )
    require(w >= 0, RuntimeError, f"cov(): {name} cannot be negative")


def corrcoef(input):
    """Pearson's correlation coefficients of the variables in the rows of ``input`` (the
    covariances scaled to the diagonal's), clipped to [-1, 1]."""
    if input.ndim > 2:
        raise RuntimeError(
            "corrcoef(): expected input to have two or fewer dimensions but got an input "
            f"with {input.ndim} dimensions"
        )
    c = cov(input)
    if c.ndim == 0:  # one variable: 1, or NaN where its variance is 0, inf or NaN
        return c / c
    d = diagonal(c)
    s = sqrt(real(d))
    c = c / reshape(s, -1, 1) / reshape(s, 1, -1)
    if c.dtype.is_complex:
        return add(clamp(real(c), -1, 1), mul(clamp(imag(c), -1, 1), 1j))
    return clamp(c, -1, 1)


# --- einsum -----------------------------------------------------------------------------------
_LETTERS = frozenset(string.ascii_letters)


def _subscripts(term, what, at):
    """The labels of one term of an equation (``at``: where it starts in the equation):
    letters, and None for its ellipsis."""
    labels, i = [], 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i : i + 3] != "...":
                raise RuntimeError(
                    f"einsum(): found '.' for {what} that is not part of any "
                    f"ellipsis" + (" (...)" if what == "output" else "")
                )
            if None in labels:
                raise RuntimeError(
                    f"einsum(): found '.' for {what} for which an ellipsis was already found"
                )
            labels.append(None)
            i += 3
            continue
        if c not in _LETTERS and c != " ":
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {at + i} in the "
                f"equation string, subscripts must be in [a-zA-Z]"
            )
        if c != " ":
            labels.append(c)
        i += 1
    return labels


def _diagonals(x, labels, i):
    """``x`` with each label repeated in ``labels`` reduced to its diagonal (the two dims
    moved last and flattened, then every (n+1)-th entry: a strided slice)."""
    while len(set(labels)) < len(labels):
        a = next(k for k, l in enumerate(labels) if labels.count(l) > 1)
        b = labels.index(labels[a], a + 1)
        shape = tuple(x._payload.shape)
        n = shape[a]
        if shape[b] != n:
            raise RuntimeError(
                f"einsum(): subscript {labels[a]} is repeated for operand {i} "
                f"but the sizes don't match, {shape[b]} != {n}"
            )
        rest = [k for k in range(len(labels)) if k not in (a, b)]
        x = reshape(permute(x, rest + [a, b]), tuple(shape[k] for k in rest) + (n * n,))
        x = ad.slice(
            x,
            starts=(0,) * x.ndim,
            stops=tuple(x._payload.shape),
            steps=(1,) * len(rest) + (n + 1,),
        )
        labels = [labels[k] for k in rest] + [labels[a]]
    return x, labels


def _sum_out(x, labels, keep):
    dims = tuple(k for k, l in enumerate(labels) if l not in keep)
    if not dims:
        return x, labels
    return (
        ad.reduce_sum(x, dims=dims, keepdim=False),
        [l for k, l in enumerate(labels) if k not in dims],
    )


def _contract(a, la, b, lb, keep, sizes):
    """``a`` and ``b`` multiplied, summed over their shared labels not in ``keep``: one
    batched matmul of (batch, a's own, summed) by (batch, summed, b's own)."""
    batch = [l for l in la if l in lb and l in keep]
    summed = [l for l in la if l in lb and l not in keep]
    left = [l for l in la if l not in lb]
    right = [l for l in lb if l not in la]

    def grouped(x, labels, groups):
        x = permute(x, [labels.index(l) for g in groups for l in g])
        return reshape(x, tuple(math.prod(sizes[l] for l in g) for g in groups))

    out = _matmul(grouped(a, la, (batch, left, summed)), grouped(b, lb, (batch, summed, right)))
    labels = batch + left + right
    return reshape(out, tuple(sizes[l] for l in labels)), labels


def einsum(equation, *operands):
    """Einstein summation over ``operands`` (or one list of them): letters, one ``...`` per
    term (broadcast, right-aligned), repeated labels (diagonals) and the implicit output
    (the ellipsis, then the letters seen once, sorted). Operands are contracted left to
    right, each pair by one batched matmul."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    lhs, arrow, rhs = equation.partition("->")
    terms, at = [], 0
    for i, term in enumerate(lhs.split(",")):
        terms.append(_subscripts(term, f"operand {i}", at))
        at += len(term) + 1
    if len(terms) != len(operands):
        raise RuntimeError(
            f"einsum(): {'fewer' if len(terms) > len(operands) else 'more'} "
            f"operands were provided than specified in the equation"
        )
    for x in operands[1:]:
        if x.dtype is not operands[0].dtype:
            raise RuntimeError(
                f"expected scalar type {operands[0].dtype.title} but found {x.dtype.title}"
            )
    ells = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        k = len(t) - (None in t)
        if None not in t and k != x.ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({k}) does "
                f"not match the number of dimensions ({x.ndim}) for operand "
                f"{i} and no ellipsis was given"
            )
        if k > x.ndim:
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({k}) is "
                f"more than the number of dimensions ({x.ndim}) for operand {i}"
            )
        ells.append(x.ndim - k)
    n_ell = max(ells, default=0)  # ellipsis dims are the labels 0 .. n_ell-1
    xs, ls, sizes = [], [], {}
    for i, (t, x, e) in enumerate(zip(terms, operands, ells)):
        p = t.index(None) if None in t else len(t)
        x, labels = _diagonals(x, t[:p] + list(range(n_ell - e, n_ell)) + t[p + 1 :], i)
        for l, n in zip(labels, x._payload.shape):
            seen = sizes.setdefault(l, n)
            if n != seen and 1 not in (n, seen):
                raise RuntimeError(
                    f"einsum(): subscript {l} has size {n} for operand {i} which does not "
                    f"broadcast with previously seen size {seen}"
                    if isinstance(l, str)
                    else f"einsum(): dimension {l - n_ell + e} covered by ellipsis in operand {i}"
                    f"has size {n} which does not broadcast with previously seen ellipsis "
                    f"with size {seen} for the respective dimension"
                )
            sizes[l] = seen if n == 1 else n
        xs.append(x)
        ls.append(labels)
    if arrow:
        out = _subscripts(rhs, "output", len(lhs) + 2)
        if None in out:
            p = out.index(None)
            out[p : p + 1] = range(n_ell)
        for l in out:
            if out.count(l) > 1:
                raise RuntimeError(
                    f"einsum(): output subscript {l} appears more than once in the output"
                )
            if l not in sizes:
                raise RuntimeError(
                    f"einsum(): output subscript {l} does not appear in the "
                    f"equation for any input operand"
                )
    else:
        seen = [l for t in terms for l in t if l is not None]
        out = list(range(n_ell)) + sorted(l for l in set(seen) if seen.count(l) == 1)
    xs = [expand_to(x, tuple(sizes[l] for l in labels)) for x, labels in zip(xs, ls)]
    y, ly = _sum_out(xs[0], ls[0], set(out).union(*ls[1:]))
    for j in range(1, len(xs)):
        keep = set(out).union(*ls[j + 1 :])
        b, lb = _sum_out(xs[j], ls[j], keep | set(ly))
        y, ly = _contract(y, ly, b, lb, keep, sizes)
    return permute(y, [ly.index(l) for l in out])


def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of ``a`` with the first ``dims`` of ``b``, or the
    dims listed in ``dims = (dims_a, dims_b)``: one matmul of the two reshaped."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    da = [d % a.ndim for d in da]
    db = [d % b.ndim for d in db]
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[x]} in dim "
                f"{x} and second has size {b.shape[y]} in dim {y}"
            )
    fa = [d for d in range(a.ndim) if d not in da]
    fb = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = reshape(permute(a, *fa, *da), (math.prod(a.shape[d] for d in fa), k))
    right = reshape(permute(b, *db, *fb), (k, math.prod(b.shape[d] for d in fb)))
    out = matmul(left, right)
    return reshape(out, tuple(a.shape[d] for d in fa) + tuple(b.shape[d] for d in fb))


def kron(a, b):
    """The Kronecker product: each entry of ``a`` times the whole of ``b``."""
    n = max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    x = reshape(a, tuple(k for s in sa for k in (s, 1)))
    y = reshape(b, tuple(k for s in sb for k in (1, s)))
    return reshape(mul(x, y), tuple(p * q for p, q in zip(sa, sb)))


def cross(a, b, dim=None):
    """The cross product of 3-vectors along ``dim`` (operands broadcast; without ``dim``,
    the first dim of size 3, as torch's deprecated default)."""
    shape = broadcast_shapes(tuple(a.shape), tuple(b.shape))
    a, b = expand_to(a, shape), expand_to(b, shape)
    if dim is None:
        dim = next((d for d, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    dim = wrap_dim(dim, len(shape))
    if shape[dim] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
            f"{b.shape[dim]}"
        )
    a1, a2, a3 = (select(a, dim, i) for i in range(3))
    b1, b2, b3 = (select(b, dim, i) for i in range(3))
    parts = (a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1)
    return stack(parts, dim)


_CDIST_MODES = (
    None,
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def _euclidean_dist(x1, x2):
    """torch's ``_euclidean_dist``: the Euclidean distances from one product,
    ``[-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T``, 0 where it is not positive (its
    cancellation): fast, and torch's numbers. As torch's backward, no gradient flows where
    the distance is 0 (the root's input there is a 1 that the ``where`` drops)."""
    n1 = sum(mul(x1, x1), -1, keepdim=True)
    n2 = sum(mul(x2, x2), -1, keepdim=True)
    a = cat([mul(x1, -2), n1, _ones_like(n1)], -1)
    b = cat([x2, _ones_like(n2), n2], -1)
    squared = matmul(a, b.mT)
    positive = squared > 0
    return where(positive, sqrt(where(positive, squared, 1.0)), 0.0)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distance between each row of ``x1`` (..., P, M) and each of ``x2``
    (..., R, M): (..., P, R). As torch's: for p = 2 from one matrix product
    (``_euclidean_dist``) where ``compute_mode`` says so, by default where P or R exceeds
    25; else as the norm of the differences (at a zero distance the gradient is 0)."""
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(
            f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D"
            if x1.ndim < 2
            else f"cdist only supports at least 2D tensors, X2 got: {x2.ndim}D"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(
            f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}"
        )
    if p == 2 and (
        compute_mode == "use_mm_for_euclid_dist"
        or compute_mode in (None, "use_mm_for_euclid_dist_if_necessary")
        and (x1.shape[-2] > 25 or x2.shape[-2] > 25)
    ):
        return _euclidean_dist(x1, x2)
    diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    return _chebyshev(diff) if p == math.inf else norm(diff, p, -1)


def _chebyshev(diff):
    """The largest ``|diff|`` along the last dim, whose gradient goes whole to each tied
    coordinate, as torch's ``_cdist_backward`` (the norm's splits it among them): the
    maximum, plus each tied ``|d| - |d|`` (0, gradient 1)."""
    a = diff.abs()
    held = a.detach()
    top = amax(held, -1, keepdim=True)
    tied = where(held == top, a - held, 0.0)
    return squeeze(top, -1) + sum(tied, -1)


def _linear_composite(input, weight, bias=None):
    if input.ndim > 2 and weight.ndim == 2:  # one 2-D matmul: NumPy is slow on a broadcast weight
        flat = matmul(input.reshape(-1, input.shape[-1]), weight.mT)
        out = flat.reshape(*input.shape[:-1], weight.shape[0])
    else:
        out = matmul(input, weight.mT if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


# operands (bias, x, weight), as the edges of torch's AddmmBackward0: the engine reaches
# the bias's AccumulateGrad (and runs its hooks) before the input's and the weight's
_linear = Fused(
    "linear",
    lambda bias, x, weight: fused.linear_impl(x, weight, bias),
    lambda bias, x, weight: _linear_composite(x, weight, bias),
    vjp=(fused.LINEAR_BIAS_VJP[-1], *fused.LINEAR_VJP),
    node_name="AddmmBackward0",
)
_linear_no_bias = Fused(
    "linear_no_bias",
    lambda x, weight: fused.linear_impl(x, weight),
    _linear_composite,
    vjp=fused.LINEAR_VJP,
    node_name="MmBackward0",
)


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``: one fused kernel and Node eagerly for an input of 2 or
    more dims, a 2-D weight and a 1-D bias of one real floating dtype. float16 and
    bfloat16 compute in float32 and round once, as torch's addmm; of a non-contiguous
    input of 3 or more dims, as torch's, the product and the bias' sum are rounded each."""
    if (
        isinstance(input, Tensor)
        and input._payload.dtype.itemsize == 2
        and half(input, weight, bias)
    ):
        if bias is not None and input.ndim > 2 and not input.is_contiguous():
            return linear(input, weight) + bias  # torch: matmul, then add
        return in_float32(linear, input, weight, bias)
    if (
        isinstance(input, Tensor)
        and input.ndim >= 2
        and weight.ndim == 2
        and input.shape[-1] == weight.shape[1]
    ):
        if bias is None:
            if fused.fusable(input, weight):
                return _linear_no_bias(input, weight)
        elif (
            bias.ndim == 1
            and bias.shape[0] == weight.shape[0]
            and fused.fusable(input, weight, bias)
        ):
            return _linear(bias, input, weight)
    return _linear_composite(input, weight, bias)
