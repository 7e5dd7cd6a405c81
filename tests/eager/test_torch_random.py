"""staged's random streams against torch 2.13's, bit for bit (shared/notes/RNG.md): the same
seed, the same calls in the same order, equal bit patterns (-0.0 and +0.0 differ) for
every random function, alone and interleaved, with the default generator and with
``Generator`` objects, and the default initialisation of layers."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import staged
from staged.eager.random import avx_mathfun, libm
from staged.autodiff.fma import fma32, fma32_plain, fma64
from tests.checks import raises_like_torch

SEEDS = (0, 1, 2**32 + 7, -5, 123456789)
SIZES = (1, 7, 15, 16, 17, 1000, 4097)  # the serial path, the block path and its tail
rng = np.random.default_rng(0)


def bits(t) -> np.ndarray:
    a = t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)
    if a.dtype.kind == "c":
        a = a.view(f"f{a.itemsize // 2}")
    return a.view(f"u{a.itemsize}") if a.dtype.kind == "f" else a


def assert_same(ours, theirs, what=""):
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        a, b = a.detach().numpy(), b.detach().numpy()
        assert a.dtype == b.dtype and a.shape == b.shape, (what, i, a.dtype, b.dtype)
        assert np.array_equal(bits(a), bits(b)), (
            f"{what} #{i}: {(bits(a) != bits(b)).sum()} of {a.size} differ"
        )


def run(calls, seed):
    """``calls(ns)`` after ``ns.manual_seed(seed)``, for staged and for torch."""
    out = []
    for ns in (staged, torch):
        ns.manual_seed(seed)
        out.append(list(calls(ns)))
    return out


def check(calls, what="", seeds=SEEDS):
    for seed in seeds:
        assert_same(*run(calls, seed), f"{what} seed={seed}")


def t(ns, a, dtype):
    return ns.tensor(a, dtype=dtype)


# --- every function, each size, float32 and float64 --------------------------------------
P = rng.random(3 * 4097)
MEAN, STD = rng.standard_normal(4097), rng.random(4097) * 3
CASES = {
    "rand": lambda ns, n, d: [ns.rand(n, dtype=d), ns.rand(2, n, dtype=d)],
    "randn": lambda ns, n, d: [ns.randn(n, dtype=d), ns.randn(n, dtype=d), ns.randn(3, dtype=d)],
    "uniform_": lambda ns, n, d: [
        ns.empty(n, dtype=d).uniform_(-0.3, 1.7),
        ns.empty(n, dtype=d).uniform_(2, 2.5),
        ns.empty(n, dtype=d).uniform_(1e6, 1e6 + 3),
    ],
    "normal_": lambda ns, n, d: [
        ns.empty(n, dtype=d).normal_(0.5, 2.5),
        ns.empty(n, dtype=d).normal_(-1, 0.1),
    ],
    "normal(float, float, size)": lambda ns, n, d: [ns.normal(0.5, 2.5, (n,), dtype=d)],
    "normal(tensor, float)": lambda ns, n, d: [ns.normal(t(ns, MEAN[:n], d), 2.0)],
    "normal(float, tensor)": lambda ns, n, d: [ns.normal(1.5, t(ns, STD[:n], d))],
    "normal(tensor, tensor)": lambda ns, n, d: [ns.normal(t(ns, MEAN[:n], d), t(ns, STD[:n], d))],
    "rand_like, randn_like": lambda ns, n, d: [
        ns.rand_like(ns.zeros(n, dtype=d)),
        ns.randn_like(ns.zeros(n, dtype=d)),
    ],
    "randint": lambda ns, n, d: [
        ns.randint(-5, 10, (n,)),
        ns.randint(2**40, (n,)),
        ns.randint(0, 2**28, (n,)),
        ns.randint(0, 2**28 - 1, (n,)),
        ns.randint(3, 9, (n,), dtype=d),
    ],
    "randint_like": lambda ns, n, d: [
        ns.randint_like(ns.zeros(n, dtype=d), 7),
        ns.randint_like(ns.zeros(n, dtype=ns.int32), -3, 3),
    ],
    "randperm": lambda ns, n, d: [ns.randperm(n), ns.randperm(n, dtype=ns.int32)],
    "random_": lambda ns, n, d: [
        ns.empty(n, dtype=d).random_(),
        ns.empty(n, dtype=d).random_(10),
        ns.empty(n, dtype=d).random_(-3, 7),
        ns.empty(n, dtype=ns.int64).random_(),
        ns.empty(n, dtype=ns.int32).random_(),
        ns.empty(n, dtype=ns.uint8).random_(),
        ns.empty(n, dtype=ns.bool).random_(),
        ns.empty(n, dtype=ns.int64).random_(5, None),
    ],
    "bernoulli": lambda ns, n, d: [
        ns.bernoulli(t(ns, P[:n], d)),
        ns.bernoulli(ns.zeros(n, dtype=d), 0.3),
        ns.empty(n, dtype=d).bernoulli_(0.7),
        ns.empty(n, dtype=d).bernoulli_(t(ns, P[:n], ns.float64)),
        ns.empty(n, dtype=d).bernoulli_(t(ns, P[:n], ns.float32)),
    ],
    "exponential_, geometric_, cauchy_, log_normal_": lambda ns, n, d: [
        ns.empty(n, dtype=d).exponential_(),
        ns.empty(n, dtype=d).exponential_(2.5),
        ns.empty(n, dtype=d).geometric_(0.3),
        ns.empty(n, dtype=d).cauchy_(0.5, 2.0),
        ns.empty(n, dtype=d).log_normal_(),
        ns.empty(n, dtype=d).log_normal_(0.2, 0.5),
    ],
    "multinomial": lambda ns, n, d: [
        ns.multinomial(t(ns, P[:n], d), min(n, 5)),
        ns.multinomial(t(ns, P[:n], d), 9, True),
        ns.multinomial(t(ns, P[: 2 * n].reshape(2, n), d), 1, True),
        ns.multinomial(t(ns, P[: 3 * n].reshape(3, n), d), 4, True),
    ],
    "dropout": lambda ns, n, d: [
        ns.nn.functional.dropout(ns.ones(n, dtype=d) * 3, 0.3),
        ns.nn.Dropout(0.6)(ns.ones(2, n, dtype=d)),
    ],
}


@pytest.mark.parametrize("name", CASES)
def test_each_function_matches_torch(name):
    for dtype in ("float32", "float64"):
        for n in SIZES:
            check(lambda ns: CASES[name](ns, n, getattr(ns, dtype)), f"{name} {dtype} n={n}")


def test_float16_and_complex():
    check(
        lambda ns: (
            [ns.randn(n, dtype=ns.float16) for n in (7, 16, 40)]
            + [ns.empty(n, dtype=ns.float16).exponential_() for n in (5, 300)]
            + [ns.rand(40, dtype=ns.float16), ns.empty(33, dtype=ns.float16).uniform_(-2, 3)]
            + [ns.randn(n, dtype=ns.complex64) for n in (3, 8, 21)]
            + [ns.rand(9, dtype=ns.complex128)]
        )
    )


def test_strided_tensors_fill_in_memory_order():
    """A transposed or sliced tensor is not contiguous: normal_ takes the serial path, and
    every fill walks its memory in order."""

    def calls(ns):
        outs = []
        for n in (2, 5, 17):
            outs += [
                ns.empty(n, 6).t().normal_(),
                ns.empty(6, n, dtype=ns.float64).t().normal_(),
                ns.empty(n, 3).t().uniform_(-1, 1),
                ns.empty(n, 4).t().bernoulli_(0.4),
                ns.empty(n, 4).t().exponential_(),
            ]
        base = ns.zeros(10, 8)
        base[:, ::2].normal_()
        base[1::3].t().uniform_()
        x = ns.ones(5, 33).t()
        return outs + [
            base,
            ns.nn.functional.dropout(x, 0.5),
            ns.randn_like(x),
            ns.rand_like(x, dtype=ns.float64),
            ns.randint_like(x, 3),
        ]

    check(calls)


def test_interleaved_calls_share_one_stream():
    """The cached second normal of the serial path lives across calls and kinds of call."""

    def calls(ns):
        return [
            ns.randn(3),
            ns.rand(5),
            ns.randn(20),
            ns.randint(0, 10, (7,)),
            ns.randperm(9),
            ns.randn(1),
            ns.empty(2, 2).t().normal_(),
            ns.randn(1, dtype=ns.float64),
            ns.normal(2.0, 3.0, (5,)),
            ns.bernoulli(ns.full((6,), 0.5)),
            ns.randn(16),
            ns.empty(3).exponential_(),
            ns.randn(1),
            ns.multinomial(ns.ones(4), 2),
            ns.empty(7).log_normal_(),
            ns.randn(3),
            ns.randperm(300),
        ]

    check(calls)


def test_generator_objects():
    def calls(ns):
        g = ns.Generator().manual_seed(7)
        h = ns.Generator()  # torch's default seed for a new generator
        return [
            ns.randn(5, generator=g),
            ns.randn(5),
            ns.rand(17, generator=h),
            ns.randn(3, generator=g),
            ns.randint(0, 9, (4,), generator=g),
            ns.randperm(12, generator=h),
            ns.empty(20).normal_(generator=g),
            ns.empty(4).uniform_(generator=h),
            ns.bernoulli(ns.full((5,), 0.5), generator=g),
            ns.multinomial(ns.ones(6), 3, generator=h),
            ns.normal(0.0, 1.0, (3,), generator=g),
            ns.empty(6).random_(generator=h),
            ns.empty(2).exponential_(generator=g),
            ns.randn_like(ns.zeros(3, 7).t(), generator=h),
            ns.randn(5),
        ]

    check(calls)


def test_seeds_and_state():
    assert staged.manual_seed(-5) is staged.default_generator
    assert staged.initial_seed() == 2**64 - 5 == torch.Generator().manual_seed(-5).initial_seed()
    s = staged.seed()
    assert s == staged.initial_seed() and 0 <= s < 2**53
    assert staged.Generator().initial_seed() == torch.Generator().initial_seed()
    raises_like_torch(lambda ns: ns.manual_seed(2**64), "Overflow")


def test_get_set_rng_state_replays_and_moves_between_libraries():
    staged.manual_seed(3)
    staged.randn(1)  # leaves a cached normal, part of the state
    state = staged.get_rng_state()
    assert state.dtype is staged.uint8 and state.shape == (5056,)
    first = [staged.randn(1), staged.randn(40), staged.rand(3)]
    staged.set_rng_state(state)
    assert_same([staged.randn(1), staged.randn(40), staged.rand(3)], first)
    torch.set_rng_state(torch.from_numpy(state.numpy()))  # staged's state in torch's layout
    assert_same(first, [torch.randn(1), torch.randn(40), torch.rand(3)])
    staged.set_rng_state(staged.tensor(torch.get_rng_state().numpy()))
    assert_same([staged.randn(1), staged.randperm(50)], [torch.randn(1), torch.randperm(50)])
    g = staged.Generator().manual_seed(9)
    gs = g.get_state()
    a = staged.rand(4, generator=g)
    assert_same([staged.rand(4, generator=g.set_state(gs))], [a])
    raises_like_torch(lambda ns: ns.set_rng_state(ns.zeros(7, dtype=ns.uint8)), "size")


def test_fork_rng_restores_the_default_stream():
    staged.manual_seed(11)
    expected = staged.randn(5)
    staged.manual_seed(11)
    with staged.random.fork_rng():
        staged.randn(100)
    assert_same([staged.randn(5)], [expected])
    with staged.random.fork_rng(enabled=False):
        staged.randn(1)
    assert not np.array_equal(staged.randn(5).numpy(), expected.numpy())


# --- nn.init and the layers' default initialisation ----------------------------------------
def _inits(ns, dtype):
    init, e = ns.nn.init, (lambda *s: ns.empty(*s, dtype=dtype))
    g = ns.Generator().manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kaiming on an empty tensor warns, in both
        return [
            init.uniform_(e(7, 3), -2, 3),
            init.normal_(e(40), 1.0, 0.5),
            init.normal_(e(5), generator=g),
            init.xavier_uniform_(e(30, 17), gain=1.3),
            init.xavier_normal_(e(4, 3, 5)),
            init.kaiming_uniform_(e(33, 8)),
            init.kaiming_uniform_(e(6, 4, 3, 3), a=math.sqrt(5), mode="fan_out"),
            init.kaiming_uniform_(e(0, 3)),
            init.kaiming_normal_(e(20, 9), nonlinearity="relu"),
            init.kaiming_normal_(e(3, 2), generator=g),
            init.uniform_(e(9), generator=g),
            init.trunc_normal_(e(2000), 0.5, 1.0, -1.0, 1.5),
            init.trunc_normal_(e(500), std=0.02),
            init.trunc_normal_(e(300), 0.0, 1.0, 0.5, 0.8),  # the uniform branch
            init.sparse_(e(12, 5), 0.3, std=0.1),
            init.sparse_(e(12, 5), 0.5, generator=g),
            init.eye_(e(3, 4)),
            init.dirac_(e(4, 2, 3, 3), 2),
            init.constant_(e(3), 0.25),
            init.zeros_(e(2)),
            init.ones_(e(2)),
            ns.randn(3),
        ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nn_init_matches_torch(dtype):
    check(lambda ns: _inits(ns, getattr(ns, dtype)), seeds=SEEDS[:3])


def test_orthogonal_draws_torch_normals():
    """orthogonal_ draws torch's normals; its QR runs in NumPy's LAPACK (float64), so Q
    agrees with torch's to rounding, and the stream after it is torch's."""

    def calls(ns):
        return [
            ns.nn.init.orthogonal_(ns.empty(*s), 1.5)
            for s in ((6, 4), (3, 10), (4, 2, 3), (20, 20))
        ] + [ns.randn(5)]

    for seed in SEEDS[:3]:
        ours, theirs = run(calls, seed)
        for a, b in zip(ours[:-1], theirs[:-1]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
        assert_same(ours[-1:], theirs[-1:])


def _layers(ns, dtype):
    nn = ns.nn
    mods = [
        nn.Linear(30, 20, dtype=dtype),
        nn.Conv2d(3, 8, 3, dtype=dtype),
        nn.Conv1d(4, 6, 5, bias=False, dtype=dtype),
        nn.Embedding(10, 7, padding_idx=2, dtype=dtype),
        nn.LayerNorm(12, dtype=dtype),
        nn.MultiheadAttention(16, 4, dtype=dtype),
        nn.Linear(3, 1, dtype=dtype),
        nn.Embedding(3, 2, dtype=dtype),
    ]
    return [p for m in mods for p in m.state_dict().values()] + [ns.randn(2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layer_initialisation_matches_torch(dtype):
    check(lambda ns: _layers(ns, getattr(ns, dtype)))


# --- the pieces ----------------------------------------------------------------------------
def test_fma_is_rounded_once():
    """fma32/fma64 against exact rational arithmetic, halfway cases included."""
    from fractions import Fraction

    a = rng.standard_normal(3000) * 2.0 ** rng.integers(-20, 20, 3000)
    b = rng.standard_normal(3000)
    c = rng.standard_normal(3000) * 2.0 ** rng.integers(-60, 60, 3000)
    c[:1000] = -(a[:1000] * b[:1000])  # cancellation: the product's rounding error shows
    exact = [Fraction(x) * Fraction(y) + Fraction(z) for x, y, z in zip(a, b, c)]
    assert np.array_equal(bits(fma64(a, b, c)), bits(np.array([float(v) for v in exact])))
    # float32: 1 + 2**-11 + 2**-24 is halfway between two floats; c breaks the tie
    x = np.float32(1 + 2**-12)
    tiny = np.array([2.0**-70, -(2.0**-70), 0.0], np.float32)
    got = fma32(np.full(3, x), np.full(3, x), tiny)
    assert list(got - np.float32(1 + 2**-11)) == [2**-23, 0.0, 0.0]
    assert fma32_plain(np.full(3, x), np.full(3, x), tiny)[0] == got[1]  # why fma32 checks


def test_avx_mathfun_needs_no_tie_checks_on_its_inputs():
    """avx_mathfun's fused multiply-adds never sum, in float64, an inexact float32
    halfway point for any input the normal kernel gives (checked for all 2**24 uniforms
    once; here every 251st), so their plain emulation is exact, and so is the in-place
    Horner's rule that stands for it in the polynomials."""
    u = np.arange(0, 2**24, 251, dtype=np.uint32).astype(np.float32) * np.float32(2**-24)

    def kernels():
        return [avx_mathfun.log(1 - u), *avx_mathfun.sincos(np.float32(2 * math.pi) * u)]

    def horner_by(fma):  # Horner's rule through fma(y, x, c)
        def horner(x, coefs):
            y = fma(coefs[0], x, coefs[1])
            for c in coefs[2:]:
                y = fma(y, x, c)
            return y

        return horner

    in_place = avx_mathfun._horner
    results = []
    for fma in (fma32, fma32_plain):
        avx_mathfun.fma32, avx_mathfun._horner = fma, horner_by(fma)
        try:
            results.append(kernels())
        finally:
            avx_mathfun.fma32, avx_mathfun._horner = fma32_plain, in_place
    results.append(kernels())
    for a, b, c in zip(*results):
        assert np.array_equal(bits(a), bits(b)) and np.array_equal(bits(a), bits(c))


