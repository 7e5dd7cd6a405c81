"""torch's short-time Fourier transform (``stft``, ``istft``, also Tensor methods) and its
window factories (``hann_window hamming_window blackman_window bartlett_window
kaiser_window``), with torch 2.13's arguments, defaults, warnings and errors.

``stft`` and ``istft`` are compositions of staged ops, as torch's decompositions are: the
signal padded (``F.pad``), cut into frames (``Tensor.unfold``, a gather), windowed and
transformed (``staged.fft``); ``istft`` inverse-transforms the frames, overlap-adds them
and the squared window (``_overlap_add``: pads, reshapes and a sum) and divides. So they
differentiate in both modes, batch under ``vmap`` and capture and compile with no rule of
their own. The windows are constants, computed in NumPy in torch's order of operations.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from . import autodiff as ad
from . import dtypes as dt
from . import fft
from ._where import sited
from .autodiff import special
from .eager import autocast as _autocast
from .eager import ops
from .eager.devices import check as _check_device
from .eager.factories import empty, ones, tensor
from .eager.ops.layers import pad
from .eager.tensor import Tensor, strided

__all__ = [
    "stft",
    "istft",
    "hann_window",
    "hamming_window",
    "blackman_window",
    "bartlett_window",
    "kaiser_window",
]

_NO_WINDOW = (
    "A window was not provided. A rectangular window will be applied{}To suppress this "
    "warning and use a rectangular window, explicitly set "
    "`window=staged.ones(n_fft, device=<device>)`."
)
_NO_STFT_WINDOW = _NO_WINDOW.format(
    ",which is known to cause spectral leakage. Other windows such as staged.hann_window or "
    "staged.hamming_window are recommended to reduce spectral leakage."
)
_NO_ISTFT_WINDOW = _NO_WINDOW.format(
    ".Please provide the same window used by stft to make the inversion lossless."
)


def _int(v, fn: str, what: str) -> int:
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{fn}(): argument '{what}' must be int, not {type(v).__name__}") from None


def _optional_int(v, fn: str, what: str, default: int) -> int:
    return default if v is None else _int(v, fn, what)


def _tensor_arg(v, fn: str, what: str, optional: bool = False) -> None:
    if not (isinstance(v, Tensor) or optional and v is None):
        raise TypeError(f"{fn}(): argument '{what}' must be Tensor, not {type(v).__name__}")


def _type(t: Tensor) -> str:
    """ATen's ``toString`` of ``t``'s type, as torch's stft messages print it."""
    d = t.dtype
    return f"CPU{d.title}Type" if d.is_complex else f"staged.{d.title}Tensor"


def _show(v) -> str:
    """An optional argument as ATen prints it: None, 1 / 0 for a bool, the value."""
    return "None" if v is None else str(int(v)) if isinstance(v, bool) else str(v)


def _call(name: str, x: Tensor, n_fft, hop, win, window, **rest) -> str:
    """The call that torch's stft and istft errors start with."""
    w = "None" if window is None else f"{_type(window)}{{{list(window.shape)}}}"
    tail = "".join(f", {k}={_show(v)}" for k, v in rest.items())
    return (
        f"{name}({_type(x)}{list(x.shape)}, n_fft={n_fft}, hop_length={hop}, "
        f"win_length={win}, window={w}{tail}) "
    )


def _centered(window: Tensor, n_fft: int) -> Tensor:
    """``window`` zero-padded on both sides to ``n_fft`` (its centre at ``n_fft // 2``)."""
    left = (n_fft - window.shape[0]) // 2
    return pad(window, [left, n_fft - window.shape[0] - left])


