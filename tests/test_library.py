"""``staged.library`` (torch.library) against torch 2.13: custom_op with register_fake and
register_autograd (transformers' import-time registrations), schemas inferred from type
hints, ``Library`` define/impl called through ``ops.<ns>.<name>``, the errors, version
bumps of mutated args, and a custom op in a compiled training step."""

import warnings
from typing import Optional

import numpy as np
import pytest
import torch

import staged
import staged.library
from staged._custom_ops import ops as staged_ops

LIBS = (torch, staged)


def _ops(lib):
    return torch.ops if lib is torch else staged_ops


def _both(fn):
    """``fn(lib)`` for torch and staged."""
    return [fn(lib) for lib in LIBS]


def _np(t):
    return None if t is None else t.detach().numpy()


def _raises(fn, exc=Exception) -> tuple[type, str]:
    with pytest.raises(exc) as info:
        fn()
    return type(info.value), str(info.value)


# ---- transformers' registrations ------------------------------------------------------------


def _grouped_mm(lib, ns):
    """transformers' ``grouped_mm_fallback``: rows ``offs[g-1]:offs[g]`` of ``input`` times
    ``weight[g]``, registered as transformers does at import."""

    def _fn(input, weight, offs):
        out, start = [], 0
        for g, end in enumerate(offs.tolist()):
            out.append(input[start:end] @ weight[g])
            start = end
        return lib.cat(out)

    def _fake(input, weight, offs):
        return input.new_empty(input.shape[0], weight.shape[-1])

    def _setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def _backward(ctx, grad):
        input, weight, offs = ctx.saved_tensors
        gi, gw, start = [], [], 0
        for g, end in enumerate(offs.tolist()):
            gi.append(grad[start:end] @ weight[g].T)
            gw.append(input[start:end].T @ grad[start:end])
            start = end
        return lib.cat(gi), lib.stack(gw), None

    name = f"{ns}::grouped_mm_fallback"
    schema = "(Tensor input, Tensor weight, Tensor offs) -> Tensor"
    op = lib.library.custom_op(name, _fn, mutates_args=(), schema=schema)
    lib.library.register_fake(name, _fake)
    lib.library.register_autograd(name, _backward, setup_context=_setup_context)
    return op


