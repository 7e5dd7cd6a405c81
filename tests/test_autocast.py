"""``staged.autocast`` against torch 2.13's CPU autocast: which ops cast to what, their
values (bit for bit where both round one float32 sum to bfloat16), training steps under
it, its state (nesting, decorator, threads, cache), torch's warnings, compiled steps and
GradScaler; and half-precision products outside it, which accumulate in float32 and
round once, as torch's CPU kernels."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
import torch

import staged
import staged.nn.functional as SF
import torch.nn.functional as TF
from staged.eager import autocast as ac
from tests.checks import both, message


def _np(t) -> np.ndarray:
    """``t``'s values as float32 (exact for bfloat16 and float16) or as they are."""
    t = t.detach()
    if t.dtype.is_floating_point and t.dtype.itemsize < 4:
        t = t.float()
    return np.asarray(t) if isinstance(t, staged.Tensor) else t.numpy()


def _name(t) -> str:
    return str(t.dtype).rpartition(".")[2]


def _same(ours, theirs, rtol=0.0, atol=0.0):
    assert _name(ours) == _name(theirs), (ours.dtype, theirs.dtype)
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=rtol, atol=atol)


def _exact(rng, *shape):
    """Multiples of 1/8 in [-1/2, 1/2]: exact in bfloat16, products and float32 sums exact
    in any order, so both libraries round the same sum once (bit for bit)."""
    return rng.integers(-4, 5, shape).astype(np.float32) / 8


def _pair(a: np.ndarray, requires_grad=False):
    return (
        staged.tensor(a, requires_grad=requires_grad),
        torch.tensor(a, requires_grad=requires_grad),
    )


# --- the lists --------------------------------------------------------------------------
_LOWER = {  # name: (call(lib, F, *tensors), shapes)
    "matmul @": (lambda lib, F, a, b: a @ b, [(6, 40), (40, 5)]),
    "matmul 1-D": (lambda lib, F, a, b: lib.matmul(a, b), [(40,), (40, 5)]),
    "Tensor.matmul": (lambda lib, F, a, b: a.matmul(b), [(2, 6, 40), (40, 5)]),
    "mm": (lambda lib, F, a, b: lib.mm(a, b), [(6, 40), (40, 5)]),
    "bmm": (lambda lib, F, a, b: lib.bmm(a, b), [(3, 6, 40), (3, 40, 5)]),
    "addmm": (lambda lib, F, c, a, b: lib.addmm(c, a, b, beta=0.5), [(5,), (6, 40), (40, 5)]),
    "baddbmm": (lambda lib, F, c, a, b: lib.baddbmm(c, a, b), [(3, 6, 5), (3, 6, 40), (3, 40, 5)]),
    "linear": (lambda lib, F, x, w, b: F.linear(x, w, b), [(6, 40), (5, 40), (5,)]),
    "linear 3-D": (lambda lib, F, x, w: F.linear(x, w), [(2, 6, 40), (5, 40)]),
    "conv1d": (lambda lib, F, x, w, b: F.conv1d(x, w, b, padding=1), [(2, 8, 9), (4, 8, 3), (4,)]),
    "conv2d": (
        lambda lib, F, x, w, b: F.conv2d(x, w, b, stride=2),
        [(2, 4, 7, 7), (3, 4, 3, 3), (3,)],
    ),
    "conv_transpose2d": (
        lambda lib, F, x, w, b: F.conv_transpose2d(x, w, b, stride=2),
        [(2, 4, 4, 4), (4, 3, 3, 3), (3,)],
    ),
    "prelu": (lambda lib, F, x, w: F.prelu(x, w), [(4, 3, 5), (3,)]),
    "einsum": (lambda lib, F, a, b: lib.einsum("bij,bjk->bik", a, b), [(3, 6, 40), (3, 40, 5)]),
    "tensordot": (lambda lib, F, a, b: lib.tensordot(a, b, 1), [(6, 40), (40, 5)]),
    "vecdot": (lambda lib, F, a, b: lib.linalg.vecdot(a, b), [(6, 40), (6, 40)]),
}


