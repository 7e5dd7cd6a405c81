"""What the op sweep runs: samples as staged/torch arguments, outputs flattened, random
cotangents/tangents, the graph-JVP interpreter, and the batched compiled module."""

from __future__ import annotations

import numpy as np
import torch

import staged
import staged.autograd.forward_ad as fwAD
from tests.ops.opinfo import OpInfo, Sample

_DIFF = "fc"  # NumPy kinds that carry gradients


_HALF = {"float16": (1e-2, 1e-2), "bfloat16": (3e-2, 3e-2)}


def tolerances(entry: OpInfo, dtype: str):
    """(rtol, atol): the entry's override, except for half dtypes, which keep their own."""
    if dtype in _HALF:
        return _HALF[dtype]
    rtol, atol = {"float32": (1e-5, 1e-5), "complex64": (1e-5, 1e-5)}.get(dtype, (1e-7, 1e-7))
    return (
        entry.rtol if entry.rtol is not None else rtol,
        entry.atol if entry.atol is not None else atol,
    )


def arrays(sample: Sample):
    """The sample's array leaves, in argument order (kwargs after args)."""
    out = []

    def walk(a):
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for b in a:
                walk(b)

    for a in list(sample.args) + list(sample.kwargs.values()):
        walk(a)
    return out


def rebuild(sample: Sample, leaves):
    """The sample's (args, kwargs) with its arrays replaced by ``leaves`` in order."""
    it = iter(leaves)

    def sub(a):
        if isinstance(a, np.ndarray):
            return next(it)
        if isinstance(a, (list, tuple)):
            return type(a)(sub(b) for b in a)
        return a

    args = tuple(sub(a) for a in sample.args)
    return args, {k: sub(v) for k, v in sample.kwargs.items()}


def differentiable(a: np.ndarray) -> bool:
    return a.dtype.kind in _DIFF


def staged_leaves(sample, requires_grad=False):
    return [
        staged.tensor(a.copy(), requires_grad=requires_grad and differentiable(a))
        for a in arrays(sample)
    ]


def torch_leaves(sample, requires_grad=False):
    return [
        torch.tensor(a.copy()).requires_grad_(requires_grad and differentiable(a))
        for a in arrays(sample)
    ]


def call(fn, sample, leaves):
    args, kwargs = rebuild(sample, leaves)
    return fn(*args, **kwargs)


def flat(out) -> list:
    """An op's result as a list of tensors."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        if t._is_zerotensor():  # a tangent torch knows is 0 (slogdet's sign)
            return np.zeros(t.shape, torch.empty((), dtype=t.dtype).numpy().dtype)
        return t.detach().resolve_conj().resolve_neg().numpy()
    return np.asarray(t.detach().resolve_conj() if isinstance(t, staged.Tensor) else t)


def assert_close(actual, expected, rtol, atol, what=""):
    a, e = numpy(actual), numpy(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != expected {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != expected {e.dtype}"
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
            e.astype(a.dtype).astype(np.complex128 if a.dtype.kind == "c" else np.float64),
            rtol=rtol,
            atol=atol,
            err_msg=what,
        )
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


def random_like(rng, a: np.ndarray) -> np.ndarray:
    shape = np.shape(a)
    if a.dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(a.dtype)
    return rng.standard_normal(shape).astype(a.dtype)


# --- JVP: forward-mode AD ---------------------------------------------------------------------
def forward_jvp(entry: OpInfo, sample: Sample, tangents):
    """(outputs, output tangents or None) of ``entry.op`` at the sample along ``tangents``
    (one per array leaf, None for none), by ``staged.autograd.forward_ad``."""
    with fwAD.dual_level():
        leaves = [
            t if v is None else fwAD.make_dual(t, staged.tensor(v))
            for t, v in zip(staged_leaves(sample), tangents)
        ]
        duals = [fwAD.unpack_dual(o) for o in flat(call(entry.op, sample, leaves))]
    return [d.primal for d in duals], [d.tangent for d in duals]


# --- capture and the batched compiled module --------------------------------------------------
def captured(entry: OpInfo, sample: Sample):
    leaves = staged_leaves(sample)
    return staged.capture(lambda *ls: flat(call(entry.op, sample, ls)), *leaves), leaves


def compiled_batch(slots, backend="llvm-cpu"):
    """Run every ``(entry, sample)`` of ``slots`` through ONE captured and compiled module;
    returns per slot its list of outputs (NumPy)."""
    per_slot = [arrays(s) for _, s in slots]
    all_leaves = [staged.tensor(a.copy()) for arrs in per_slot for a in arrs]
    counts = []

    def body(*ls):
        outs, k = [], 0
        counts.clear()
        for (entry, sample), arrs in zip(slots, per_slot):
            o = flat(call(entry.op, sample, ls[k : k + len(arrs)]))
            k += len(arrs)
            counts.append(len(o))
            outs.extend(o)
        return outs

    fn = staged.capture(body, *all_leaves).compile(backend)
    res = [np.asarray(r) for r in fn(*all_leaves)]
    out, k = [], 0
    for n in counts:
        out.append(res[k : k + n])
        k += n
    return out