def test_transformers_grouped_mm_forward_and_gradients_through_the_registered_backward():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((7, 4)), rng.standard_normal((3, 4, 5))
    offs = np.array([2, 2, 7])

    def run(lib):
        op = _grouped_mm(lib, "tlib_tf")
        xi = lib.tensor(x, requires_grad=True)
        wi = lib.tensor(w, requires_grad=True)
        out = _ops(lib).tlib_tf.grouped_mm_fallback.default(xi, wi, lib.tensor(offs))
        (out * lib.tensor(x[:, :1])).sum().backward()
        assert _np(op(xi, wi, lib.tensor(offs))).tolist() == _np(out).tolist()
        return _np(out), _np(xi.grad), _np(wi.grad), out.grad_fn.name()

    ours, theirs = _both(run)[::-1]
    for a, b in zip(ours[:3], theirs[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert (
        ours[3] == theirs[3] == "GeneratedBackwardFor_tlib_tf_grouped_mm_fallback_defaultBackward"
    )


def _sparse_atten(lib):
    """The decorator form, as transformers' ``transformers_msa::sparse_atten``, with int,
    float, bool, list[int] and Optional[Tensor] arguments, differentiated."""
    Tensor = lib.Tensor

    @lib.library.custom_op("tlib_msa::sparse_atten", mutates_args=())
    def f(
        q: Tensor,
        k: Tensor,
        topk: int,
        scale: float = 0.5,
        causal: bool = False,
        dims: Optional[list[int]] = None,  # noqa: UP045
        bias: Optional[Tensor] = None,  # noqa: UP045
    ) -> Tensor:
        s = (q @ k.T) * scale
        if bias is not None:
            s = s + bias
        if causal:
            s = s.tril()
        return s[:, :topk].sum(dims or [1])

    def setup(ctx, inputs, output):
        q, k, topk, scale, causal, dims, bias = inputs
        ctx.save_for_backward(q, k)
        ctx.args = (topk, scale, causal, dims, bias is not None)

    def backward(ctx, g):
        q, k = ctx.saved_tensors
        topk, scale, causal, dims, has_bias = ctx.args
        f.seen.append(ctx.needs_input_grad)  # torch's: the args passed (not defaulted) only
        gs = g[:, None].expand(q.shape[0], topk)
        gs = lib.cat([gs, lib.zeros(q.shape[0], k.shape[0] - topk, dtype=g.dtype)], 1)
        gs = gs.tril() if causal else gs
        return gs @ k * scale, gs.T @ q * scale, None, None, None, None, gs if has_bias else None

    f.register_autograd(backward, setup_context=setup)
    f.seen = []
    return f


def test_decorator_form_schema_values_and_gradients_match_torch():
    rng = np.random.default_rng(1)
    q, k, b = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((4, 5))

    def run(lib):
        f = _sparse_atten(lib)
        out = []
        for kwargs in ({}, {"scale": 2.0, "causal": True, "dims": [1]}, {"bias": True}):
            qi = lib.tensor(q, requires_grad=True)
            ki = lib.tensor(k, requires_grad=True)
            bi = lib.tensor(b, requires_grad=True) if kwargs.get("bias") else None
            kwargs = {**kwargs, "bias": bi}
            y = _ops(lib).tlib_msa.sparse_atten(qi, ki, 3, **kwargs)
            y.pow(2).sum().backward()
            out.append((_np(y), _np(qi.grad), _np(ki.grad), None if bi is None else _np(bi.grad)))
        return f._schema, str(f._opoverload._schema), out, f.seen

    ours, theirs = _both(run)[::-1]
    want = (
        "(Tensor q, Tensor k, SymInt topk, float scale=0.5, bool causal=False, "
        "SymInt[]? dims=None, Tensor? bias=None) -> Tensor"
    )
    assert ours[0] == theirs[0] == want
    assert ours[1] == "tlib_msa::sparse_atten" + want
    assert ours[3] == theirs[3] and len(ours[3][0]) == 3
    for mine, real in zip(ours[2], theirs[2]):
        for a, b in zip(mine, real):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _hinted(lib):
    """Functions whose inferred schemas are compared with torch's."""
    T = lib.Tensor

    def a(x: T, n: int, s: float, b: bool, ls: list[int], o: Optional[T]) -> T: ...  # noqa: UP045

    def b(xs: list[T], ws: list[float], *, k: int = 3, d: list[int] | None = None) -> list[T]: ...

    def c(x: T, y: T, dt: lib.dtype = lib.float32, e: str = "hi") -> tuple[T, int, float, bool]: ...

    def d(x: T, y: T) -> None: ...

    def e(x: T, m: list[Optional[T]], i: "int | None" = None) -> tuple[T]: ...  # noqa: UP045

    return [(a, ()), (b, ()), (c, ["x"]), (d, "unknown"), (e, ["m"])]


def test_infer_schema_strings_equal_torchs():
    ours, theirs = (
        [lib.library.infer_schema(fn, mutates_args=m) for fn, m in _hinted(lib)]
        for lib in (staged, torch)
    )
    assert list(ours) == list(theirs)
    fn, m = _hinted(staged)[0]
    assert staged.library.infer_schema(fn, mutates_args=m, op_name="foo").startswith("foo(Tensor x")


def _bad_hints(lib):
    T = lib.Tensor

    def untyped(x): ...

    def no_return(x: T): ...

    def tupled(x: T, y: tuple[int, int]) -> T: ...

    def dicted(x: T, y: dict) -> T: ...

    def varargs(*x: T) -> T: ...

    def returns_dict(x: T) -> dict: ...

    def bad_default(x: T, y: list[int] = ()) -> T: ...  # type: ignore[assignment]

    return [
        (untyped, ()),
        (no_return, ()),
        (tupled, ()),
        (dicted, ()),
        (varargs, ()),
        (returns_dict, ()),
        (bad_default, ()),
        (dicted, "foo"),
        (tupled, ["y"]),
        (untyped, ["z"]),
    ]


def test_infer_schema_errors_as_torchs():
    for (fn, m), (tfn, tm) in zip(_bad_hints(staged), _bad_hints(torch)):
        kind, ours = _raises(lambda: staged.library.infer_schema(fn, mutates_args=m))
        tkind, theirs = _raises(lambda: torch.library.infer_schema(tfn, mutates_args=tm))
        assert kind is tkind is ValueError
        # torch names its own types where staged names staged's
        cut = ("The valid types", "Got func")
        short = [s.split(cut[0])[0].split(cut[1])[0] for s in (ours, theirs)]
        assert short[0] == short[1], (ours, theirs)


# ---- Library.define / impl ------------------------------------------------------------------


def test_library_define_and_impl_called_through_ops():
    x = np.array([0.5, -1.0, 2.0])

    def run(lib):
        L = lib.library.Library("tlib_def", "DEF")
        L.define("scale(Tensor x, float a=2.0) -> Tensor")
        L.impl("scale", lambda x, a=2.0: x * a, "CPU")
        L.define("sin2(Tensor x) -> Tensor")
        L.impl("sin2", lambda x: x.sin() * 2, "CompositeImplicitAutograd")

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * x.exp() * 10  # not exp's: the registered kernel is used

        L.define("myexp(Tensor x) -> Tensor")
        L.impl("myexp", lambda x: x.exp(), "CPU")
        L.impl("myexp", F.apply, "Autograd")
        ns = _ops(lib).tlib_def
        xi = lib.tensor(x, requires_grad=True)
        values = [
            ns.scale(xi).detach(),
            ns.scale.default(xi, 3.0).detach(),
            ns.scale(xi, a=4.0).detach(),
        ]
        y = ns.sin2(xi) + ns.myexp(xi)
        y.sum().backward()
        errors = [
            _raises(lambda: L.define("scale(Tensor x) -> Tensor")),
            _raises(lambda: lib.library.Library("tlib_def", "DEF")),
            _raises(lambda: lib.library.Library("tlib_def", "FOO")),
            _raises(lambda: ns.scale(2.0)),
            _raises(lambda: ns.scale(xi, 1.0, 2)),
            _raises(lambda: ns.scale(xi, b=1)),
            _raises(lambda: ns.scale()),
            _raises(lambda: ns.nothing),
            _raises(lambda: ns.scale.nothing),
        ]
        reprs = (
            repr(ns.scale),
            repr(ns.scale.default),
            str(ns.scale.default),
            ns.scale.overloads(),
        )
        L._destroy()
        return [_np(v) for v in values], _np(xi.grad), errors, reprs, _raises(lambda: ns.scale)

    ours, theirs = _both(run)[::-1]
    for a, b in zip(ours[0], theirs[0]):
        np.testing.assert_allclose(a, b, rtol=1e-15)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)
    for (kind, msg), (tkind, tmsg) in zip(ours[2], theirs[2]):
        assert kind is tkind
        # torch prints the schema's float default as 2. and adds C++ cast details
        msg, tmsg = (m.replace("2.0)", "2.)").split("\nCast error")[0] for m in (msg, tmsg))
        msg, tmsg = (m.split("registered at")[0] for m in (msg, tmsg))
        assert msg == tmsg
    assert ours[3] == theirs[3]
    assert ours[4] == theirs[4]  # gone with its Library


def test_module_level_define_impl_and_kernel_priority():
    def run(lib):
        lib.library.define("tlib_mod::q", "(Tensor x) -> Tensor")
        lib.library.impl("tlib_mod::q", "default", lambda x: x * 4)
        first = _ops(lib).tlib_mod.q(lib.ones(1)).item()
        lib.library.impl("tlib_mod::q", "cpu", lambda x: x * 3)  # CPU wins over default
        errors = [
            _raises(lambda: lib.library.define("tlib_mod::q", "(Tensor x) -> Tensor")),
            _raises(lambda: lib.library.define("tlib_mod::q2", "q2(Tensor x) -> Tensor")),
            _raises(lambda: lib.library.define("nocolons", "(Tensor x) -> Tensor")),
        ]
        return first, _ops(lib).tlib_mod.q(lib.ones(1)).item(), errors

    ours, theirs = _both(run)[::-1]
    assert ours[:2] == theirs[:2] == (4.0, 3.0)
    for (kind, msg), (tkind, tmsg) in zip(ours[2], theirs[2]):
        assert kind is tkind and msg.split("registered at")[0] == tmsg.split("registered at")[0]


def test_kernel_without_autograd_warns_at_backward_as_torchs_fallback():
    def run(lib):
        L = lib.library.Library("tlib_fb", "DEF")
        L.define("double(Tensor x) -> Tensor")
        L.impl("double", lambda x: x * 2, "CPU")
        L.define("opaque(Tensor x) -> Tensor")
        L.impl("opaque", lambda x: lib.from_numpy(np.sin(x.detach().numpy())), "CPU")
        out = []
        for name in ("double", "opaque"):
            x = lib.ones(2, requires_grad=True)
            y = getattr(_ops(lib).tlib_fb, name)(x)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                y.sum().backward()
            out.append(
                (y.requires_grad, _np(x.grad), [str(m.message).split(" (Triggered")[0] for m in w])
            )
        L._destroy()
        return out

    ours, theirs = _both(run)[::-1]
    for (req, g, w), (treq, tg, tw) in zip(ours, theirs):
        assert req == treq and w == tw and len(w) == 1
        assert (g is None) == (tg is None)
        if g is not None:
            np.testing.assert_array_equal(g, tg)


# ---- semantics and errors of custom_op ------------------------------------------------------


def test_no_autograd_formula_errors_at_backward_not_at_the_call():
    def run(lib):
        @lib.library.custom_op("tlib_nog::f", mutates_args=())
        def f(x: lib.Tensor) -> lib.Tensor:
            return x * 2

        x = lib.ones(2, requires_grad=True)
        y = f(x)
        with lib.no_grad():
            plain = f(x)
        return y.requires_grad, plain.requires_grad, _raises(lambda: y.sum().backward())

    assert _both(run)[0] == _both(run)[1]
    assert _both(run)[1][2] == (
        RuntimeError,
        "Trying to backward through tlib_nog.f.default but no autograd formula was registered. "
        "Please use register_autograd to add one.",
    )


def _aliasing(lib):
    T = lib.Tensor

    def same(x: T) -> T:
        return x

    def view(x: T) -> T:
        return x[:1]

    def detached(x: T) -> T:
        return x.detach()

    def twice(x: T) -> tuple[T, T]:
        y = x + 1
        return y, y

    return [
        lib.library.custom_op(f"tlib_alias::{f.__name__}", f, mutates_args=())
        for f in (same, view, detached, twice)
    ]


def test_returning_an_input_or_an_alias_raises_as_torch():
    for op, top in zip(_aliasing(staged), _aliasing(torch)):
        kind, msg = _raises(lambda: op(staged.ones(2)))
        tkind, tmsg = _raises(lambda: top(torch.ones(2)))
        assert kind is tkind is RuntimeError
        tail = "The output of this custom operator (1) must not also be an input"
        assert tail in msg and msg.split("):")[1] == tmsg.split("):")[1]
        assert msg.startswith(f"{op._name} (with implementation in <module '{__name__}'")


def test_mutates_args_bump_versions_as_torch():
    def run(lib):
        T = lib.Tensor

        @lib.library.custom_op("tlib_mut::inplace", mutates_args={"x"})
        def inplace(x: T, y: T) -> None:
            x.add_(y)
            x.mul_(2)

        @lib.library.custom_op("tlib_mut::raw", mutates_args=["x"])
        def raw(x: T) -> None:
            x.detach().numpy()[:] = 5

        @lib.library.custom_op("tlib_mut::unlisted", mutates_args=())
        def unlisted(x: T) -> T:
            x.add_(1)
            return x + 0

        a, b, c, d = lib.zeros(2), lib.ones(2), lib.zeros(2), lib.zeros(2)
        inplace(a, b)
        raw(c)
        leaf = lib.zeros(2, requires_grad=True)
        inplace(leaf, b)  # below autograd: no leaf check, as torch's
        unlisted(d)
        state = [(t._version, _np(t).tolist()) for t in (a, b, c, d, leaf)]
        errors = [
            _raises(lambda: inplace.register_autograd(lambda ctx, g: g)),
            _raises(
                lambda: lib.library.custom_op(
                    "tlib_mut::bad",
                    lambda x: x + 1,
                    mutates_args={"x"},
                    schema="(Tensor x) -> Tensor",
                )
            ),
        ]
        return state, errors, inplace._schema

    ours, theirs = _both(run)[::-1]
    assert ours[0] == theirs[0]
    assert ours[0][0][0] == 3 and ours[0][2][0] == 1
    assert ours[1] == theirs[1]
    assert ours[2] == theirs[2] == "(Tensor(a0!) x, Tensor y) -> ()"


def test_registration_errors_and_redefinition_as_torch():
    def run(lib):
        T = lib.Tensor

        def fn(x: T) -> T:
            return x + 1

        def fn2(x: T) -> T:
            return x + 2

        lib.library.custom_op("tlib_reg::f", fn, mutates_args=())
        replaced = lib.library.custom_op("tlib_reg::f", fn2, mutates_args=())  # allowed: replaces
        value = _ops(lib).tlib_reg.f(lib.zeros(1)).item()
        lin = lib.library.custom_op(
            "tlib_reg::lin",
            lambda x, k: (x * k, x.sum()),
            mutates_args=(),
            schema="(Tensor x, int k) -> (Tensor, Tensor)",
        )
        lin.register_autograd(lambda ctx, g, g2: g)
        x = lib.ones(2, requires_grad=True)
        lin2 = lib.library.custom_op(
            "tlib_reg::lin2",
            lambda x, k: x * k,
            mutates_args=(),
            schema="(Tensor x, int k) -> Tensor",
        )
        lin2.register_autograd(lambda ctx, g: (None, lib.ones(1)))
        errors = [
            _raises(lambda: lib.library.custom_op("nocolon", fn, mutates_args=())),
            _raises(lambda: lib.library.custom_op("a::b::c", fn, mutates_args=())),
            _raises(lambda: lib.library.register_fake("tlib_reg::missing", fn)),
            _raises(lambda: lib.library.register_fake(3, fn)),
            _raises(lambda: lin(x, 2)[0].sum().backward()),
            _raises(lambda: lin2(x, 2).sum().backward()),
        ]
        return value, repr(replaced), errors

    ours, theirs = _both(run)[::-1]
    assert ours == theirs
    assert ours[2][4][1] == (
        "function GeneratedBackwardFor_tlib_reg_lin_defaultBackward returned an incorrect "
        "number of gradients (expected 3, got 2)"
    )


def test_register_kernel_set_kernel_enabled_and_keyword_only_setup_context():
    def run(lib):
        T = lib.Tensor

        @lib.library.custom_op("tlib_k::k", mutates_args=())
        def k(x: T, *, val: float = 1.0) -> T:
            return x + val

        @k.register_kernel("cpu")
        def _(x, *, val=1.0):
            return x + 10 * val

        def setup(ctx, inputs, keyword_only_inputs, output):
            ctx.val = keyword_only_inputs["val"]

        k.register_autograd(lambda ctx, g: g * ctx.val, setup_context=setup)
        x = lib.zeros(1, requires_grad=True)
        y = k(x, val=3.0)
        y.backward()
        with k.set_kernel_enabled("cpu", False):
            disabled = k(lib.zeros(1)).item()
        return y.item(), x.grad.item(), disabled, k(lib.zeros(1)).item()

    assert _both(run)[0] == _both(run)[1] == (30.0, 3.0, 1.0, 10.0)


def test_lists_of_tensors_get_gradients():
    def run(lib):
        @lib.library.custom_op("tlib_tl::wsum", mutates_args=())
        def wsum(xs: list[lib.Tensor], ws: list[float]) -> lib.Tensor:
            return sum(x * w for x, w in zip(xs, ws))

        def setup(ctx, inputs, output):
            ctx.ws = inputs[1]

        wsum.register_autograd(lambda ctx, g: ([g * w for w in ctx.ws], None), setup_context=setup)
        a = lib.ones(2, requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        wsum([a, b], [2.0, 3.0]).sum().backward()
        return _np(a.grad).tolist(), _np(b.grad).tolist()

    assert _both(run)[0] == _both(run)[1] == ([2.0, 2.0], [3.0, 3.0])


# ---- compiled --------------------------------------------------------------------------------


def _scaled_tanh(lib):
    @lib.library.custom_op("tlib_comp::scaled_tanh", mutates_args=())
    def scaled_tanh(x: lib.Tensor, w: lib.Tensor, scale: float) -> lib.Tensor:
        return (x @ w).tanh() * scale

    def setup(ctx, inputs, output):
        x, w, scale = inputs
        ctx.save_for_backward(x, w, output)
        ctx.scale = scale

    def backward(ctx, g):
        x, w, out = ctx.saved_tensors
        d = g * (ctx.scale - out * out / ctx.scale)
        return d @ w.T, x.T @ d, None

    scaled_tanh.register_autograd(backward, setup_context=setup)
    return scaled_tanh


def test_custom_op_in_a_compiled_training_step():
    rng = np.random.default_rng(2)
    x, w0 = (
        rng.standard_normal((4, 3)).astype(np.float32),
        rng.standard_normal((3, 2)).astype(np.float32),
    )

    def steps(lib, compiled):
        op = _scaled_tanh(lib)
        w = lib.tensor(w0, requires_grad=True)

        def step(xb):
            w.grad = None
            loss = op(xb, w, 1.5).pow(2).sum()
            loss.backward()
            with lib.no_grad():
                w.sub_(0.1 * w.grad)
            return loss.detach()

        f = staged.compile(step) if compiled else step
        return [_np(f(lib.tensor(x * (i + 1)))) for i in range(3)], _np(w)

    compiled, eager, real = steps(staged, True), steps(staged, False), steps(torch, False)
    for ours in (compiled, eager):
        np.testing.assert_allclose(ours[0], real[0], rtol=1e-5)
        np.testing.assert_allclose(ours[1], real[1], rtol=1e-5, atol=1e-6)
