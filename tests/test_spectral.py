"""staged.stft / istft and the window functions against torch 2.13: values and dtypes over
a grid of arguments, the round trip, gradients (reverse, forward, gradcheck), vmap, a
compiled step, warnings and errors; ``hann_window ... kaiser_window`` and
``staged.signal.windows`` against torch's values to a few rounding errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.signal.windows

import staged
from tests.checks import assert_raises_like_torch, message, raises_like_torch, to_numpy

EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}
COMPLEX = {"float32": np.complex64, "float64": np.complex128}


def _close(ours, theirs, atol):
    a, b = to_numpy(ours), to_numpy(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def _signal(rng, shape, dtype, complex_=False):
    x = rng.standard_normal(shape)
    if complex_:
        return (x + 1j * rng.standard_normal(shape)).astype(COMPLEX[dtype])
    return x.astype(dtype)


def _both(x):
    return staged.tensor(x), torch.tensor(x)


def _spectrum_tol(dtype, n_fft, x, w):
    """A bin is a sum of n_fft products |x w|: staged's and torch's rounding of it differ
    by a few eps of that sum (both pocketfft's O(log n) error, and the window product)."""
    return 8 * EPS[dtype] * n_fft * np.abs(x).max() * np.abs(w).max()


# (n_fft, hop_length, win_length, center, pad_mode, normalized, onesided)
GRID = [
    (8, None, None, True, "reflect", False, None),
    (8, 2, None, False, "reflect", False, None),
    (8, 3, 5, True, "constant", True, None),
    (8, 4, 6, False, "reflect", False, False),
    (7, None, None, True, "replicate", False, None),
    (7, 2, 4, True, "circular", True, False),
    (7, 3, None, False, "reflect", True, None),
    (9, 1, 9, True, "reflect", False, True),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(40,), (3, 40)], ids=["1d", "batched"])
