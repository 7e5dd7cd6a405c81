"""The compiled lowering of scatter_add and scatter_reduce (iree_linalg_ext.scatter, one
update per source element) against eager's kernel (NumPy's ``ufunc.at``): every reduction
and dtype, duplicate indices, NaN, infinities and -0.0, indices out of range (they hit
nothing: these graphs hold the primitives alone, without the public ops' index checks),
dims 0, 1 and the last (the public ops' -1), empty indices and an empty destination dim.
Floating sums and products may arrive in another order: they are compared within the
rounding of that many terms."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from staged import dtypes as dt
from staged.autodiff import REGISTRY, Aval
from staged.autodiff.avals import Sym
from staged.lower.mlir import to_mlir
from staged.runtime.compiler import (
    BOUNDARY,
    UNSUPPORTED_DTYPES,
    compile_mlir,
    narrowing,
    to_boundary,
)
from staged.runtime.device import device, to_host
from staged.tracing.ir import Graph, Output
from tests.backends import needs_vulkan

rng = np.random.default_rng(7)
UFUNC = {"add": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
DTYPES = {
    "add": ("float32", "float64", "int64", "int32", "uint8", "bool", "complex64", "float16"),
    "prod": ("float32", "float64", "int64", "bool", "complex64"),
    "amax": ("float32", "float64", "int64", "uint8", "bool"),
    "amin": ("float32", "float64", "int64", "bool"),
}
# (destination shape, index shape, dim, largest index + 1): duplicates along dim everywhere
SHAPES = [((4, 3), (9, 3), 0, 4), ((3, 5), (3, 7), 1, 5), ((2, 3, 4), (2, 3, 6), 2, 4)]
BAD = [-1, -(2**40), 2**40]  # plus n and n + 3, added per shape
EMPTY = [((3, 4), (0, 4), 0), ((3, 0), (3, 0), 1), ((0, 2), (3, 2), 0)]


def values(shape, d):
    """Small values (ints and products stay in int32, as Vulkan holds int64), with zeros,
    ties and, for floats, -0.0, infinities and NaN."""
    if d == "bool":
        return rng.random(shape) < 0.5
    v = rng.integers(-3, 4, shape).astype(np.float64)
    if d in ("float32", "float64", "float16"):
        v = v / 2 + rng.choice([0.0, 0.25], shape)
        flat = v.reshape(-1)
        flat[rng.choice(flat.size, min(3, flat.size), replace=False)] = [-0.0, np.inf, np.nan][
            : min(3, flat.size)
        ]
    if d == "uint8":
        v = np.abs(v)
    if d == "complex64":
        v = v + 1j * rng.integers(-3, 4, shape)
    return v.astype(d)


def reference(x, index, src, dim, reduce):
    """``x`` with every source whose index is in range combined into it, in order."""
    if x.ndim == 0:  # one element along dim 0
        return reference(x[None], index[None], src[None], dim, reduce)[0]
    out = np.array(x)
    grid = list(np.indices(index.shape))
    grid[dim] = index
    hit = (index >= 0) & (index < x.shape[dim])
    with np.errstate(all="ignore"):
        UFUNC[reduce].at(out, tuple(g[hit] for g in grid), src[hit])
    return out


def cases():
    """(x, index, src, dim, reduce) for every reduction, dtype and shape, some with indices
    out of range, then the empty and 0-d ones."""
    out = []
    for reduce, dtypes in DTYPES.items():
        for d in dtypes:
            for k, (xs, ixs, dim, n) in enumerate(SHAPES):
                index = rng.integers(0, n, ixs)
                if k == 1:  # out of range, both sides, beyond int32 too
                    flat = index.reshape(-1)
                    flat[rng.choice(flat.size, 5, replace=False)] = BAD + [n, n + 3]
                out.append((values(xs, d), index, values(ixs, d), dim, reduce))
    # no index rows, no index columns, and an empty destination dim (all out of range)
    for (xs, ixs, dim), reduce in itertools.product(EMPTY, UFUNC):
        index = np.zeros(ixs, np.int64)
        out.append((values(xs, "float32"), index, values(ixs, "float32"), dim, reduce))
    # 0-d: one element along dim 0, hit by index 0 and not by 1
    for i, reduce in itertools.product((0, 1), UFUNC):
        out.append((np.float32(1.5), np.array(i), np.float32(-2.0), 0, reduce))
    return out


CASES = cases()


def graph(cases):
    """One graph holding every case as scatter_add or scatter_reduce on its inputs."""
    g, inputs = Graph(), []
    for k, (x, index, src, dim, reduce) in enumerate(cases):
        vals = []
        for a in (x, index, src):
            vals.append(g.add_input(Aval(a.shape, dt.from_numpy_dtype(a.dtype)), "arg", ""))
            inputs.append(a)
        name, params = (
            ("scatter_add", {"dim": dim})
            if reduce == "add"
            else ("scatter_reduce", {"dim": dim, "reduce": reduce})
        )
        out = g.add_op(REGISTRY[name], vals, params, vals[0].aval, f"case.py:{k}")
        g.outputs.append(Output(out, "out", f"{name} {reduce} {x.dtype} #{k}"))
    return g, inputs


def check(got, case):
    x, index, src, dim, reduce = case
    want = reference(x, index, src, dim, reduce)
    assert got.shape == want.shape and got.dtype == want.dtype
    if x.dtype.kind not in "fc" or reduce in ("amax", "amin"):
        np.testing.assert_array_equal(got, want)  # exact (NaN equals NaN)
        return
    # another order of m terms: a sum within m eps of the sum of magnitudes, a product
    # within m eps of its magnitude (a complex product's rounding is sqrt(5) eps: 3 eps)
    counts = np.zeros(x.shape)
    reference(counts, index, np.ones(src.shape), dim, "add")
    ulps = 3 if x.dtype.kind == "c" and reduce == "prod" else 1
    eps = np.finfo(x.dtype).eps * ulps * (counts.max(initial=0) + 1)
    scale = reference(np.abs(x), index, np.abs(src), dim, "add" if reduce == "add" else "prod")
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    assert (np.abs(got[finite] - want[finite]) <= eps * scale[finite]).all(), (got, want)
    np.testing.assert_array_equal(got[~finite], want[~finite])  # NaN and infinities exact
    if x.dtype.kind == "f":  # a zero's sign does not depend on the order (exact terms)
        zero = want == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


def run(backend, cases):
    """The outputs of ``cases`` compiled for ``backend`` as one module."""
    g, inputs = graph(cases)
    wide = narrowing(backend)  # the types the module's edge holds (Vulkan: int32)
    text = to_mlir(g, boundary=BOUNDARY.get(backend))
    m = device(backend).load(compile_mlir(text, backend))
    args = [to_boundary(a, wide.get(a.dtype, a.dtype)) for a in inputs]
    outs = m.invoke("main", args, [wide.get(c[0].dtype, c[0].dtype) for c in cases])
    return [to_host(r).astype(c[0].dtype) for r, c in zip(outs, cases)]


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STAGED_CACHE_DIR", str(tmp_path_factory.mktemp("staged-cache")))
        yield


def test_llvm_cpu_matches_numpy():
    for got, case in zip(run("llvm-cpu", CASES), CASES):
        check(got, case)


@needs_vulkan
def test_vulkan_spirv_matches_numpy():
    """Vulkan has no 64-bit or 16-bit floats and holds int64 in int32 (BOUNDARY): indices
    out of range stay inside int32 there."""
    cases = [
        (x, np.clip(i, -(2**31), 2**31 - 1), s, dim, r)
        for x, i, s, dim, r in CASES
        if x.dtype.name not in UNSUPPORTED_DTYPES["vulkan-spirv"]
    ]
    for got, case in zip(run("vulkan-spirv", cases), cases):
        check(got, case)


def test_cuda_compiles():
    assert compile_mlir(to_mlir(graph(CASES)[0]), "cuda")  # running it needs an NVIDIA GPU


def test_dynamic_destination_dim():
    """The padded destination's size along a dynamic dim is computed at run time."""
    _, index, src, _, _ = CASES[0]  # (4, 3) destination, (9, 3) indices below 4
    g = Graph()
    xv, iv, sv = (
        g.add_input(Aval(shape, d), "arg", "")
        for shape, d in (((Sym("n"), 3), dt.float32), ((9, 3), dt.int64), ((9, 3), dt.float32))
    )
    out = g.add_op(REGISTRY["scatter_add"], (xv, iv, sv), {"dim": 0}, xv.aval, "case.py:1")
    g.outputs.append(Output(out, "out", ""))
    m = device().load(compile_mlir(to_mlir(g)))
    for n in (2, 4, 6):  # indices up to 3: out of range at 2, in range at 6
        x = values((n, 3), "float32")
        got = to_host(m.invoke("main", [x, index, src], [np.float32])[0])
        check(got, (x, index, src, 0, "add"))


def test_scatter_add_lowers_to_iree_scatter():
    """One scatter op over the source elements, no generic reducing over the index."""
    text = to_mlir(graph([CASES[0]])[0])
    assert text.count("iree_linalg_ext.scatter") == 1 and "unique_indices(false)" in text
    assert '"reduction"' not in text
