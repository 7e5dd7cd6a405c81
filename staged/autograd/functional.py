"""The functional higher-level API (``torch.autograd.functional``): jacobian, hessian,
vjp, jvp, vhp, hvp over user functions of Tensors, built on ``grad``.

Arguments, results, ``strict`` checks and their errors follow PyTorch. ``jvp`` and
``hvp`` use the double-backward trick, as PyTorch's do. ``vectorize=True`` computes all
rows (columns, in forward mode) of a Jacobian at once: ``vmap`` over the one-hot vectors.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..autodiff import reshape as _view
from ..eager.factories import eye, zeros, zeros_like
from ..eager.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from ..eager.ops.shape import stack
from ..eager.tensor import Tensor
from . import forward_ad
from .engine import grad as _grad
from .vmap import vmap

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(inp, arg_name, fn_name):
    is_tuple = isinstance(inp, tuple)
    inp = inp if is_tuple else (inp,)
    for i, el in enumerate(inp):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise TypeError(
                f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                f"tuple of Tensors but the {where} has type {type(el)}."
            )
    return is_tuple, inp


def _unpack(res, to_unpack):
    """Undo the tuple-wrapping of single inputs/outputs (``(outputs, inputs)`` flags)."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        return res if to_unpack[0] else res[0]
    return res if to_unpack else res[0]


def _preprocess(inputs, create_graph, need_graph):
    """Fresh leaves (or, with create_graph, views that keep the caller's graph)."""
    return tuple(
        _view(inp, shape=tuple(inp.shape))
        if create_graph and inp.requires_grad
        else inp.detach().requires_grad_(need_graph)
        for inp in inputs
    )