@pytest.mark.parametrize("n_fft, hop, win, center, mode, normalized, onesided", GRID)
def test_stft_and_istft_are_torchs(
    n_fft, hop, win, center, mode, normalized, onesided, shape, dtype
):
    """stft's values and dtype for a real signal, then istft of torch's spectrogram (when
    torch can invert it: with center=False a tapered window's ends fail the NOLA check,
    and then staged must fail too)."""
    rng = np.random.default_rng(0)
    x, w = _signal(rng, shape, dtype), rng.uniform(0.5, 1.5, win or n_fft).astype(dtype)
    kw = dict(
        n_fft=n_fft,
        hop_length=hop,
        win_length=win,
        center=center,
        normalized=normalized,
        onesided=onesided,
    )
    (sx, tx), (sw, tw) = _both(x), _both(w)
    spec = staged.stft(sx, window=sw, pad_mode=mode, return_complex=True, **kw)
    tspec = torch.stft(tx, window=tw, pad_mode=mode, return_complex=True, **kw)
    _close(spec, tspec, _spectrum_tol(dtype, n_fft, x, w))
    ts = tspec.numpy()
    try:
        expected = torch.istft(torch.tensor(ts), window=tw, **kw)
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as ours:
            staged.istft(staged.tensor(ts), window=sw, **kw)
        assert "window overlap add min" in str(e) and "window overlap add min" in str(ours.value)
        return
    ours = staged.istft(staged.tensor(ts), window=sw, **kw)
    # a sample: the windowed inverse transforms (each within a few eps of max |bin|) of
    # the ceil(n_fft / hop) frames over it, summed, divided by the envelope (>= 0.5^2)
    frames_over = -(-n_fft // (hop or n_fft // 4))
    tol = 8 * EPS[dtype] * np.abs(ts).max() * np.abs(w).max() * frames_over / 0.25
    _close(ours, expected, tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_complex_input_and_complex_output(dtype):
    """A complex signal gives the two-sided spectrogram (onesided=False by default), and
    istft(return_complex=True) inverts it; return_complex=False stacks real and imaginary
    parts (torch's deprecated layout)."""
    rng = np.random.default_rng(1)
    x, w = _signal(rng, (2, 30), dtype, complex_=True), np.hanning(10).astype(dtype) + 0.1
    (sx, tx), (sw, tw) = _both(x), _both(w)
    spec, tspec = staged.stft(sx, 10, 3, window=sw), torch.stft(tx, 10, 3, window=tw)
    tol = _spectrum_tol(dtype, 10, x, w)
    _close(spec, tspec, tol)
    kw = dict(n_fft=10, hop_length=3, window=None, return_complex=True, length=30)
    back = staged.istft(spec, **{**kw, "window": sw})
    _close(back, torch.istft(tspec, **{**kw, "window": tw}), tol)
    _close(back, x, tol)
    with pytest.warns(UserWarning, match="return_complex=False is deprecated"):
        stacked = staged.stft(sx.real, 10, 3, window=sw, return_complex=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's, once a process
        _close(stacked, torch.stft(tx.real, 10, 3, window=tw, return_complex=False), tol)


def test_window_dtype_promotes_and_align_to_window():
    """A float64 window makes a float32 signal's spectrogram complex128, as torch; and
    align_to_window (center=False) starts each window, not each frame, at t * hop."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(33).astype(np.float32), rng.uniform(0.5, 1, 5)
    (sx, tx), (sw, tw) = _both(x), _both(w)
    kw = dict(n_fft=8, hop_length=3, win_length=5, return_complex=True, center=False)
    ours = staged.Tensor.stft(sx, window=sw, align_to_window=True, **kw)
    _close(ours, tx.stft(window=tw, align_to_window=True, **kw), 1e-12)
    assert ours.dtype is staged.complex128


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_fft, hop, center", [(16, 4, True), (15, 5, True), (12, 3, False)])
def test_round_trip(n_fft, hop, center, dtype):
    """istft(stft(x)) is x (Hann window, overlap enough for NOLA; with center=False the
    window's zero first sample cannot be inverted, so a shifted periodic Hann is used)."""
    rng = np.random.default_rng(3)
    x = _signal(rng, (2, 60), dtype)
    w = staged.hann_window(n_fft, dtype=getattr(staged, dtype)) + (0 if center else 0.1)
    kw = dict(n_fft=n_fft, hop_length=hop, window=w, center=center)
    spec = staged.stft(staged.tensor(x), return_complex=True, **kw)
    length = 60 if center else n_fft + hop * (spec.shape[-1] - 1)
    back = staged.Tensor.istft(spec, length=length, **kw)
    assert back.shape == (2, length)
    _close(back, x[:, :length], 16 * EPS[dtype] * n_fft * np.abs(x).max())


def _grads(lib, fn, inputs, cotangent):
    ins = [lib.tensor(a, requires_grad=True) for a in inputs]
    return lib.autograd.grad(fn(lib, *ins), ins, lib.tensor(cotangent))


STFT = (  # signal, window -> spectrogram (both differentiable)
    lambda lib, x, w: lib.stft(x, 8, 3, window=w, pad_mode="reflect", return_complex=True)
)
ISTFT = (  # spectrogram, window -> signal
    lambda lib, s, w: lib.istft(s, 8, 2, window=w, normalized=True, length=19)
)
TWO_SIDED = (  # complex signal -> two-sided spectrogram -> complex signal
    lambda lib, x, w: lib.istft(
        lib.stft(x, 6, 2, 5, window=w), 6, 2, 5, window=w, return_complex=True
    )
)


def _inputs(rng, fn):
    w = rng.uniform(0.5, 1.5, 5 if fn is TWO_SIDED else 8)
    if fn is STFT:
        return [rng.standard_normal((2, 20)), w]
    if fn is ISTFT:
        return [_signal(rng, (5, 9), "float64", complex_=True), w]
    return [_signal(rng, (17,), "float64", complex_=True), w]


@pytest.mark.parametrize("fn", [STFT, ISTFT, TWO_SIDED], ids=["stft", "istft", "two_sided"])
def test_gradients_are_torchs(fn):
    """Reverse mode (signal and window), forward mode, and gradcheck, in float64."""
    rng = np.random.default_rng(4)
    inputs = _inputs(rng, fn)
    out = fn(staged, *(staged.tensor(a) for a in inputs))
    u = _signal(rng, tuple(out.shape), "float64", complex_=out.dtype.is_complex)
    for g, tg in zip(*(_grads(lib, fn, inputs, u) for lib in (staged, torch))):
        _close(g, tg, 1e-12)
    tangents = [_signal(rng, np.shape(a), "float64", np.iscomplexobj(a)) for a in inputs]
    fwd = staged.autograd.forward_ad
    with fwd.dual_level():
        duals = [
            fwd.make_dual(staged.tensor(a), staged.tensor(t)) for a, t in zip(inputs, tangents)
        ]
        ours = fwd.unpack_dual(fn(staged, *duals)).tangent
    _, theirs = torch.func.jvp(
        lambda *a: fn(torch, *a),
        tuple(torch.tensor(a) for a in inputs),
        tuple(torch.tensor(t) for t in tangents),
    )
    _close(ours, theirs, 1e-12)
    small = [staged.tensor(a, requires_grad=True) for a in inputs]
    assert staged.autograd.gradcheck(lambda *a: fn(staged, *a), small)


def test_vmap_is_the_batched_call():
    x = staged.randn(3, 30, dtype=staged.float64)
    w = staged.hann_window(8, dtype=staged.float64)
    spec = staged.func.vmap(lambda r: staged.stft(r, 8, 2, window=w, return_complex=True))(x)
    _close(spec, staged.stft(x, 8, 2, window=w, return_complex=True), 1e-13)
    back = staged.func.vmap(lambda s: staged.istft(s, 8, 2, window=w, length=30))(spec)
    _close(back, x, 1e-13)


def test_compiled_step_is_eagers():
    """A spectral loss with its backward, captured and compiled for llvm-cpu (frames as a
    gather, the DFT as matmuls, the overlap-add as pads and reshapes)."""
    rng = np.random.default_rng(5)
    x = staged.tensor(rng.standard_normal((2, 48)).astype(np.float32), requires_grad=True)
    w = staged.hann_window(16)
    low = staged.tensor((np.arange(9) < 5).astype(np.float32)).unsqueeze(-1)  # 5 of 9 bins

    def step(x):
        spec = staged.stft(x, 16, 4, window=w, return_complex=True)
        back = staged.istft(spec * low, 16, 4, window=w, length=48)
        loss = spec.abs().pow(2).mean() + (back - x).pow(2).sum()
        loss.backward()
        return loss

    eager = step(x)
    eager_grad, x.grad = x.grad, None
    compiled = staged.compile(step)(x)
    np.testing.assert_allclose(compiled.item(), eager.item(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), eager_grad.numpy(), rtol=1e-4, atol=1e-5)


def test_the_nola_check_of_a_window_without_values_raises_when_results_are_read():
    """A window passed to a compiled step (or batched by vmap) has no values at the trace:
    its NOLA check is recorded, and a zero envelope raises when the result is read (it
    was skipped, the result inf / NaN)."""
    spec = staged.stft(staged.randn(40), 8, 4, window=staged.hann_window(8), return_complex=True)
    step = staged.compile(lambda s, w: staged.istft(s, 8, 4, window=w, center=False))
    good = staged.hann_window(8) + 0.1
    assert np.isfinite(step(spec, good).numpy()).all()
    with pytest.raises(RuntimeError, match="NOLA condition fails"):
        step(spec, staged.hann_window(8, periodic=False)).numpy()  # zero at both ends
    bad = staged.stack([good, staged.hann_window(8, periodic=False)])
    with pytest.raises(RuntimeError, match="NOLA condition fails"):
        staged.func.vmap(lambda w: staged.istft(spec, 8, 4, window=w, center=False))(bad)


# torch 2.13's warnings (staged for torch in names): torch gives each once a process
WARNINGS = [
    "A window was not provided. A rectangular window will be applied,which is known to cause "
    "spectral leakage. Other windows such as staged.hann_window or staged.hamming_window are "
    "recommended to reduce spectral leakage.To suppress this warning and use a rectangular "
    "window, explicitly set `window=staged.ones(n_fft, device=<device>)`.",
    "A window was not provided. A rectangular window will be applied.Please provide the same "
    "window used by stft to make the inversion lossless.To suppress this warning and use a "
    "rectangular window, explicitly set `window=staged.ones(n_fft, device=<device>)`.",
    "The length of signal is shorter than the length parameter. Result is being padded with "
    "zeros in the tail. Please check your center and hop_length settings.",
]


def test_warnings_are_torchs():
    """stft without a window, istft without one, and istft asked for more samples than the
    frames hold (zero-padded)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = staged.stft(staged.ones(20), 8, return_complex=True)
        staged.istft(spec, 8)
        out = staged.istft(spec, 8, window=staged.ones(8), length=30)
    assert [str(c.message) for c in caught] == WARNINGS
    assert all(c.category is UserWarning and c.filename == __file__ for c in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tspec = torch.stft(torch.ones(20), 8, window=torch.ones(8), return_complex=True)
        _close(out, torch.istft(tspec, 8, window=torch.ones(8), length=30), 1e-6)


def _istft_input(lib):
    return lib.stft(lib.ones(20), 8, window=lib.ones(8), return_complex=True)


@pytest.mark.parametrize(
    "call",
    [
        lambda lib: lib.stft(lib.ones(20), 8),
        lambda lib: lib.stft(lib.ones(20), 8, window=lib.ones(8), align_to_window=True),
        lambda lib: lib.stft(lib.ones(20, dtype=lib.complex64), 8, onesided=True),
        lambda lib: lib.stft(
            lib.ones(20), 8, window=lib.ones(8, dtype=lib.complex64), onesided=True
        ),
        lambda lib: lib.stft(lib.ones(20).long(), 8, window=lib.ones(8), return_complex=True),
        lambda lib: lib.stft(lib.ones(2, 2, 5), 4, window=lib.ones(4), return_complex=True),
        lambda lib: lib.stft(
            lib.ones(20), 30, window=lib.ones(30), center=False, return_complex=True
        ),
        lambda lib: lib.stft(lib.ones(20), 0, window=lib.ones(8), return_complex=True),
        lambda lib: lib.stft(lib.ones(20).double(), 8, hop_length=0, return_complex=True),
        lambda lib: lib.stft(
            lib.ones(4, 5), 2, hop_length=-1, window=lib.ones(2), return_complex=True
        ),
        lambda lib: lib.stft(
            lib.ones(20), 8, win_length=9, window=lib.ones(9), return_complex=True
        ),
        lambda lib: lib.stft(
            lib.ones(20), 8, win_length=6, window=lib.ones(8), return_complex=True
        ),
        lambda lib: lib.stft(lib.ones(20), 8, window=lib.ones(2, 4), return_complex=True),
        lambda lib: lib.stft(lib.ones(3), 8, window=lib.ones(8), return_complex=True),
        lambda lib: lib.istft(_istft_input(lib).real, 8, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib), 8, window=lib.ones(8), onesided=False),
        lambda lib: lib.istft(_istft_input(lib), 9, window=lib.ones(9), onesided=False),
        lambda lib: lib.istft(_istft_input(lib), 8, window=lib.ones(8), return_complex=True),
        lambda lib: lib.istft(_istft_input(lib), 8, hop_length=9, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib), 8, win_length=0, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib), 8, win_length=9, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib), 8, window=lib.ones(7)),
        lambda lib: lib.istft(_istft_input(lib)[0], 8, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib)[None, None], 8, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib)[:, :0], 8, window=lib.ones(8)),
        lambda lib: lib.istft(_istft_input(lib), 8, window=lib.ones(8, dtype=lib.complex64)),
        lambda lib: lib.hann_window(-1),
        lambda lib: lib.kaiser_window(4, dtype=lib.complex64),
        lambda lib: lib.signal.windows.hann(-1),
        lambda lib: lib.signal.windows.kaiser(4, dtype=lib.complex64),
        lambda lib: lib.signal.windows.general_cosine(4, a=[]),
        lambda lib: lib.signal.windows.general_cosine(4, a=3),
        lambda lib: lib.signal.windows.exponential(4, center=1.0),
        lambda lib: lib.signal.windows.exponential(4, tau=0),
        lambda lib: lib.signal.windows.gaussian(4, std=0),
        lambda lib: lib.signal.windows.kaiser(4, beta=-1),
    ],
)
def test_errors_are_torchs(call):
    """The exception type and message (staged for torch in names)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_raises_like_torch(call)


def test_nola_failure_names_the_cause():
    """torch's message for a window envelope with a zero (a Hann window, uncentred: its
    zero first sample), then what to change."""
    w = np.hanning(8)
    spec = staged.stft(staged.randn(30), 8, 2, window=staged.tensor(w), return_complex=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.istft(torch.tensor(spec.numpy()), 8, 2, window=torch.tensor(w), center=False)
    with pytest.raises(RuntimeError) as ours:
        staged.istft(spec, 8, 2, window=staged.tensor(w), center=False)
    head = str(theirs.value).split("\n")[0].replace("torch.", "staged.")
    assert message(ours.value).startswith(head) and "NOLA" in str(ours.value)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda lib: lib.stft(lib.ones(20), 8.0, return_complex=True), []),
        (
            lambda lib: lib.stft(
                lib.ones(20), 8, window=lib.ones(8), pad_mode="bogus", return_complex=True
            ),
            [],
        ),
        (
            lambda lib: lib.hann_window(4, dtype=lib.int64),
            ["hann_window expects floating point dtypes, got: "],
        ),
        (
            lambda lib: lib.bartlett_window(4, layout=lib.sparse_coo),
            ["is not implemented for sparse types"],
        ),
        (lambda lib: lib.hamming_window(4.0), []),
        (
            lambda lib: lib.istft(_istft_input(lib)[..., :1], 8, window=lib.ones(8)),
            ["min(): Expected reduction dim to be specified for input.numel() == 0."],
        ),
        (
            lambda lib: lib.signal.windows.nuttall(4, layout=lib.sparse_coo),
            ["general_cosine is implemented for strided tensors only, got: "],
        ),
        (lambda lib: lib.signal.windows.cosine(4.0), []),
    ],
)
def test_errors_like_torchs(call, words):
    raises_like_torch(call, *words)


# --- windows -----------------------------------------------------------------------------
ATEN = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]
LENGTHS = [0, 1, 2, 7, 16]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("name", ATEN)
def test_windows_are_torchs(name, dtype):
    """torch's values: computed in its order of operations, so within a rounding of the
    cosine (NumPy's and torch's differ by an ulp) or of I0 (Cephes in float32 for float32;
    torch's float64 I0 is 4-5 ulp off), i.e. a few eps of values <= 1; half and bfloat16,
    rounded at each step, exactly."""
    eps = float(torch.finfo(getattr(torch, dtype)).eps)
    tol = 0 if dtype in ("float16", "bfloat16") else (16 if name == "kaiser_window" else 2) * eps
    for n in LENGTHS:
        for periodic in (True, False):
            ours = getattr(staged, name)(n, periodic, dtype=getattr(staged, dtype))
            theirs = getattr(torch, name)(n, periodic, dtype=getattr(torch, dtype))
            assert ours.dtype is getattr(staged, dtype) and ours.shape == tuple(theirs.shape)
            a, b = to_numpy(ours).astype(np.float64), theirs.double().numpy()
            np.testing.assert_allclose(a, b, rtol=0, atol=tol, err_msg=f"{n} {periodic}")


def test_window_parameters_and_options():
    close = lambda a, b: np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=4e-7)  # noqa: E731
    close(staged.hamming_window(9, False, 0.6, 0.3), torch.hamming_window(9, False, 0.6, 0.3))
    close(staged.kaiser_window(9, True, 5.0), torch.kaiser_window(9, True, 5.0))
    close(staged.kaiser_window(9, False, 0.0), torch.kaiser_window(9, False, 0.0))
    w = staged.hann_window(8, requires_grad=True)
    assert w.requires_grad and w.is_leaf and staged.blackman_window(1).tolist() == [1.0]
    assert staged.hann_window(0, dtype=staged.complex64).dtype is staged.complex64
    previous = staged.get_default_dtype()
    staged.set_default_dtype(staged.float64)
    try:
        assert staged.bartlett_window(5).dtype is staged.float64
        assert staged.signal.windows.hann(5).dtype is staged.float64
    finally:
        staged.set_default_dtype(previous)