@sited
def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
    align_to_window=None,
) -> Tensor:
    """The short-time Fourier transform of a signal (1-D) or a batch of them (2-D): frames
    of ``n_fft`` samples every ``hop_length`` (``n_fft // 4``), each multiplied by
    ``window`` (``win_length`` long, zero-padded to ``n_fft`` at both ends; ``None``: ones,
    with torch's warning), transformed. ``center`` pads the signal by ``n_fft // 2`` on both
    sides (``pad_mode``, as ``F.pad``), so that frame t is centred on sample
    ``t * hop_length``. Returns ``(B?, n_fft // 2 + 1, frames)`` (``onesided``, the default
    for a real signal and window) or ``(B?, n_fft, frames)``, complex; ``return_complex``
    must be given for a real signal, and ``False`` (deprecated) stacks the real and
    imaginary parts on a last dim. ``normalized`` scales by ``1 / sqrt(n_fft)``;
    ``align_to_window`` (``center=False`` only) starts each frame's window, not its
    ``n_fft`` samples, at ``t * hop_length``.

    Example:
        >>> x = staged.sin(staged.arange(64.0))
        >>> staged.stft(x, 16, window=staged.hann_window(16), return_complex=True).shape
        staged.Size([9, 17])
    """
    if center and align_to_window is not None:
        raise RuntimeError("stft align_to_window should only be set when center = false")
    _tensor_arg(input, "stft", "input")
    _tensor_arg(window, "stft", "window", optional=True)
    n_fft = _int(n_fft, "stft", "n_fft")
    hop = _optional_int(hop_length, "stft", "hop_length", n_fft >> 2)
    win = _optional_int(win_length, "stft", "win_length", n_fft)
    signal_dim = input.ndim
    if center:  # torch pads first, in Python, then checks (torch/functional.py)
        pad_amount = n_fft // 2
        input = input.reshape((1,) * (3 - signal_dim) + tuple(input.shape))
        input = pad(input, [pad_amount, pad_amount], pad_mode)
        input = input.reshape(tuple(input.shape)[len(input.shape) - signal_dim :])
    if window is None:
        warnings.warn(_NO_STFT_WINDOW, UserWarning, stacklevel=3)
    as_complex = return_complex
    if as_complex is None:
        as_complex = input.dtype.is_complex or window is not None and window.dtype.is_complex
    if not as_complex:
        if return_complex is None:
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and will "
                "further require that return_complex=True in a future PyTorch release."
            )
        warnings.warn(
            "stft with return_complex=False is deprecated. In a future pytorch release, stft "
            "will return complex tensors for all inputs, and return_complex=False will raise "
            "an error.\nNote: staged.stack([out.real, out.imag], -1) of the complex output "
            "gives the old return format.",
            UserWarning,
            stacklevel=3,
        )

    def fail(what: str):
        call = _call(
            "stft",
            input,
            n_fft,
            hop,
            win,
            window,
            normalized=bool(normalized),
            onesided=onesided,
            return_complex=return_complex,
            align_to_window=align_to_window,
        )
        raise RuntimeError(call + ": " + what)

    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        fail("expected a tensor of floating point or complex values")
    if input.ndim not in (1, 2):
        fail("expected a 1D or 2D tensor")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if not 0 < n_fft <= x.shape[1]:
        fail(f"expected 0 < n_fft < {x.shape[1]}, but got n_fft={n_fft}")
    if hop <= 0:
        fail(f"expected hop_length > 0, but got hop_length={hop}")
    if not 0 < win <= n_fft:
        fail(f"expected 0 < win_length <= n_fft, but got win_length={win}")
    if window is not None and tuple(window.shape) != (win,):
        fail(
            f"expected a 1D window tensor of size equal to win_length={win}, but got window "
            f"with size {list(window.shape)}"
        )
    if win < n_fft:
        window = _centered(ones(win, dtype=x.dtype) if window is None else window, n_fft)
    if not center and align_to_window:
        # frames start (n_fft - win) // 2 earlier: what they read of the padding meets the
        # window's zeros, so zeros do whatever pad_mode
        x = pad(x, [(n_fft - win) // 2] * 2)
    frames = x.unfold(-1, n_fft, hop)  # (B, frames, n_fft)
    if window is not None:
        frames = frames * window
    complex_ = frames.dtype.is_complex
    onesided = not complex_ if onesided is None else onesided
    if complex_ and onesided:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else None
    out = (fft.rfft if onesided else fft.fft)(frames, norm=norm).transpose(1, 2)
    if signal_dim == 1:
        out = out.squeeze(0)
    return out if as_complex else ops.stack([out.real, out.imag], -1)


def _overlap_add(frames: Tensor, hop: int) -> Tensor:
    """``frames`` (B, T, n) summed into (B, n + hop (T - 1)) samples, frame t from sample
    ``t * hop`` (torch's ``unfold_backward``). Each frame is cut into ``r = ceil(n / hop)``
    blocks of ``hop`` samples, block i of frame t landing on output block ``t + i``: the
    (r, T) grid of blocks padded to rows of T + r blocks and read as rows one block
    shorter (a reshape) has row i shifted i blocks right, zeros coming in, and the sum of
    the rows is the output."""
    b, t, n = frames.shape
    r = -(-n // hop)
    blocks = pad(frames, [0, r * hop - n]).reshape(b, t, r, hop).permute(0, 2, 1, 3)
    grid = pad(blocks, [0, 0, 0, r]).reshape(b, r * (t + r) * hop)  # (B, r, T + r, hop)
    skewed = grid[:, : r * (t + r - 1) * hop].reshape(b, r, t + r - 1, hop)
    return skewed.sum(1).reshape(b, (t + r - 1) * hop)[:, : n + hop * (t - 1)]


def _check_nola(envelope: Tensor, call: str) -> None:
    """torch's check that the overlap-added squared window (``envelope``) is nowhere zero:
    at once where its values are known, else (a window that is a compiled step's input,
    or batched by ``vmap``) recorded, raised when the step's results are read (Note
    [index checks])."""
    if not envelope.numel():
        raise RuntimeError(
            "min(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument. (istft has no sample to return: `length`, "
            "or with center=True the n_fft // 2 samples trimmed at each end, leaves none of "
            "what the frames cover: give a positive length, or more frames)"
        )
    message = (
        call + "window overlap add min: 1 (the squared windows, overlap-added, are zero at "
        "some output sample, which istft cannot recover: the NOLA condition fails. Use a "
        "smaller hop_length or a window that is not zero at its ends, or center=True, "
        "whose padding istft trims)"
    )
    values = envelope._payload
    if type(values) is np.ndarray:
        if np.abs(values).min() < 1e-11:
            raise RuntimeError(message)
        return
    small = (envelope.abs().amin() < 1e-11).reshape(1).to(dt.int64)
    ad.check(
        small,
        error="RuntimeError",
        message=message.replace("{", "{{").replace("}", "}}"),
        lo=0,
        hi=1,
    )


@sited
def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
) -> Tensor:
    """The inverse of ``stft``: the least-squares signal of a complex ``(B?, bins,
    frames)`` spectrogram made with the same ``n_fft``, ``hop_length``, ``win_length``,
    ``window``, ``center`` and ``normalized`` (frames inverse-transformed, windowed,
    overlap-added and divided by the overlap-added squared window, which must be nowhere
    zero: torch's NOLA check). ``onesided`` defaults to ``bins != n_fft``; ``length`` trims
    or zero-pads the result (by default ``n_fft + hop_length * (frames - 1)``, less the
    ``center`` padding); ``return_complex`` gives a complex signal (from a two-sided
    spectrogram).
    """
    _tensor_arg(input, "istft", "input")
    _tensor_arg(window, "istft", "window", optional=True)
    n_fft = _int(n_fft, "istft", "n_fft")
    if window is None:
        warnings.warn(_NO_ISTFT_WINDOW, UserWarning, stacklevel=3)
    hop = _optional_int(hop_length, "istft", "hop_length", n_fft >> 2)
    win = _optional_int(win_length, "istft", "win_length", n_fft)
    length = None if length is None else _int(length, "istft", "length")
    if not input.dtype.is_complex:
        raise RuntimeError(
            "istft requires a complex-valued input tensor matching the output from stft with "
            "return_complex=True."
        )
    if input.ndim < 2:  # torch reads the sizes of its real view (a last dim of 2 more)
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-input.ndim - 1}, "
            f"{input.ndim}], but got {-2 - input.ndim})"
        )
    frames, bins = input.shape[-1], input.shape[-2]
    expected = n_fft + hop * (frames - 1)
    call = _call(
        "istft",
        input,
        n_fft,
        hop,
        win,
        window,
        center=bool(center),
        normalized=bool(normalized),
        onesided=onesided,
        length=length,
        return_complex=bool(return_complex),
    )

    def fail(what: str):
        raise RuntimeError(call + ": " + what)

    if not input.numel():
        fail("input tensor cannot be empty.")
    if input.ndim > 3:
        fail(f"expected a tensor with 3 or 4 dimensions, but got {input.ndim + 1}")
    onesided = bins != n_fft if onesided is None else onesided
    if onesided and bins != n_fft // 2 + 1:
        fail(
            "expected the frequency dimension (3rd to the last) of the input tensor to match "
            f"n_fft / 2 + 1 when onesided=True, but got {bins}"
        )
    if not onesided and bins != n_fft:
        fail(
            "expected the frequency dimension (3rd to the last) of the input tensor to match "
            f"n_fft when onesided=False, but got {bins}"
        )
    if not 0 < hop <= win:
        fail("expected 0 < hop_length <= win_length")
    if not 0 < win <= n_fft:
        fail("expected 0 < win_length <= n_fft")
    if window is not None and tuple(window.shape) != (win,):
        fail("Invalid window shape. window has to be 1D and length of `win_length`")
    w = ones(win, dtype=input.dtype.to_real()) if window is None else window
    if win != n_fft:
        w = _centered(w, n_fft)
    x = (input if input.ndim == 3 else input.unsqueeze(0)).transpose(1, 2)  # (B, frames, bins)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise RuntimeError("Cannot have onesided output if window or input is complex")
        x = fft.ifft(x, norm=norm)
    else:
        if window is not None and window.dtype.is_complex:
            raise RuntimeError("Complex windows are incompatible with return_complex=False")
        if not onesided:
            x = x.narrow(-1, 0, n_fft // 2 + 1)
        x = fft.irfft(x, n=n_fft, norm=norm)
    y = _overlap_add(x * w, hop)
    envelope = _overlap_add(w.pow(2).expand(1, frames, n_fft), hop)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected - n_fft // 2 if center else expected
    y, envelope = y[:, start:end], envelope[:, start:end]
    _check_nola(envelope, call)
    y = y / envelope
    if input.ndim == 2:
        y = y.squeeze(0)
    if end > expected:
        warnings.warn(
            "The length of signal is shorter than the length parameter. Result is being padded "
            "with zeros in the tail. Please check your center and hop_length settings.",
            UserWarning,
            stacklevel=3,
        )
        y = pad(y, [0, end - expected])
    return y


stft = _autocast.sited(stft, "stft")  # on torch's autocast lists (Note [autocast])
for _fn in (stft, istft):
    setattr(Tensor, _fn.__name__, _fn)


# --- windows -------------------------------------------------------------------------------
def _window(name, window_length, periodic, dtype, layout, device, requires_grad, values):
    """torch's checks of a window factory's arguments, then the window of ``window_length``
    (periodic: the first ``window_length`` of a window one longer) that ``values(m, op, t)``
    computes for ``m`` points: ``op`` is the NumPy type torch computes in (float32 for half
    and bfloat16), ``t(a)`` rounds ``a`` to the window's dtype (in ``op``), as torch rounds
    each step's result and each scalar operand."""
    n = _int(window_length, name, "window_length")
    if device is not None:
        _check_device(device)
    if layout not in (None, strided):
        raise RuntimeError(f"{name} is not implemented for sparse types, got: {layout}")
    d = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    if not (d.is_floating_point or d.is_complex):
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d}")
    if n < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={n}")
    if n <= 1:
        make = empty if n == 0 else ones
        return make(n, dtype=d, requires_grad=requires_grad)
    if d.is_complex:
        raise NotImplementedError(f"\"arange_cpu\" not implemented for '{d.title}'")
    op = np.dtype(np.float32 if np.dtype(d.np).itemsize < 4 else d.np).type

    def t(a):
        return np.asarray(a, d.np).astype(op)

    m = n + 1 if periodic else n
    return tensor(values(m, op, t)[:n].astype(d.np), requires_grad=requires_grad)


