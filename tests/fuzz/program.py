"""Random straight-line programs over the op database, drawn by hypothesis and run on
staged and on torch 2.13 alike.

A program is a list of input arrays and a list of steps; each step reads values of the
pool (inputs, then every step's results) and appends its results. The ops come from
``tests/ops/db`` (classified by how torch accepts them: unary, broadcasting binary, or
taking a dim), plus views, indexing and in-place writes through views of a fresh non-leaf.
Drawing runs torch alongside, so every step drawn is one torch accepts (shapes broadcast,
dtypes promote, dims exist); staged must then agree on values, dtypes and gradients.
``Program.source()`` prints a program as the repro to paste into a regression test.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import strategies as st

import staged
from tests.ops.db import OP_DB

SPECIALS = (math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0)
FLOAT = ("float32", "float64")

# ops whose result on some inputs is undefined behaviour (a float outside int64's range
# cast to an integer): left out of programs, whose inputs include NaN and Inf. For the same
# reason, and because truncation turns an ulp of difference (FMA, another libm) into a
# whole unit (i0e(0) compiled is 0.99999994, cast to 0), a float value is never written
# into an integer tensor (setitem, copy_)
_UNDEFINED = {"to_int64"}
# ops the random programs must not draw: random or data-dependent shapes (not capturable)
_NOT_STRAIGHT_LINE = {"getitem_mask", "one_hot_infer_classes"}
# ops whose cost grows with their values, as torch's: the orthogonal polynomials loop n
# times per element (a program's values reach 1e30), and where x is NaN torch's return
# uninitialised memory; igamma/igammac iterate up to 2000 times (minutes to compile), and
# torch's float32 kernel is hundreds of ulp from the value. The op sweep and their
# focused tests (tests/eager/test_math_ops.py) check them
_UNBOUNDED = {
    *("chebyshev_polynomial_t", "chebyshev_polynomial_u"),
    *("chebyshev_polynomial_v", "chebyshev_polynomial_w"),
    *("shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u"),
    *("shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"),
    *("hermite_polynomial_h", "hermite_polynomial_he"),
    *("laguerre_polynomial_l", "legendre_polynomial_p"),
    *("igamma", "igammac"),
}


def _probe(fn, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args)
    except Exception:  # noqa: BLE001  (an op that does not take this form)
        return None
    if isinstance(out, tuple) and out:  # (values, indices) of max/min/sort along a dim
        out = out[0]
    return out if isinstance(out, torch.Tensor) else None


def _classify():
    """{"unary" | "binary" | "dim": [OpInfo]} of the database's float ops, by probing torch."""
    x23, x0 = torch.randn(2, 3, dtype=torch.float64), torch.randn((), dtype=torch.float64)
    x31, y4 = torch.randn(3, 1, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    x234 = torch.randn(2, 3, 4, dtype=torch.float64)
    kinds = {"unary": [], "binary": [], "dim": []}

    def widens(out, *args):  # float32 in, float64 out (to_float64)
        out32 = _probe(e.torch_op, *(a.float() if isinstance(a, torch.Tensor) else a for a in args))
        WIDENS[e.name] = out32 is not None and out32.dtype == torch.float64

    for e in OP_DB:
        if e.name in _UNDEFINED | _NOT_STRAIGHT_LINE | _UNBOUNDED or not set(e.dtypes) & set(FLOAT):
            continue
        if e.name.endswith("_"):  # in-place forms, whose torch oracle may be the out-of-place
            continue  # op (other dtype rules): the writes are drawn as "inplace" steps
        u = _probe(e.torch_op, x23)
        if u is not None and u.shape == (2, 3) and _probe(e.torch_op, x0) is not None:
            kinds["unary"].append(e)
            FLOAT_ONLY[e.name] = _probe(e.torch_op, x23.long()) is None
            widens(u, x23)
            continue
        b = _probe(e.torch_op, x31, y4)
        if b is not None and b.shape == (3, 4):
            kinds["binary"].append(e)
            FLOAT_ONLY[e.name] = _probe(e.torch_op, x31.long(), y4.long()) is None
            widens(b, x31, y4)
            continue
        d = _probe(e.torch_op, x234, 1)
        if d is not None and d.shape in ((2, 4), (2, 3, 4)):
            kinds["dim"].append(e)
            FLOAT_ONLY[e.name] = _probe(e.torch_op, x234.long(), 1) is None
            widens(d, x234, 1)
    return kinds


# ops torch runs on integers only when the tensor is empty (no kernel runs): drawn on
# floating-point values only
FLOAT_ONLY = {}
# ops that compute a float32 input in float64: not drawn for a target without float64
WIDENS = {}


KINDS = _classify()
# in-place methods drawn for writes through a view (each a Tensor method of staged too)
INPLACE_BINARY = ("add_", "sub_", "mul_", "div_", "copy_", "clamp_min_")
INPLACE_UNARY = ("zero_", "exp_", "neg_", "relu_", "sqrt_", "tanh_", "abs_")


def to_lib(a, lib):
    """A NumPy array (or anything else, as is) as a ``lib`` tensor."""
    if not isinstance(a, np.ndarray):
        return a
    return staged.tensor(a.copy()) if lib is staged else torch.tensor(a.copy())


@dataclass
class Step:
    kind: str  # "op", "view", "getitem", "inplace", "setitem"
    what: str  # the OpInfo name, view or method name
    refs: tuple  # pool indices read
    args: tuple = ()  # static arguments (ints, slices, index arrays, numbers)
    view: tuple = ()  # for writes: the basic index of the view written through
    nout: int = 1  # how many values the step appends

    def run(self, pool, lib):
        xs = [pool[r] for r in self.refs]
        args = [to_lib(a, lib) for a in self.args]
        if self.kind == "op":
            e = _BY_NAME[self.what]
            out = (e.op if lib is staged else e.torch_op)(*xs, *args)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        if self.kind == "view":
            return [getattr(xs[0], self.what)(*args)]
        if self.kind == "getitem":
            return [xs[0][tuple(args)]]
        base = xs[0].clone()
        target = base[self.view] if self.view else base
        if self.kind == "setitem":
            target[tuple(args)] = xs[1]
        elif self.what in INPLACE_UNARY:
            getattr(target, self.what)()
        elif self.what == "fill_":
            target.fill_(args[0])
        else:
            getattr(target, self.what)(xs[1])
        return [base, target]

    def source(self, names, outs):
        a = [names[r] for r in self.refs]
        lhs = ", ".join(outs)
        static = ", ".join(map(_src, self.args))
        if self.kind == "op":
            return f"{lhs} = {self.what}({', '.join(a + ([static] if static else []))})"
        if self.kind == "view":
            return f"{lhs} = {a[0]}.{self.what}({static})"
        if self.kind == "getitem":
            return f"{lhs} = {a[0]}[{static}]"
        view = f"[{', '.join(map(_src, self.view))}]" if self.view else ""
        head = f"{outs[0]} = {a[0]}.clone(); {outs[1]} = {outs[0]}{view}; "
        if self.kind == "setitem":
            return head + f"{outs[1]}[{static}] = {a[1]}"
        arg = a[1] if len(a) > 1 else static
        return head + f"{outs[1]}.{self.what}({arg})"


def _src(a):
    if isinstance(a, slice):
        return f"{'' if a.start is None else a.start}:{'' if a.stop is None else a.stop}" + (
            f":{a.step}" if a.step is not None else ""
        )
    if isinstance(a, np.ndarray):
        return f"tensor({a.tolist()})"
    return repr(a)


_BY_NAME = {e.name: e for e in OP_DB}


@dataclass(repr=False)
class Program:
    inputs: list  # NumPy arrays
    steps: list = field(default_factory=list)

    def leaves(self, lib, requires_grad=True):
        return [
            to_lib(a, lib).requires_grad_(requires_grad and a.dtype.kind == "f")
            for a in self.inputs
        ]

    def run(self, lib, leaves):
        pool = list(leaves)
        for s in self.steps:
            pool.extend(s.run(pool, lib))
        return pool

    def __repr__(self):
        return "Program(\n" + self.source() + ")"

    def _repr_pretty_(self, p, cycle):  # how hypothesis prints a failing example
        p.text(repr(self))

    def source(self):
        names = [f"x{i}" for i in range(len(self.inputs))]
        lines = [
            f"x{i} = tensor({_values(a)}, dtype={a.dtype}"
            f"{', requires_grad=True' if a.dtype.kind == 'f' else ''})"
            for i, a in enumerate(self.inputs)
        ]
        for k, s in enumerate(self.steps):
            outs = (
                [f"v{k}"]
                if s.kind in ("view", "getitem")
                else (
                    [f"v{k}", f"w{k}"]
                    if s.kind in ("inplace", "setitem")
                    else [f"v{k}_{j}" for j in range(s.nout)]
                )
            )
            lines.append(s.source(names, outs))
            names.extend(outs)
        return "\n".join(lines)


def _values(a):
    return repr(a.tolist()).replace("nan", "nan").replace("inf", "inf")


# --- drawing ------------------------------------------------------------------------------
_ELEMENT = st.one_of(st.floats(-3, 3, width=32), st.sampled_from(SPECIALS))
# Float elements of programs compared on llvm-cpu (``programs(subnormals=False)``): IREE
# 3.13's CPU runtime runs every dispatch with MXCSR FTZ|DAZ set (hard-coded in its task
# workers, and local-sync flushes too; no compiler or runtime flag turns it off), so compiled
# float32/float64 steps read and write subnormals as +-0 (sqrt(1e-40): 0, eager 1e-20;
# sqrt(-1e-40): -0, eager NaN; README "Backends", test_regressions.py). Nonzero
# magnitudes below 2**-20 are drawn as 0 there, so that no input is subnormal and a
# product of up to 6 inputs stays a normal float32 (the known difference, not found again).
_TINY = 2.0**-20


def _no_tiny(v):
    return v if v == 0 or abs(v) >= _TINY or v != v else 0.0


# Float elements of programs compared on vulkan-spirv (``programs(nonfinite=False)``):
# its default float rules let the driver fold x - x to 0 and (a + b) - b to a, so a NaN or
# infinity is not kept through them (README "Backends"): inputs are finite there (a NaN
# made inside a program, 0 / 0, can still meet such a fold)
def _finite(v):
    return v if math.isfinite(v) else 0.0


@st.composite
def arrays(draw, shape, dtype, subnormals=True, nonfinite=True):
    n = int(np.prod(shape))
    if dtype == "bool":
        return np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool).reshape(
            shape
        )
    if dtype == "int64":
        return np.asarray(
            draw(st.lists(st.integers(-3, 3), min_size=n, max_size=n)), np.int64
        ).reshape(shape)
    special = draw(st.booleans())
    el = _ELEMENT if special else st.floats(-3, 3, width=32)
    if not subnormals:
        el = el.map(_no_tiny)
    if not nonfinite:
        el = el.map(_finite)
    return np.asarray(draw(st.lists(el, min_size=n, max_size=n)), dtype).reshape(shape)