@pytest.mark.parametrize("name", sorted(_LOWER))
def test_listed_products_compute_in_bfloat16_as_torch_bit_for_bit(name):
    fn, shapes = _LOWER[name]
    rng = np.random.default_rng(0)
    ins = [_pair(_exact(rng, *s)) for s in shapes]
    with staged.autocast("cpu"):
        ours = fn(staged, SF, *(s for s, _ in ins))
    with torch.autocast("cpu"):
        theirs = fn(torch, TF, *(t for _, t in ins))
    assert _name(theirs) == "bfloat16"
    _same(ours, theirs)


def test_float16_autocast_and_attention():
    rng = np.random.default_rng(1)
    (a, ta), (b, tb) = _pair(_exact(rng, 6, 40)), _pair(_exact(rng, 40, 5))
    with staged.autocast("cpu", dtype=staged.float16):
        ours = a @ b
    with torch.autocast("cpu", dtype=torch.float16):
        theirs = ta @ tb
    _same(ours, theirs)
    # torch's fused CPU attention never rounds the weights: bfloat16's rounding apart
    (q, tq), (k, tk) = (_pair(rng.standard_normal((2, 2, 5, 8)).astype(np.float32)) for _ in "qk")
    with staged.autocast("cpu"):
        ours = SF.scaled_dot_product_attention(q, k, k, is_causal=True)
    with torch.autocast("cpu"):
        theirs = TF.scaled_dot_product_attention(tq, tk, tk, is_causal=True)
    _same(ours, theirs, rtol=2**-7, atol=2**-7)


def test_float32_ops_upcast_their_half_operands():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    y = rng.integers(0, 5, 6)

    def run(lib, F):
        h, t = lib.tensor(x).bfloat16(), lib.tensor(y)
        return [
            F.cross_entropy(h, t),
            F.mse_loss(h, lib.tensor(x)),
            F.nll_loss(h, t),
            h.prod(0),
            lib.cdist(h, h),
            F.pad(h[None], (1, 1), mode="reflect"),
            F.pad(h[None], (1, 1)),  # constant padding: not on the list
            lib.linalg.inv(h[:5] + 4 * lib.eye(5)),
        ]

    with staged.autocast("cpu"):
        ours = run(staged, SF)
    with torch.autocast("cpu"):
        theirs = run(torch, TF)
    for o, t in zip(ours, theirs, strict=True):
        _same(o, t, rtol=1e-5, atol=1e-6)


def test_promote_ops_take_the_widest_operand_type():
    def run(lib, *dtypes):
        parts = [lib.ones(2, dtype=getattr(lib, d)) for d in dtypes]
        return lib.cat(parts), lib.stack(parts)

    for dtypes in [("bfloat16", "float32"), ("bfloat16", "float64"), ("bfloat16", "int64")]:
        with staged.autocast("cpu"):
            ours = run(staged, *dtypes)
        with torch.autocast("cpu"):
            theirs = run(torch, *dtypes)
        for o, t in zip(ours, theirs):
            _same(o, t)
    with torch.autocast("cpu"), pytest.raises(RuntimeError) as theirs:
        run(torch, "float16", "bfloat16")
    with staged.autocast("cpu"), pytest.raises(RuntimeError) as ours:
        run(staged, "float16", "bfloat16")
    assert str(theirs.value) in message(ours.value)


def test_other_ops_and_operands_keep_their_types():
    rng = np.random.default_rng(3)
    (a, ta), (v, tv) = (
        _pair(rng.standard_normal((4, 6)).astype(np.float32)),
        _pair(rng.standard_normal(6).astype(np.float32)),
    )

    def run(lib, F, a, v):
        return [
            a + 1,
            F.relu(a).softmax(-1),
            lib.einsum("i,j->ij", v, v),  # no summed label: torch multiplies
            lib.tensordot(v, v, 1),  # a full contraction: torch sums products
            lib.inner(v, v),
            F.adaptive_avg_pool1d(a[None], 4),  # torch's own kernel: no products cast
            a.double() @ a.double().T,  # float64 is never cast
            a.long() @ a.long().T,
            a.clone().addmm_(a[:, :4], a[:4]),  # in-place forms are not on the lists
        ]

    with staged.autocast("cpu"):
        ours = run(staged, SF, a, v)
    with torch.autocast("cpu"):
        theirs = run(torch, TF, ta, tv)
    for o, t in zip(ours, theirs, strict=True):
        _same(o, t, rtol=1e-6, atol=1e-6)