def _hamming_values(alpha, beta):
    def values(m, op, t):
        w = t(t(np.arange(m)) * t(2 * math.pi / (m - 1)))
        return t(t(t(np.cos(w)) * t(-beta)) + t(alpha))

    return values


@sited
def hamming_window(
    window_length,
    periodic=True,
    alpha=0.54,
    beta=0.46,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
) -> Tensor:
    """``alpha - beta cos(2 pi n / (N - 1))`` for ``n < window_length``: ``N`` is
    ``window_length + 1`` where ``periodic`` (for spectral analysis: ``stft``), else
    ``window_length`` (symmetric, for filter design)."""
    values = _hamming_values(alpha, beta)
    return _window(
        "hamming_window", window_length, periodic, dtype, layout, device, requires_grad, values
    )


@sited
def hann_window(
    window_length,
    periodic=True,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
) -> Tensor:
    """``hamming_window`` with ``alpha = beta = 0.5``: ``sin^2(pi n / (N - 1))``.

    Example:
        >>> staged.hann_window(4)
        tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    values = _hamming_values(0.5, 0.5)
    return _window(
        "hann_window", window_length, periodic, dtype, layout, device, requires_grad, values
    )


def _blackman_values(m, op, t):
    w = t(t(np.arange(m)) * t(math.pi / (m - 1)))
    fine = t(t(np.cos(t(w * t(4)))) * t(0.08))
    coarse = t(t(np.cos(t(w * t(2)))) * t(0.5))
    return t(t(fine - coarse) + t(0.42))


@sited
def blackman_window(
    window_length,
    periodic=True,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
) -> Tensor:
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))`` (``N`` as in
    ``hamming_window``)."""
    return _window(
        "blackman_window",
        window_length,
        periodic,
        dtype,
        layout,
        device,
        requires_grad,
        _blackman_values,
    )