def _variant(draw, base):
    """A shape that broadcasts against ``base``: each dim kept, set to 1, or leading dims
    dropped."""
    drop = draw(st.integers(0, len(base)))
    return tuple(d if draw(st.booleans()) else 1 for d in base[drop:])


def _try(step, pool):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = step.run(pool, torch)
        except Exception:  # noqa: BLE001  (torch refuses this draw: not a program)
            return None
    return out if all(isinstance(o, torch.Tensor) for o in out) else None


def _is_float(t):
    return t.dtype in (torch.float32, torch.float64)


@st.composite
def programs(
    draw,
    dtype=None,
    max_steps=6,
    allow=("op", "view", "getitem", "inplace", "setitem"),
    write_views=True,
    float64=True,
    subnormals=True,
    nonfinite=True,
    complex_values=True,
):
    """A random program whose float inputs are ``dtype`` (drawn when None); writes go
    through a view of the written clone only with ``write_views``; no op computes in
    float64 without ``float64`` (for vulkan-spirv, which has none); without ``subnormals``
    no float input is subnormal or near it (``_TINY``: for llvm-cpu, which flushes them);
    without ``nonfinite`` every float input is finite (for vulkan-spirv); without
    ``complex_values`` no step makes a complex value (for ONNX, which has none)."""
    dtype = dtype or draw(st.sampled_from(FLOAT))
    base = tuple(draw(st.lists(st.integers(0, 3), min_size=0, max_size=3)))
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        dt = draw(st.sampled_from((dtype, dtype, dtype, "int64", "bool")))
        inputs.append(draw(arrays(_variant(draw, base), dt, subnormals, nonfinite)))
    if not any(a.dtype.kind == "f" for a in inputs):
        inputs.append(draw(arrays(base, dtype, subnormals, nonfinite)))
    prog = Program(inputs)
    pool = prog.leaves(torch)
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(allow))
        step = _draw_step(draw, kind, pool, dtype, write_views, float64)
        if step is None:
            continue
        out = _try(step, pool)
        if out is None or not complex_values and any(t.is_complex() for t in out):
            continue
        step.nout = len(out)
        prog.steps.append(step)
        pool.extend(out)
    return prog


