"""gradcheck / gradgradcheck: analytical gradients against central finite differences.

Complex numbers are checked as PyTorch does (the Wirtinger convention): a complex input
``z = x + iy`` is two real inputs and a complex output ``w = u + iv`` two real outputs.
The backward pass with grad_output ``g`` must give ``dL/dx + i dL/dy`` for
``L = Re(conj(g) w)``, so grad_output 1 checks the rows of ``u`` and 1j those of ``v``,
and the real and imaginary parts of the result are the ``x`` and ``y`` columns.
Fast mode compares ``v^T J u`` for random ``u``, ``v`` instead of whole Jacobians.
``check_forward_ad`` compares the Jacobian forward-mode AD gives (``J d`` for each real
unit direction ``d`` of an input, its tangent the output's real and imaginary parts) with
the same finite differences.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..eager.tensor import Tensor
from . import forward_ad
from .engine import grad as _grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` and ``gradgradcheck`` when a check fails."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable(inputs):
    idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not idx:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, "
            "but none of them have requires_grad=True."
        )
    for i in idx:
        if inputs[i].dtype.name not in ("float64", "complex128"):
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating "
                "point or complex. This check will likely fail if all the inputs are "
                "not of double precision floating point or complex.",
                UserWarning,
                stacklevel=2,
            )
    return idx


def _outputs(func, inputs):
    return tuple(o for o in _as_tuple(func(*inputs)) if isinstance(o, Tensor))


def _real_view(a: np.ndarray) -> np.ndarray:
    """A flat real vector: complex entries become (re, im) pairs."""
    a = np.asarray(a).reshape(-1)
    return np.stack([a.real, a.imag], -1).reshape(-1) if np.iscomplexobj(a) else a


def _perturbed(inputs, j, delta):
    """``inputs`` with ``delta`` (an array shaped like input ``j``) added to input ``j``."""
    x = inputs[j]
    moved = Tensor._wrap(np.asarray(np.asarray(x.detach()) + delta.astype(x.dtype.np)), False)
    # (a 0-d sum is a NumPy scalar, no payload: asarray makes it an array again)
    moved.requires_grad_(x.requires_grad)  # gradgradcheck's function differentiates it
    return inputs[:j] + (moved,) + inputs[j + 1 :]


def _directional(func, inputs, j, direction, eps):
    """Central difference of every output along ``direction`` in input ``j``, as real
    vectors."""
    plus = _outputs(func, _perturbed(inputs, j, eps * direction))
    minus = _outputs(func, _perturbed(inputs, j, -eps * direction))
    return [
        (_real_view(np.asarray(p.detach())) - _real_view(np.asarray(m.detach()))) / (2 * eps)
        for p, m in zip(plus, minus)
    ]


def _basis(x):
    """Real unit directions of input ``x``: each element, then (complex) each times 1j."""
    n = x.numel()
    for k in range(n):
        e = np.zeros(n, dtype=x.dtype.np)
        e[k] = 1
        yield e.reshape(tuple(x.shape))
        if x.dtype.is_complex:
            yield (e * 1j).reshape(tuple(x.shape))


def _numerical_jacobians(func, inputs, idx, eps):
    """{(output i, input j): real Jacobian [out_real_size, in_real_size]}."""
    jac = {}
    for j in idx:
        cols = [_directional(func, inputs, j, d, eps) for d in _basis(inputs[j])]
        for i in range(len(cols[0])):
            jac[i, j] = np.stack([c[i] for c in cols], 1)
    return jac


def _vjp(outputs, i, g, inputs, idx):
    """Gradients of output ``i`` (with grad_output ``g``) w.r.t. the checked inputs, as
    real vectors."""
    res = (None,) * len(idx)
    if outputs[i].requires_grad:
        res = _grad(
            (outputs[i],),
            tuple(inputs[j] for j in idx),
            (Tensor._wrap(g.reshape(tuple(outputs[i].shape))),),
            retain_graph=True,
            allow_unused=True,
        )
    return [
        np.zeros(inputs[j].numel() * (2 if inputs[j].dtype.is_complex else 1))
        if r is None
        else _real_view(np.asarray(r.detach()))
        for r, j in zip(res, idx)
    ]


def _jvp(func, inputs, j, direction):
    """Forward-mode derivatives of every output along ``direction`` in input ``j``, as real
    vectors (zeros for an output that does not depend on it)."""
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(inputs[j].detach(), Tensor._wrap(direction))
        outs = _outputs(func, inputs[:j] + (dual,) + inputs[j + 1 :])
        tangents = [forward_ad.unpack_dual(o).tangent for o in outs]
    return [
        np.zeros(o.numel() * (2 if o.dtype.is_complex else 1))
        if t is None
        else _real_view(np.asarray(t.detach()))
        for o, t in zip(outs, tangents)
    ]


def _forward_jacobians(func, inputs, outputs, idx):
    """{(output i, input j): real Jacobian} from forward-mode AD, a column per direction."""
    jac = {}
    for j in idx:
        cols = [_jvp(func, inputs, j, d) for d in _basis(inputs[j])]
        for i in range(len(outputs)):
            jac[i, j] = np.stack([c[i] for c in cols], 1)
    return jac


def _analytical_jacobians(outputs, inputs, idx):
    jac = {}
    for i, out in enumerate(outputs):
        rows = []
        for d in _basis(out):
            rows.append(_vjp(outputs, i, d.reshape(-1), inputs, idx))
        for k, j in enumerate(idx):
            jac[i, j] = (
                np.stack([r[k] for r in rows], 0) if rows else np.zeros((0, inputs[j].numel()))
            )
    return jac


def _part_prefix(out, inp, which_out, which_in):
    parts = []
    if out.dtype.is_complex:
        parts.append(f"the {which_out} part of complex outputs")
    if inp.dtype.is_complex:
        parts.append(f"the {which_in} part of complex inputs")
    return f"While considering {' and '.join(parts)} only, " if parts else ""


def _compare_slow(func, inputs, outputs, idx, eps, atol, rtol, forward=False):
    numerical = _numerical_jacobians(func, inputs, idx, eps)
    if forward:
        analytical = _forward_jacobians(func, inputs, outputs, idx)
    else:
        analytical = _analytical_jacobians(outputs, inputs, idx)
    mode = "computed with forward mode " if forward else ""
    for (i, j), n in numerical.items():
        a = analytical[i, j]
        out, inp = outputs[i], inputs[j]
        ro, ri = (2 if out.dtype.is_complex else 1), (2 if inp.dtype.is_complex else 1)
        for po, which_out in enumerate(("real", "imaginary")[:ro]):
            for pi, which_in in enumerate(("real", "imaginary")[:ri]):
                ns, as_ = n[po::ro, pi::ri], a[po::ro, pi::ri]
                if not np.allclose(as_, ns, rtol=rtol, atol=atol):
                    raise GradcheckError(
                        f"{_part_prefix(out, inp, which_out, which_in)}Jacobian {mode}mismatch for "
                        f"output {i} with respect to input {j},\n"
                        f"numerical:{Tensor._wrap(ns)}\nanalytical:{Tensor._wrap(as_)}\n"
                    )


def _compare_fast(func, inputs, outputs, idx, eps, atol, rtol, forward=False):
    rng = np.random.default_rng(0)
    mode = "computed with forward mode " if forward else ""
    for j in idx:
        x = inputs[j]
        u = rng.standard_normal(tuple(x.shape))
        if x.dtype.is_complex:
            u = u + 1j * rng.standard_normal(tuple(x.shape))
        u = u / max(np.linalg.norm(u), 1e-30)
        numeric = _directional(func, inputs, j, u, eps)
        tangents = _jvp(func, inputs, j, u.astype(x.dtype.np)) if forward else None
        for i, out in enumerate(outputs):
            v = _real_view(rng.standard_normal(out.numel() * (2 if out.dtype.is_complex else 1)))
            g = v[0::2] + 1j * v[1::2] if out.dtype.is_complex else v
            if forward:
                analytical = v @ tangents[i]
            else:
                analytical = _vjp(outputs, i, g.astype(out.dtype.np), inputs, [j])[0] @ _real_view(
                    u
                )
            n = v @ numeric[i]
            if not np.allclose(analytical, n, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"Jacobian {mode}mismatch for output {i} with respect to input {j},\n"
                    f"numerical:{n}\nanalytical:{analytical}\n\n"
                    "The above quantities relating the numerical and analytical jacobians are "
                    "computed in fast mode: v^T J u for random vectors u and v. Run with "
                    "fast_mode=False to see the whole Jacobians."
                )


def _no_differentiable_outputs(func, inputs, idx, eps):
    """Where no output requires grad, the numerical derivatives must all be zero."""
    if any(np.any(jac != 0) for jac in _numerical_jacobians(func, inputs, idx, eps).values()):
        raise GradcheckError("Numerical gradient for function expected to be zero")


def gradcheck(
    func,
    inputs,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
    fast_mode=False,
    check_forward_ad=False,
    check_backward_ad=True,
    nondet_tol=0.0,
) -> bool:
    """Check the gradients of ``func`` at ``inputs`` (those that require grad) against
    central finite differences, those of backward (``check_backward_ad``) and of forward
    mode AD (``check_forward_ad``); raise ``GradcheckError`` (or return False) on a
    mismatch. ``nondet_tol`` is accepted for torch's signature: staged's backward is
    deterministic (a repeated backward gives the same bits).

    Example:
        >>> x = staged.randn(3, dtype=staged.float64, requires_grad=True)
        >>> gradcheck(lambda t: (t * t).sin(), (x,))
        True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True"
        )
    inputs = _as_tuple(inputs)
    try:
        idx = _differentiable(inputs)
        outputs = _outputs(func, inputs)
        keep = [i for i, o in enumerate(outputs) if o.requires_grad]
        if not keep:
            _no_differentiable_outputs(func, inputs, idx, eps)
            return True

        def differentiable(*args):  # torch checks only the outputs that require grad
            outs = _outputs(func, args)
            return tuple(outs[i] for i in keep)

        outputs = tuple(outputs[i] for i in keep)
        check = _compare_fast if fast_mode else _compare_slow
        for forward, wanted in ((False, check_backward_ad), (True, check_forward_ad)):
            if wanted:
                check(differentiable, inputs, outputs, idx, eps, atol, rtol, forward)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
    fast_mode=False,
) -> bool:
    """``gradcheck`` of the gradients of ``func`` (computed with ``create_graph=True``) with
    respect to ``inputs`` and ``grad_outputs`` (random ones by default)."""
    inputs = _as_tuple(inputs)
    idx = _differentiable(inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = []
        for o in _outputs(func, inputs):
            g = rng.standard_normal(tuple(o.shape))
            if o.dtype.is_complex:
                g = g + 1j * rng.standard_normal(tuple(o.shape))
            grad_outputs.append(Tensor._wrap(g.astype(o.dtype.np), False).requires_grad_(True))
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_grads(*args):
        ins, gos = args[:n], args[n:]
        outs = _outputs(func, ins)
        pairs = [(o, g) for o, g in zip(outs, gos) if o.requires_grad]
        grads = _grad(
            tuple(o for o, _ in pairs),
            tuple(ins[j] for j in idx),
            tuple(g for _, g in pairs),
            create_graph=True,
            allow_unused=True,
        )
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_grads,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
        fast_mode=fast_mode,
    )