def _postprocess(res, create_graph):
    if res and isinstance(res[0], Tensor):
        return res if create_graph else tuple(r.detach() for r in res)
    return tuple(_postprocess(r, create_graph) for r in res)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(
                f"v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if el_v.shape != el_other.shape:
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(
                f"{prepend}v has invalid size: should be {el_other.shape} but got {el_v.shape}."
            )


_INDEPENDENT = {
    "hessian": (
        "The hessian of the user-provided function with respect to input {i} is "
        "independent of the input. This is not allowed in strict mode. You should "
        "ensure that your function is thrice differentiable and that the hessian "
        "depends on the inputs."
    ),
    "jacobian": (
        "While computing the hessian, found that the jacobian of the user-provided "
        "function with respect to input {i} is independent of the input. This is not "
        "allowed in strict mode. You should ensure that your function is twice "
        "differentiable and that the jacobian depends on the inputs (this would be "
        "violated by a linear function for example)."
    ),
    "grad_inputs": (
        "The gradient with respect to input {i} is independent of the inputs of "
        "the user-provided function. This is not allowed in strict mode."
    ),
    "outputs": (
        "Output {i} of the user-provided function does not require gradients. The "
        "outputs must be computed in a differentiable manner from the input when "
        "running in strict mode."
    ),
}


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(
                f"The output of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode."
            )
        if not inp.requires_grad:
            raise RuntimeError(_INDEPENDENT[input_type].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """``grad`` over the outputs that require grad; None for each input if there are none."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad(
        tuple(o for o, _ in pairs),
        inputs,
        tuple(g for _, g in pairs),
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )


_ZERO_MESSAGES = {
    "back": (
        "The output of the user-provided function is independent of input {i}. This is "
        "not allowed in strict mode."
    ),
    "back_trick": (
        "The gradient with respect to the input is independent of entry {i} in the "
        "grad_outputs when using the double backward trick to compute forward mode "
        "gradients. This is not allowed in strict mode."
    ),
    "double_back": (
        "The jacobian of the user-provided function is independent of input {i}. "
        "This is not allowed in strict mode."
    ),
    "double_back_trick": (
        "The hessian of the user-provided function is independent of entry "
        "{i} in the grad_jacobian. This is not allowed in strict mode as it "
        "prevents from using the double backward trick to replace forward "
        "mode AD."
    ),
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_ZERO_MESSAGES[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(
                f"The {what} of the user-provided function is independent of "
                f"input {i}. This is not allowed in strict mode when "
                "create_graph=True."
            )
        res.append(g)
    return tuple(res)


def _prepare(func, inputs, v, create_graph, strict, fn_name, v_like_outputs=False):
    """Common start: inputs as fresh leaves, ``v`` checked, ``func`` run under grad."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _preprocess(inputs, create_graph, need_graph=True)
    if v is not None:
        _, v = _as_tuple(v, "v", fn_name)
        v = _preprocess(v, create_graph, need_graph=False)
        if not v_like_outputs:
            _validate_v(v, inputs, is_inputs_tuple)
    elif not v_like_outputs and (len(inputs) != 1 or inputs[0].numel() != 1):
        raise RuntimeError(
            "The vector v can only be None if the input to the user-provided "
            "function is a single Tensor with a single element."
        )
    is_outputs_tuple, outputs = _as_tuple(
        func(*inputs), "outputs of the user-provided function", fn_name
    )
    _check_requires_grad(outputs, "outputs", strict=strict)
    return is_inputs_tuple, inputs, v, is_outputs_tuple, outputs


def _scalar_output(outputs, is_outputs_tuple, fn_name):
    if is_outputs_tuple or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(
            f"The Tensor returned by the function given to {fn_name} should "
            "contain a single element"
        )


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product at ``inputs``.

    Example:
        >>> out, vj = vjp(lambda x: x.exp().sum(1), staged.rand(4, 4), staged.ones(4))
    """
    with enable_grad():
        is_in, inputs, v, is_out, outputs = _prepare(
            func, inputs, v, create_graph, strict, "vjp", v_like_outputs=True
        )
        if v is not None:
            _validate_v(v, outputs, is_out)
        elif len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(
                "The vector v can only be None if the user-provided function "
                "returns a single Tensor with a single element."
            )
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "back")
    return (
        _unpack(_postprocess(outputs, create_graph), is_out),
        _unpack(_postprocess(res, create_graph), is_in),
    )


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product (by the double-backward trick)."""
    with enable_grad():
        is_in, inputs, v, is_out, outputs = _prepare(func, inputs, v, create_graph, strict, "jvp")
        grad_outputs = tuple(zeros_like(o).requires_grad_(True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, outputs, strict, create_graph, "back_trick")
    return (
        _unpack(_postprocess(outputs, create_graph), is_out),
        _unpack(_postprocess(res, create_graph), is_out),
    )


def _one_hot(out, j):
    e = zeros(out.numel(), dtype=out.dtype)
    e._host()[j] = 1  # a fresh constant, never part of a graph
    return e.reshape(out.shape)


def one_hots(x):
    """Every one-hot direction of ``x``'s elements, stacked: ``(x.numel(), *x.shape)``."""
    return eye(x.numel(), dtype=x.dtype).reshape((x.numel(),) + tuple(x.shape))


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """The Jacobian of ``func`` at ``inputs``: ``J[i][j]`` has shape
    ``outputs[i].shape + inputs[j].shape`` (unwrapped where ``func`` takes or returns a
    single Tensor).

    Example:
        >>> jacobian(lambda x: x.exp().sum(1), staged.rand(2, 2)).shape
        staged.Size([2, 2, 2])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". '
            "Hint: If your function has more outputs than inputs, "
            '"forward-mode" tends to be more performant. Otherwise, prefer to '
            'use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                f"{dt.PACKAGE}.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.'
            )
        return _jacfwd(func, inputs, strict, vectorize)
    with enable_grad():
        is_in, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        is_out, outputs = _as_tuple(
            func(*inputs), "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise RuntimeError(
                f"{dt.PACKAGE}.autograd.functional.jacobian: `strict=True` and "
                "`vectorized=True` are not supported together. Please either "
                "set `strict=False` or `vectorize=False`."
            )
        if vectorize:
            jac = tuple(_vectorized_rows(out, inputs, create_graph) for out in outputs)
            return _unpack(_postprocess(jac, create_graph), (is_out, is_in))
        jac = []
        for i, out in enumerate(outputs):
            rows = tuple([] for _ in inputs)
            for j in range(out.numel()):
                vj = _autograd_grad(
                    (out,),
                    inputs,
                    (_one_hot(out, j),),
                    retain_graph=True,
                    create_graph=create_graph,
                )
                for k, (row, g, inp) in enumerate(zip(rows, vj, inputs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(
                                f"Output {i} of the user-provided function is "
                                f"independent of input {k}. This is not "
                                "allowed in strict mode."
                            )
                        g = zeros_like(inp)
                    elif strict and create_graph and not g.requires_grad:
                        raise RuntimeError(
                            f"The jacobian of the user-provided function is "
                            f"independent of input {i}. This is not allowed in "
                            "strict mode when create_graph=True."
                        )
                    row.append(g)
            jac.append(tuple(_rows_to_jacobian(row, out, inp) for row, inp in zip(rows, inputs)))
        return _unpack(_postprocess(tuple(jac), create_graph), (is_out, is_in))


def _vectorized_rows(out, inputs, create_graph):
    """The Jacobian blocks of one output: its VJPs with all one-hot cotangents at once."""

    def vjp(v):
        gs = _autograd_grad((out,), inputs, (v,), retain_graph=True, create_graph=create_graph)
        return tuple(zeros_like(inp) if g is None else g for g, inp in zip(gs, inputs))

    rows = vmap(vjp)(one_hots(out))
    return tuple(r.reshape(tuple(out.shape) + tuple(inp.shape)) for r, inp in zip(rows, inputs))


def _rows_to_jacobian(rows, out, inp):
    if not rows:  # an empty output
        return zeros(tuple(out.shape) + tuple(inp.shape), dtype=inp.dtype)
    return stack(rows, 0).reshape(tuple(out.shape) + tuple(inp.shape))


def _jacfwd(func, inputs, strict, vectorize):
    """The Jacobian by forward mode: for each input, its JVPs with all of its one-hot
    tangents at once (vmap)."""
    if strict:
        raise RuntimeError(
            f"{dt.PACKAGE}.autograd.functional.jacobian: `strict=True` and "
            '`strategy="forward-mode"` are not supported together (yet). '
            'Please either set `strict=False` or `strategy="reverse-mode"`.'
        )
    if not vectorize:
        raise NotImplementedError(
            "Computing Jacobian using forward-AD or forward-over-reverse "
            "Hessian isonly implemented for `vectorize=True`."
        )
    is_in, inputs = _as_tuple(inputs, "inputs", "jacobian")
    is_out = [False]

    def columns(k):
        def jvp(t):
            with forward_ad.dual_level():
                duals = tuple(
                    forward_ad.make_dual(x, t if m == k else zeros_like(x))
                    for m, x in enumerate(inputs)
                )
                is_out[0], outs = _as_tuple(func(*duals), "outputs", "jacobian")
                pairs = [forward_ad.unpack_dual(o) for o in outs]
                return (
                    tuple(zeros_like(p.primal) if p.tangent is None else p.tangent for p in pairs),
                    tuple(p.primal.detach() for p in pairs),
                )

        return vmap(jvp, out_dims=(0, None))(one_hots(inputs[k]))

    cols = [columns(k) for k in range(len(inputs))]  # cols[k]: (tangents, primals)
    primals = cols[0][1]
    # lists, as torch's forward mode gives where ``func`` takes a tuple
    jac = [
        [_cols_to_jacobian(cols[k][0][i], out, inp) for k, inp in enumerate(inputs)]
        for i, out in enumerate(primals)
    ]
    return _unpack(jac, (is_out[0], is_in))


def _cols_to_jacobian(cols, out, inp):
    """``(inp.numel(), *out.shape)`` tangents as the block ``out.shape + inp.shape``."""
    cols = cols.detach().permute(*range(1, cols.ndim), 0)
    return cols.reshape(tuple(out.shape) + tuple(inp.shape))


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of a scalar ``func`` at ``inputs`` (``H[i][j]`` for input pairs)."""
    is_in, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single_output(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        _scalar_output(t_out, is_out_tuple, "hessian")
        return out.reshape(())

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(single_output, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _unpack(res, (is_in, is_in))


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a scalar ``func``."""
    with enable_grad():
        is_in, inputs, v, is_out, outputs = _prepare(func, inputs, v, create_graph, strict, "vhp")
        _scalar_output(outputs, is_out, "vhp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back")
    return (
        _unpack(_postprocess(outputs, create_graph), is_out),
        _unpack(_postprocess(res, create_graph), is_in),
    )


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a scalar ``func`` (by the double-backward trick)."""
    with enable_grad():
        is_in, inputs, v, is_out, outputs = _prepare(func, inputs, v, create_graph, strict, "hvp")
        _scalar_output(outputs, is_out, "hvp")
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        grad_jac = tuple(zeros_like(inp).requires_grad_(True) for inp in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back_trick")
    return (
        _unpack(_postprocess(outputs, create_graph), is_out),
        _unpack(_postprocess(res, create_graph), is_in),
    )