def _ref(draw, pool, pred=lambda t: True):
    ok = [i for i, t in enumerate(pool) if pred(t)]
    return draw(st.sampled_from(ok)) if ok else None


def _dim(draw, t):
    return draw(st.integers(-t.dim(), t.dim() - 1)) if t.dim() else None


def _draw_step(draw, kind, pool, dtype, write_views, float64):
    i = _ref(draw, pool)
    x = pool[i]
    if kind == "op":
        k = draw(st.sampled_from(sorted(KINDS)))
        e = draw(st.sampled_from(KINDS[k]))
        if FLOAT_ONLY[e.name] and not _is_float(x) or WIDENS[e.name] and not float64:
            return None
        if k == "unary":
            return Step("op", e.name, (i,))
        if k == "binary":
            j = _ref(draw, pool, lambda t: _broadcasts(t.shape, x.shape))
            return Step("op", e.name, (i, j))
        d = _dim(draw, x)
        if d is None:
            return None
        # var/std take (dim, unbiased, keepdim) positionally in torch: no keepdim for them
        keep = () if e.name in ("var", "std") else draw(st.sampled_from(((), (True,), (False,))))
        return Step("op", e.name, (i,), (d,) + keep)
    if kind == "view":
        return _draw_view(draw, i, x)
    if kind == "getitem":
        return Step("getitem", "", (i,), _draw_index(draw, x))
    # writes into a clone of x, through an optional basic-index view
    view = _draw_basic(draw, x) if write_views and draw(st.booleans()) else ()
    if kind == "setitem":  # a key of the view written through (torch skips an empty's check)
        key = _draw_index(draw, x.detach()[view] if view else x, unique=True)
        j = _ref(draw, pool, lambda t: _is_float(x) or not _is_float(t))  # (see _UNDEFINED)
        return Step("setitem", "", (i, j), key, view)
    name = draw(st.sampled_from(INPLACE_BINARY + INPLACE_UNARY + ("fill_",)))
    if name in INPLACE_UNARY:
        return Step("inplace", name, (i,), (), view)
    if name == "fill_":
        return Step("inplace", name, (i,), (draw(st.sampled_from((2.5, -0.0, math.nan))),), view)
    exact = name != "copy_" or _is_float(x)  # (see _UNDEFINED)
    j = _ref(draw, pool, lambda t: exact or not _is_float(t))
    return Step("inplace", name, (i, j), (), view)


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
        return True
    except ValueError:
        return False