def _bartlett_values(m, op, t):
    w = t(t(np.arange(m)) * t(2 / (m - 1)))
    half = ((m - 1) >> 1) + 1
    w[half:] = t(t(-w[half:]) + t(2))
    return w


@sited
def bartlett_window(
    window_length,
    periodic=True,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
) -> Tensor:
    """The triangle ``1 - |2 n / (N - 1) - 1|`` (``N`` as in ``hamming_window``)."""
    return _window(
        "bartlett_window",
        window_length,
        periodic,
        dtype,
        layout,
        device,
        requires_grad,
        _bartlett_values,
    )


_i0 = special.numpy_impl(special.i0)


@sited
def kaiser_window(
    window_length,
    periodic=True,
    beta=12.0,
    *,
    dtype=None,
    layout=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
) -> Tensor:
    """``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)``, ``a = (N - 1) / 2`` (``N`` as in
    ``hamming_window``; ``I0``: ``staged.special.i0``)."""

    def values(m, op, t):  # in op throughout (torch's kernel)
        a, b = op((m - 1) / 2.0), op(beta)
        r = (t(np.arange(m)) - a) / a
        return (_i0(b * np.sqrt(np.abs(1 - r * r))) / _i0(np.asarray(b))).astype(op)

    return _window(
        "kaiser_window", window_length, periodic, dtype, layout, device, requires_grad, values
    )
