"""``torch.fft``'s counterpart: discrete Fourier transforms, with torch's arguments (``n``
or ``s``, ``dim``, ``norm``), dtypes, errors and gradients.

Every transform is made of three kernels, as torch's are: complex-to-complex,
real-to-complex (the onesided half spectrum) and complex-to-real (from a half spectrum),
each over any dims. Eagerly each is one NumPy (pocketfft) call and one autograd Node
(``Fused``, Note [fused kernels] in ``eager/dispatch.py``), whose VJP is torch's adjoint
transform. Captured, differentiated forward or batched, each is its decomposition: one
matmul with a constant DFT matrix per transformed dim (O(n^2) a dim, for the sizes a
training step transforms), which compiles (complex matmul lowers to MLIR; ONNX has no
complex matmul, so an export that transforms fails naming it).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from . import dtypes as dt
from ._where import sited
from .autodiff import Fused
from .autodiff.avals import wrap_dim
from .eager import autocast as _autocast
from .eager import ops
from .eager.devices import check as _check_device
from .eager.factories import from_numpy, tensor, zeros
from .eager.tensor import Tensor

__all__ = [
    "fft",
    "ifft",
    "rfft",
    "irfft",
    "hfft",
    "ihfft",
    "fft2",
    "ifft2",
    "rfft2",
    "irfft2",
    "hfft2",
    "ihfft2",
    "fftn",
    "ifftn",
    "rfftn",
    "irfftn",
    "hfftn",
    "ihfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]

# --- the kernels ------------------------------------------------------------------------
# A kernel's ``norm`` is its scaling, whatever its direction (ATen's fft_norm_mode):
# "none", "sqrt" (1 / sqrt(n)) or "n" (1 / n), n the length of each transformed dim.
# NumPy's ``norm`` names the same scalings by direction (forward: exp(-2 pi i jk / n)).
_NP_NORM = {
    True: {"none": "backward", "sqrt": "ortho", "n": "forward"},
    False: {"none": "forward", "sqrt": "ortho", "n": "backward"},
}


def _factor(norm: str, n: int) -> float:
    return {"none": 1.0, "sqrt": 1 / math.sqrt(n), "n": 1 / n}[norm]


@functools.lru_cache(maxsize=64)
def _dft(n: int, m: int, forward: bool, norm: str, np_dtype) -> np.ndarray:
    """The (n, m) matrix ``exp(-2 pi i j k / n)`` (``forward``; else ``exp(+2 pi i j k / n)``),
    scaled: ``x @ W`` transforms a last dim of ``n`` into its first ``m`` frequencies.
    Cached, so read-only."""
    jk = np.outer(np.arange(n), np.arange(m)) % n  # whole turns taken off exactly
    w = np.exp(((-2j if forward else 2j) * np.pi / n) * jk) * _factor(norm, n)
    w = w.astype(np_dtype)
    w.flags.writeable = False
    return w


@functools.lru_cache(maxsize=64)
def _c2r_matrices(n: int, norm: str, np_dtype) -> tuple:
    """(C, S), (n // 2 + 1, n) real: ``re @ C + im @ S`` is the real signal of ``n`` whose
    half spectrum is ``re + i im`` (each bin counted with its mirror image; the imaginary
    parts of the bins without one, 0 and n / 2, drop out, as in every c2r). Read-only."""
    k = np.arange(n // 2 + 1)
    phase = (2 * np.pi / n) * (np.outer(k, np.arange(n)) % n)
    w = (_hermitian_weights(n) * _factor(norm, n))[:, None]
    c, s = (w * np.cos(phase)).astype(np_dtype), (-w * np.sin(phase)).astype(np_dtype)
    c.flags.writeable = s.flags.writeable = False
    return c, s


def _hermitian_weights(n: int) -> np.ndarray:
    """2 for the bins of a half spectrum of ``n`` that stand for two (a bin and its
    mirror image), 1 for the others (0, and n / 2 where n is even)."""
    k = np.arange(n // 2 + 1)
    return np.where((k == 0) | (2 * k == n), 1.0, 2.0)


def _along(x: Tensor, d: int, matrix: np.ndarray) -> Tensor:
    """``x``'s dim ``d`` multiplied by ``matrix`` (its rows: that dim's length; cached, so
    read-only: wrapped as it is, not through ``from_numpy``'s warning for user arrays)."""
    return (x.movedim(d, -1) @ Tensor._wrap(matrix, False)).movedim(-1, d)


def _c2c_impl(x, *, dims, forward, norm):
    transform = np.fft.fftn if forward else np.fft.ifftn
    return transform(x, axes=dims, norm=_NP_NORM[forward][norm]).astype(x.dtype, copy=False)


def _c2c_decomposed(x, *, dims, forward, norm):
    for d in dims:
        x = _along(x, d, _dft(x.shape[d], x.shape[d], forward, norm, x.dtype.np))
    return x


def _r2c_impl(x, *, dims, norm):
    out = np.fft.rfftn(x, axes=dims, norm=_NP_NORM[True][norm])
    return out.astype(np.result_type(x.dtype, np.complex64), copy=False)


def _r2c_decomposed(x, *, dims, norm):
    n, c = x.shape[dims[-1]], x.dtype.to_complex()
    x = _along(x.to(c), dims[-1], _dft(n, n // 2 + 1, True, norm, c.np))
    return _c2c_decomposed(x, dims=dims[:-1], forward=True, norm=norm)


def _c2r_impl(x, *, dims, n, norm):
    s = [x.shape[d] for d in dims[:-1]] + [n]
    out = np.fft.irfftn(x, s=s, axes=dims, norm=_NP_NORM[False][norm])
    return out.astype(x.real.dtype, copy=False)


def _c2r_decomposed(x, *, dims, n, norm):
    x = _c2c_decomposed(x, dims=dims[:-1], forward=False, norm=norm)
    c, s = _c2r_matrices(n, norm, x.dtype.to_real().np)
    return _along(x.real, dims[-1], c) + _along(x.imag, dims[-1], s)


# The VJPs are torch's (derivatives.yaml: fft_c2c_backward, fft_r2c_backward,
# fft_c2r_backward), the adjoints in the conjugate Wirtinger convention.
def _c2c_vjp(g, dims, forward, norm):
    return _c2c(g, dims=dims, forward=not forward, norm=norm)


def _r2c_vjp(g, x_aval, dims, norm):
    """The half spectrum's gradient zero-padded to the full one, inverse-transformed,
    its real part."""
    full = _resize(g, dims[-1:], (x_aval.shape[dims[-1]],))
    return _c2c(full, dims=dims, forward=False, norm=norm).real


def _c2r_vjp(g, dims, n, norm):
    """The real-to-complex transform of the gradient, each bin that stands for two
    doubled."""
    w = _hermitian_weights(n).astype(g.dtype.np).reshape((-1,) + (1,) * (g.ndim - 1 - dims[-1]))
    return _r2c(g, dims=dims, norm=norm) * from_numpy(w)


_c2c = Fused("fft_c2c", _c2c_impl, _c2c_decomposed, vjp=_c2c_vjp, node_name="FftC2CBackward0")
_r2c = Fused("fft_r2c", _r2c_impl, _r2c_decomposed, vjp=_r2c_vjp, node_name="FftR2CBackward0")
_c2r = Fused("fft_c2r", _c2r_impl, _c2r_decomposed, vjp=_c2r_vjp, node_name="FftC2RBackward0")


# --- arguments, as ATen's SpectralOps.cpp reads them ------------------------------------
def _scaling(norm, forward: bool) -> str:
    """A kernel's scaling for torch's ``norm`` of a transform in this direction."""
    if norm is None or norm == "backward":
        return "none" if forward else "n"
    if norm == "forward":
        return "n" if forward else "none"
    if norm == "ortho":
        return "sqrt"
    raise RuntimeError(f'Invalid normalization mode: "{norm}"')


def _promote(x, complex_: bool) -> Tensor:
    """``x`` in the dtype a transform computes in: integers and bools become the default
    float dtype; float32 and float64 (complex where ``complex_``) only."""
    if not isinstance(x, Tensor):
        raise TypeError(f"fft: argument 'input' must be Tensor, not {type(x).__name__}")
    d = x.dtype
    if d.is_complex:
        return x
    if not d.is_floating_point:
        d = dt.get_default_dtype()
    if d not in (dt.float32, dt.float64):
        raise RuntimeError(f"Unsupported dtype {d.title}")
    return x.to(d.to_complex() if complex_ else d)


def _real_input(x, message: str) -> None:
    """torch's error for a complex ``x`` where a real one is needed: ``message`` and the
    dtype."""
    if isinstance(x, Tensor) and x.dtype.is_complex:
        raise RuntimeError(message + x.dtype.title)


def _int(v, what: str) -> int:
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"fft: argument '{what}' must be int, not {type(v).__name__}") from None


def _ints(v, what: str) -> tuple:
    return (_int(v, what),) if not isinstance(v, (tuple, list)) else tuple(_int(i, what) for i in v)


def _dim(d, ndim: int) -> int:
    d = _int(d, "dim")
    if ndim == 0:
        raise IndexError(f"Dimension specified as {d} but tensor has no dimensions")
    return wrap_dim(d, ndim)


def _points(n: int) -> int:
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _resize(x: Tensor, dims, sizes) -> Tensor:
    """``x`` cut or zero-padded at the end of each of ``dims`` to ``sizes``."""
    for d, n in zip(dims, sizes):
        have = x.shape[d]
        if n < have:
            x = x.narrow(d, 0, n)
        elif n > have:
            pad = list(x.shape)
            pad[d] = n - have
            x = ops.cat([x, zeros(pad, dtype=x.dtype)], d)
    return x


def _dims_and_sizes(x: Tensor, s, dim) -> tuple[tuple, tuple]:
    """The dims an n-dimensional transform runs over and their lengths (``s``; -1 keeps a
    dim's own), as torch's ``canonicalize_fft_shape_and_dim_args``."""
    ndim = x.ndim
    if dim is not None:
        dims = tuple(_dim(d, ndim) for d in _ints(dim, "dim"))
        if len(set(dims)) != len(dims):
            raise RuntimeError("FFT dims must be unique")
    if s is not None:
        s = _ints(s, "s")
        if dim is not None and len(dims) != len(s):
            raise RuntimeError("When given, dim and shape arguments must have the same length")
        if len(s) > ndim:
            raise RuntimeError(
                f"Got shape with {len(s)} values but input tensor only has {ndim} dimensions."
            )
        if dim is None:
            dims = tuple(range(ndim - len(s), ndim))
        sizes = tuple(x.shape[d] if n == -1 else n for d, n in zip(dims, s))
    elif dim is None:
        dims, sizes = tuple(range(ndim)), tuple(x.shape)
    else:
        sizes = tuple(x.shape[d] for d in dims)
    for n in sizes:
        _points(n)
    return dims, sizes


def _half_spectrum_args(name: str, x: Tensor, s, dim) -> tuple[tuple, tuple, int]:
    """``(dims, input sizes, n)`` of a complex-to-real transform: ``n`` the output length
    of the last dim (by default ``2 (m - 1)`` for its ``m`` bins), whose input is cut or
    padded to ``n // 2 + 1`` bins."""
    dims, sizes = _dims_and_sizes(x, s, dim)
    if not dims:
        raise RuntimeError(f"{name} must transform at least one axis")
    s = None if s is None else _ints(s, "s")
    n = 2 * (x.shape[dims[-1]] - 1) if s is None or s[-1] == -1 else sizes[-1]
    return dims, sizes[:-1] + (_points(n) // 2 + 1,), n


# --- one dim ----------------------------------------------------------------------------
def _c2c_1d(x, n, dim, norm, forward: bool) -> Tensor:
    x = _promote(x, True)
    dim = _dim(dim, x.ndim)
    n = _points(x.shape[dim] if n is None else _int(n, "n"))
    x = _resize(x, (dim,), (n,))
    return _c2c(x, dims=(dim,), forward=forward, norm=_scaling(norm, forward))


def _r2c_1d(name, x, n, dim, norm, forward: bool) -> Tensor:
    _real_input(x, f"{name} expects a real input tensor, but got ")
    x = _promote(x, False)
    dim = _dim(dim, x.ndim)
    n = _points(x.shape[dim] if n is None else _int(n, "n"))
    return _r2c(_resize(x, (dim,), (n,)), dims=(dim,), norm=_scaling(norm, forward))


def _c2r_1d(x, n, dim, norm, forward: bool) -> Tensor:
    x = _promote(x, True)
    dim = _dim(dim, x.ndim)
    n = _points(2 * (x.shape[dim] - 1) if n is None else _int(n, "n"))
    x = _resize(x, (dim,), (n // 2 + 1,))
    return _c2r(x.conj() if forward else x, dims=(dim,), n=n, norm=_scaling(norm, forward))


@sited
def fft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The discrete Fourier transform of ``input`` along ``dim``, cut or zero-padded to
    ``n`` points first; complex (float32 gives complex64, float64 complex128, integers the
    default float's). ``norm``: "backward" (no scaling, the default), "ortho"
    (1/sqrt(n)) or "forward" (1/n).

    Example:
        >>> staged.fft.fft(staged.tensor([1.0, 0.0, 0.0, 0.0]))
        tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _c2c_1d(input, n, dim, norm, True)


@sited
def ifft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The inverse of ``fft``: ``norm="backward"`` (the default) scales by 1/n."""
    return _c2c_1d(input, n, dim, norm, False)


@sited
def rfft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The ``n // 2 + 1`` non-negative frequencies of the ``fft`` of a real ``input``."""
    return _r2c_1d("rfft", input, n, dim, norm, True)


@sited
def irfft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The real signal of ``n`` points (by default ``2 (m - 1)``) whose ``rfft`` is
    ``input``, the half spectrum of ``m`` bins (cut or zero-padded to ``n // 2 + 1``).
    As in torch, the gradient treats ``input`` as a half spectrum: the bins standing for
    two get twice the gradient, and imaginary parts the transform ignores (bin 0, and
    ``n / 2`` for an even ``n``) none."""
    return _c2r_1d(input, n, dim, norm, False)


@sited
def hfft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The (real) ``fft`` of the Hermitian-symmetric signal of ``n`` points whose first
    half is ``input`` (``irfft``'s arguments)."""
    return _c2r_1d(input, n, dim, norm, True)


@sited
def ihfft(input, n=None, dim=-1, norm=None) -> Tensor:
    """The inverse of ``hfft``: the ``n // 2 + 1`` first bins of the ``ifft`` of a real
    ``input``."""
    return _r2c_1d("ihfft", input, n, dim, norm, False).conj()


# --- n dims ------------------------------------------------------------------------------
def _c2c_nd(x, s, dim, norm, forward: bool) -> Tensor:
    x = _promote(x, True)
    dims, sizes = _dims_and_sizes(x, s, dim)
    x = _resize(x, dims, sizes)
    if not dims:
        return x.clone()
    return _c2c(x, dims=dims, forward=forward, norm=_scaling(norm, forward))


@sited
def fftn(input, s=None, dim=None, norm=None) -> Tensor:
    """``fft`` over each of ``dim`` (all dims by default; the last ``len(s)`` where only
    ``s`` is given), cut or zero-padded to ``s`` (-1: a dim's own length)."""
    return _c2c_nd(input, s, dim, norm, True)


@sited
def ifftn(input, s=None, dim=None, norm=None) -> Tensor:
    """``ifft`` over each of ``dim``, as ``fftn``."""
    return _c2c_nd(input, s, dim, norm, False)


@sited
def fft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``fftn`` over the last two dims."""
    return _c2c_nd(input, s, dim, norm, True)


@sited
def ifft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``ifftn`` over the last two dims."""
    return _c2c_nd(input, s, dim, norm, False)


@sited
def rfftn(input, s=None, dim=None, norm=None) -> Tensor:
    """``fftn`` of a real ``input`` with only the non-negative frequencies of the last of
    ``dim`` (``rfft`` there, ``fft`` over the others)."""
    _real_input(input, "rfftn expects a real-valued input tensor, but got ")
    x = _promote(input, False)
    dims, sizes = _dims_and_sizes(x, s, dim)
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return _r2c(_resize(x, dims, sizes), dims=dims, norm=_scaling(norm, True))


@sited
def rfft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``rfftn`` over the last two dims."""
    return rfftn(input, s, dim, norm)


@sited
def irfftn(input, s=None, dim=None, norm=None) -> Tensor:
    """The inverse of ``rfftn``: ``ifft`` over all but the last of ``dim``, then ``irfft``
    over the last (its output length ``s[-1]``, by default ``2 (m - 1)``)."""
    x = _promote(input, True)
    dims, sizes, n = _half_spectrum_args("irfftn", x, s, dim)
    return _c2r(_resize(x, dims, sizes), dims=dims, n=n, norm=_scaling(norm, False))


@sited
def irfft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``irfftn`` over the last two dims."""
    return irfftn(input, s, dim, norm)


@sited
def hfftn(input, s=None, dim=None, norm=None) -> Tensor:
    """``hfft`` over the last of ``dim`` after ``fft`` over the others: the real ``fftn``
    of a signal Hermitian-symmetric in every dim, given the half of its last."""
    x = _promote(input, True)
    dims, sizes, n = _half_spectrum_args("hfftn", x, s, dim)
    norm = _scaling(norm, True)
    x = _resize(x, dims, sizes)
    if len(dims) > 1:
        x = _c2c(x, dims=dims[:-1], forward=True, norm=norm)
    return _c2r(x.conj(), dims=dims[-1:], n=n, norm=norm)


@sited
def hfft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``hfftn`` over the last two dims."""
    return hfftn(input, s, dim, norm)


@sited
def ihfftn(input, s=None, dim=None, norm=None) -> Tensor:
    """The inverse of ``hfftn``: ``ihfft`` over the last of ``dim``, then ``ifft`` over
    the others, of a real ``input``."""
    _real_input(input, "Only supports floating-point dtypes, but found: ")
    x = _promote(input, False)
    dims, sizes = _dims_and_sizes(x, s, dim)
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    norm = _scaling(norm, False)
    x = _r2c(_resize(x, dims, sizes), dims=dims[-1:], norm=norm).conj()
    return _c2c(x, dims=dims[:-1], forward=False, norm=norm) if len(dims) > 1 else x


@sited
def ihfft2(input, s=None, dim=(-2, -1), norm=None) -> Tensor:
    """``ihfftn`` over the last two dims."""
    return ihfftn(input, s, dim, norm)


# --- helpers -----------------------------------------------------------------------------
def _frequencies(name, ints: np.ndarray, n, d, dtype, device, requires_grad) -> Tensor:
    if device is not None:
        _check_device(device)
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"{name} requires a floating point or complex dtype")
    if dtype.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{dtype.title}'")
    # torch's arithmetic: the integers times 1 / (n d) (inf for n d = 0), that factor in
    # the dtype
    with np.errstate(divide="ignore", invalid="ignore"):
        values = ints.astype(dtype.np) * (np.float64(1) / (n * d)).astype(dtype.np)
    return tensor(values, requires_grad=requires_grad)


def _count(n) -> int:
    n = _int(n, "n")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return n


@sited
def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    """The frequencies of ``fft``'s bins for ``n`` samples ``d`` apart:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d n)``."""
    n = _count(n)
    ints = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)])
    return _frequencies("fftfreq", ints, n, d, dtype, device, requires_grad)


@sited
def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False) -> Tensor:
    """The frequencies of ``rfft``'s bins: ``[0, 1, ..., n // 2] / (d n)``."""
    n = _count(n)
    return _frequencies("rfftfreq", np.arange(n // 2 + 1), n, d, dtype, device, requires_grad)


def _shift(x, dim, shift) -> Tensor:
    if dim is None:
        dims = tuple(range(x.ndim))
    else:
        dims = tuple(_dim(d, x.ndim) for d in _ints(dim, "dim"))
    return ops.roll(x, tuple(shift(x.shape[d]) for d in dims), dims)


@sited
def fftshift(input, dim=None) -> Tensor:
    """``input`` rolled so that frequency 0 (bin 0 of ``fft``) is at the centre of each of
    ``dim`` (all by default)."""
    return _shift(input, dim, lambda n: n // 2)


@sited
def ifftshift(input, dim=None) -> Tensor:
    """The inverse of ``fftshift``."""
    return _shift(input, dim, lambda n: (n + 1) // 2)


# the transforms on torch's autocast lists apply its policy (Note [autocast] in
# eager/autocast.py)
globals().update(_autocast.hook(globals(), "fft."))