def _draw_view(draw, i, x):
    n = x.dim()
    name = draw(
        st.sampled_from(
            (
                "transpose",
                "unsqueeze",
                "reshape",
                "permute",
                "expand",
                "flatten",
                "squeeze",
                "t",
                "mT",
                "view",
            )
        )
    )
    if name == "transpose" and n:
        return Step("view", name, (i,), (_dim(draw, x), _dim(draw, x)))
    if name == "unsqueeze":
        return Step("view", name, (i,), (draw(st.integers(-n - 1, n)),))
    if name in ("reshape", "view"):
        return Step("view", name, (i,), (-1,) if x.numel() or n == 0 else (0, -1))
    if name == "permute":
        return Step("view", name, (i,), tuple(draw(st.permutations(range(n)))))
    if name == "expand":
        return Step("view", name, (i,), (2,) + tuple(x.shape))
    if name == "flatten" and n:
        return Step("view", name, (i,), (_dim(draw, x),))
    if name == "squeeze":
        return Step("view", name, (i,))
    if name == "t" and n <= 2:
        return Step("view", name, (i,))
    if name == "mT" and n >= 2:
        return Step("view", "transpose", (i,), (-2, -1))
    return None


def _draw_basic(draw, x):
    """A basic index of ``x``: ints, slices (with steps), None and Ellipsis."""
    key = []
    for d in x.shape[: draw(st.integers(0, x.dim()))]:
        form = draw(st.sampled_from(("int", "slice", "step", "all")))
        if form == "int" and d:
            key.append(draw(st.integers(-d, d - 1)))
        elif form == "slice":
            key.append(slice(draw(st.integers(-d - 1, d)), draw(st.integers(-d - 1, d + 1))))
        elif form == "step":
            key.append(slice(None, None, draw(st.integers(1, 3))))
        else:
            key.append(slice(None))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    return tuple(key)


def _draw_index(draw, x, unique=False):
    """A basic index, or one with an int64 index array in range on a drawn dim (without
    repeats when ``unique``: a write through repeated indices is unspecified in torch)."""
    if not x.dim() or not draw(st.booleans()):
        return _draw_basic(draw, x)
    d = draw(st.integers(0, x.dim() - 1))
    size = x.shape[d]
    if size == 0:
        return _draw_basic(draw, x)
    idx = draw(
        st.lists(
            st.integers(-size, size - 1),
            max_size=4,
            unique_by=(lambda i: i % size) if unique else None,
        )
    )
    idx = np.asarray(idx, np.int64)
    return (slice(None),) * d + (idx,)