# --- training ---------------------------------------------------------------------------
def _mlp(nn):
    return nn.Sequential(
        nn.Linear(12, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.GELU(),
        nn.LayerNorm(32),
        nn.Linear(32, 5),
    )


def _cnn(nn):
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(6 * 4 * 4, 5),
    )


@pytest.mark.parametrize("make, shape", [(_mlp, (16, 12)), (_cnn, (4, 3, 8, 8))])
def test_training_steps_under_autocast_match_torch(make, shape):
    torch.manual_seed(0)
    theirs = make(torch.nn)
    ours = make(staged.nn)
    ours.load_state_dict({k: staged.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(4)
    (x, tx), (y, ty) = (
        _pair(rng.standard_normal(shape).astype(np.float32)),
        _pair(rng.integers(0, 5, shape[0])),
    )
    opts = staged.optim.SGD(ours.parameters(), lr=0.1), torch.optim.SGD(theirs.parameters(), lr=0.1)
    for _ in range(2):
        losses = []
        for lib, model, opt, xb, yb in (
            (staged, ours, opts[0], x, y),
            (torch, theirs, opts[1], tx, ty),
        ):
            with lib.autocast("cpu"):
                out = model(xb)
                loss = lib.nn.functional.cross_entropy(out, yb)
            assert _name(out) == "bfloat16" and _name(loss) == "float32"
            opt.zero_grad()
            loss.backward()
            losses.append(loss)
        _same(losses[0], losses[1], rtol=2**-8)  # from bfloat16 logits
        # float32 gradients through the casts, each a sum of bfloat16 products (rounded at
        # 2^-8); the model's largest gradient sets the scale (the conv bias before
        # BatchNorm has a gradient of rounding noise only)
        scale = max(np.abs(_np(q.grad)).max() for q in theirs.parameters())
        for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
            _same(p.grad, q.grad, atol=2**-6 * scale)
        for opt in opts:
            opt.step()


def test_the_weight_cache_reuses_a_cast_per_region():
    rng = np.random.default_rng(5)
    (w, tw) = _pair(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    (x, tx) = _pair(rng.standard_normal((2, 3)).astype(np.float32))

    def run(lib, F, x, w, cache):
        with lib.autocast("cpu", cache_enabled=cache):
            assert lib.is_autocast_cache_enabled() is cache
            out = F.linear(x, w) * F.linear(x * 2, w)
        out.float().sum().backward()
        return out

    for cache in (True, False):
        w.grad = tw.grad = None
        _same(run(staged, SF, x, w, cache), run(torch, TF, tx, tw, cache))
        _same(w.grad, tw.grad, rtol=2**-7)
    with staged.autocast("cpu"):
        SF.linear(x, w)
        cast = ac._tls.cache[id(w)][1]
        SF.linear(x, w)
        assert len(ac._tls.cache) == 1 and ac._tls.cache[id(w)][1] is cast
        with staged.no_grad():  # a cast made without a graph is not reused with one
            SF.linear(x, w)
        assert SF.linear(x, w).requires_grad
    assert not ac._tls.cache  # dropped when the outermost region exits


# --- the state --------------------------------------------------------------------------
def test_nesting_disabling_and_the_state_functions():
    for lib in (staged, torch):
        assert not lib.is_autocast_enabled("cpu") and lib.get_autocast_dtype("cpu") == lib.bfloat16
        with lib.autocast("cpu"):
            assert lib.is_autocast_enabled("cpu") and not lib.is_autocast_enabled("cuda")
            with lib.autocast("cpu", enabled=False):
                assert not lib.is_autocast_enabled("cpu")
                assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float32
            with lib.autocast("cpu", dtype=lib.float16):
                assert lib.get_autocast_dtype("cpu") == lib.float16
                assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float16
            assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.bfloat16
        with pytest.raises(KeyError), lib.autocast("cpu"):
            raise KeyError("restored on the way out")
        assert not lib.is_autocast_enabled("cpu") and lib.get_autocast_dtype("cpu") == lib.bfloat16
        assert lib.get_autocast_dtype("cuda") == lib.float16 and lib.is_autocast_cache_enabled()


def test_decorator_form_and_threads():
    for lib in (staged, torch):

        @lib.autocast("cpu")
        def forward(a):
            """Runs under autocast."""
            return a @ a, lib.is_autocast_enabled("cpu")

        out, on = forward(lib.ones(2, 2))
        assert out.dtype == lib.bfloat16 and on and forward.__doc__ == "Runs under autocast."
        with pytest.raises(TypeError, match="requires a callable, but got int"):
            lib.autocast("cpu")(3)
        seen = []
        with lib.autocast("cpu"):  # per thread, as torch's
            t = threading.Thread(
                target=lambda: seen.append((lib.ones(2, 2) @ lib.ones(2, 2)).dtype)
            )
            t.start()
            t.join()
        assert seen == [lib.float32]


def _warned(fn) -> list:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = fn()
    return out, [(x.category, str(x.message)) for x in w]


def test_cuda_and_unsupported_dtypes_warn_and_disable_as_torch():
    cases = [
        lambda lib: lib.autocast("cuda"),
        lambda lib: lib.autocast("cpu", dtype=lib.float32),
        lambda lib: lib.autocast("cpu", dtype=lib.float64),
        lambda lib: lib.cuda.amp.autocast(),
        lambda lib: lib.cpu.amp.autocast(),
    ]
    for case in cases:
        (ours, ours_w), (theirs, theirs_w) = both(lambda lib: _warned(lambda: case(lib)))
        assert ours_w == theirs_w and ours._enabled == theirs._enabled
        assert str(ours.fast_dtype).replace("staged", "torch") == str(theirs.fast_dtype)
        with ours, theirs:
            assert _name(staged.ones(1, 1) @ staged.ones(1, 1)) == _name(
                torch.ones(1, 1) @ torch.ones(1, 1)
            )


def test_bad_device_types_raise_as_torch():
    for arg in ("gpu", 3, "meta"):
        with pytest.raises(Exception) as theirs:
            torch.autocast(arg)
        with pytest.raises(type(theirs.value)) as ours:
            staged.autocast(arg)
        assert message(ours.value) == str(theirs.value).replace("torch.", "staged.")
    for lib in (staged, torch):
        assert lib.amp.is_autocast_available("cpu") and not lib.amp.is_autocast_available("meta")


def test_deprecated_per_device_functions_warn_as_torch():
    for name in ("is_autocast_cpu_enabled", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype"):
        (ours, ours_w), (theirs, theirs_w) = both(lambda lib: _warned(getattr(lib, name)))
        assert str(ours).replace("staged", "torch") == str(theirs)
        assert ours_w[0][0] is DeprecationWarning and theirs_w[0][1].startswith(ours_w[0][1])


def test_custom_function_forward_and_backward_under_autocast():
    def run(lib):
        seen = []

        class Square(lib.autograd.Function):
            @staticmethod
            @lib.amp.custom_fwd(device_type="cpu", cast_inputs=lib.float32)
            def forward(ctx, x):
                seen.append((x.dtype, lib.is_autocast_enabled("cpu")))
                ctx.save_for_backward(x)
                return x @ x

            @staticmethod
            @lib.amp.custom_bwd(device_type="cpu")
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                seen.append(lib.is_autocast_enabled("cpu"))
                return g @ x.T + x.T @ g

        x = lib.full((2, 2), 1.5, dtype=lib.bfloat16, requires_grad=True)
        with lib.autocast("cpu"):
            y = Square.apply(x)
        y.sum().backward()
        return y, x.grad, [str(v).replace("torch.", "staged.") for v in seen]

    (y, g, seen), (ty, tg, tseen) = both(run)
    _same(y, ty)
    _same(g, tg)
    assert seen == tseen == ["(staged.float32, False)", "False"]


def test_every_listed_name_is_hooked():
    def public(name):
        space, _, leaf = name.rpartition(".")
        homes = [getattr(staged, space)] if space else [staged, SF, staged.Tensor]
        return [getattr(h, leaf) for h in homes if hasattr(h, leaf)]

    def hooked(fn) -> bool:  # an autocast wrapper, or one around it (staged.mm's sparse form)
        while fn.__code__.co_filename != ac.__file__:
            fn = getattr(fn, "__wrapped__", None)
            if fn is None:
                return False
        return fn.__code__.co_name == "call"

    for name in ac.POLICY:
        found = public(name)
        assert found and all(hooked(fn) for fn in found), (name, found)
    assert hooked(staged.Tensor.__matmul__)


# --- compiled steps ---------------------------------------------------------------------
def test_a_compiled_step_under_autocast_gives_eager_numbers():
    def make():
        staged.manual_seed(0)
        model = _mlp(staged.nn)
        return model, staged.optim.SGD(model.parameters(), lr=0.1)

    def step_of(model, opt):
        def step(x, y):
            with staged.autocast("cpu"):
                out = model(x)
                loss = SF.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.detach(), out.detach()

        return step

    x, y = staged.randn(8, 12), staged.randint(0, 5, (8,))
    eager_model, eager_opt = make()
    model, opt = make()
    eager, compiled = step_of(eager_model, eager_opt), staged.compile(step_of(model, opt))
    for _ in range(2):
        (loss, out), (closs, cout) = eager(x, y), compiled(x, y)
        _same(cout, out)
        _same(closs, loss, rtol=1e-6)
        for p, q in zip(model.parameters(), eager_model.parameters()):
            _same(p, q, atol=1e-6)  # float32 sums of the backward in another order
    assert compiled.traces == 2  # the second call's .grad fields exist: one re-trace

    def forward(x):
        return (model(x) @ staged.ones(5, 2)).detach()

    f = staged.compile(forward)
    with staged.autocast("cpu"):
        assert f(x).dtype is staged.bfloat16
    assert f(x).dtype is staged.float32
    assert f.last_retrace_reason == "autocast: staged.bfloat16 -> disabled"
    with staged.autocast("cpu"):
        _same(f(x), forward(x))
    assert f.traces == 2


# --- GradScaler ---------------------------------------------------------------------------
def test_grad_scaler_with_autocast_steps_as_torch():
    torch.manual_seed(1)
    theirs = torch.nn.Linear(6, 3)
    ours = staged.nn.Linear(6, 3)
    ours.load_state_dict({k: staged.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    rng = np.random.default_rng(6)
    x, tx = _pair(rng.standard_normal((5, 6)).astype(np.float32))
    for lib, model, xb in ((staged, ours, x), (torch, theirs, tx)):
        opt = lib.optim.SGD(model.parameters(), lr=0.5)
        scaler = lib.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
        for _ in range(2):
            with lib.autocast("cpu"):
                loss = model(xb).float().pow(2).mean()
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        assert scaler.get_scale() == 4096.0
    for p, q in zip(ours.parameters(), theirs.parameters()):
        _same(p, q, atol=1e-3)


# --- half precision outside autocast ------------------------------------------------------
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_products_accumulate_in_float32_and_round_once(dtype):
    rng = np.random.default_rng(7)
    shapes = [(6, 64), (64, 5), (5, 64), (5,), (2, 3, 6, 6), (4, 3, 3, 3)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]

    def run(lib, F):
        a, b, w, bias, x, k = (lib.tensor(v).to(getattr(lib, dtype)) for v in arrays)
        return [a @ b, F.linear(a, w, bias), lib.addmm(bias, a, b), F.conv2d(x, k, bias[:4])]

    ours, theirs = run(staged, SF), run(torch, TF)
    for o, t in zip(ours, theirs):
        ulp = 2.0**-7 if dtype == "bfloat16" else 2.0**-10  # one rounding, both sides
        _same(o, t, rtol=ulp)