# |d window / d point| times the largest |point| (the points are a linspace, whose rounding
# staged and torch do differently, within an eps of the largest |point| each)
def _spread(name, M):
    return {
        "bartlett": 1.0,
        "cosine": math.pi,
        "exponential": M / 2,
        "gaussian": 0.86 * M / (2 * math.sqrt(2)),
        "kaiser": 12.0,
        "general_cosine": 2 * math.pi * (0.23 + 2 * 0.31),
        "general_hamming": 2 * math.pi * 0.46,
        "hamming": 2 * math.pi * 0.46,
        "hann": 2 * math.pi * 0.5,
        "blackman": 2 * math.pi * (0.5 + 2 * 0.08),
        "nuttall": 2 * math.pi * (0.4891775 + 2 * 0.1365995 + 3 * 0.0106411),
    }[name]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", torch.signal.windows.__all__)
def test_signal_windows_are_torchs(name, dtype):
    """Values within a few eps, plus what the spacing of the points can move them (see
    _spread); with requires_grad the window is computed from a leaf, as torch's."""
    kw = {"a": [0.46, 0.23, 0.31]} if name == "general_cosine" else {}
    ours_fn, theirs_fn = getattr(staged.signal.windows, name), getattr(torch.signal.windows, name)
    for M in LENGTHS:
        for sym in (True, False):
            ours = ours_fn(M, sym=sym, dtype=getattr(staged, dtype), **kw)
            theirs = theirs_fn(M, sym=sym, dtype=getattr(torch, dtype), **kw)
            tol = EPS[dtype] * (4 + 4 * _spread(name, M))
            _close(ours, theirs, tol)
    ours, theirs = ours_fn(5, requires_grad=True, **kw), theirs_fn(5, requires_grad=True, **kw)
    assert (ours.requires_grad, ours.is_leaf) == (theirs.requires_grad, theirs.is_leaf)
    assert staged.signal.windows.__all__ == torch.signal.windows.__all__


def test_signal_window_keywords():
    w = staged.signal.windows
    tw = torch.signal.windows
    _close(
        w.exponential(7, center=1.5, tau=0.5, sym=False),
        tw.exponential(7, center=1.5, tau=0.5, sym=False),
        1e-6,
    )
    _close(w.gaussian(9, std=2.5), tw.gaussian(9, std=2.5), 1e-6)
    _close(w.kaiser(9, beta=4.0, sym=False), tw.kaiser(9, beta=4.0, sym=False), 1e-6)
    _close(w.general_hamming(8, alpha=0.6), tw.general_hamming(8, alpha=0.6), 1e-6)