def test_libm_is_the_c_librarys():
    x = rng.random(2000)
    for name, arg in (
        ("log", 1 - x),
        ("log1p", -x),
        ("sin", 7 * x),
        ("cos", 7 * x),
        ("tan", 3 * x - 1.5),
        ("exp", 10 * x - 5),
    ):
        want = np.array([getattr(math, name)(v) for v in arg])
        assert np.array_equal(bits(getattr(libm, name)(arg)), bits(want)), name


def test_errors_match_torch():
    raises_like_torch(
        lambda ns: ns.rand(3, dtype=ns.int64), "check_uniform_bounds", "not implemented for 'Long'"
    )
    raises_like_torch(lambda ns: ns.empty(3).uniform_(1, 0), "uniform_ expects to return")
    raises_like_torch(
        lambda ns: ns.nn.functional.dropout(ns.ones(3, dtype=ns.int64), 0.5),
        "result type Float can't be cast to the desired output type Long",
    )
    raises_like_torch(lambda ns: ns.empty(3).normal_(0, -1), "normal expects std >= 0.0")
    raises_like_torch(lambda ns: ns.normal(ns.zeros(3), -ns.ones(3)), "all elements of std")
    raises_like_torch(lambda ns: ns.randint(5, 3, (2,)), "random_ expects 'from' to be less")
    raises_like_torch(lambda ns: ns.empty(3).bernoulli_(1.5), "bernoulli_ expects p")
    raises_like_torch(lambda ns: ns.bernoulli(ns.tensor([1.5])), "p_in >= 0 && p_in <= 1")
    raises_like_torch(
        lambda ns: ns.empty(3, dtype=ns.int64).exponential_(), "dtype must be a floating point"
    )
    raises_like_torch(lambda ns: ns.empty(3).geometric_(1.5), "geometric_ expects p")
    raises_like_torch(lambda ns: ns.multinomial(ns.ones(3), 4), "without replacement")
    raises_like_torch(lambda ns: ns.multinomial(ns.tensor([1, 2]), 1), "got: Long")
    raises_like_torch(
        lambda ns: ns.multinomial(ns.tensor([1.0, -1.0]), 1), "probability tensor contains"
    )
    raises_like_torch(
        lambda ns: ns.ones(2, requires_grad=True).normal_(), "a leaf Variable that requires grad"
    )


def test_bfloat16_random_is_torch_s():
    """[0, 2**8] for bfloat16, from the same 32-bit draws (compared as float32: NumPy has no
    bfloat16 view of torch's tensors)."""
    staged.manual_seed(4)
    torch.manual_seed(4)
    ours = staged.zeros(50, dtype=staged.bfloat16).random_().float().numpy()
    theirs = torch.zeros(50, dtype=torch.bfloat16).random_().float().numpy()
    np.testing.assert_array_equal(ours, theirs)
