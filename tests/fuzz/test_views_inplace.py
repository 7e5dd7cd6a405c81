"""Differential fuzzer of eager autograd programs with views and in-place writes, against
torch 2.13.

A program is Python source run once with ``T = staged`` and once with ``T = torch``: a few
leaves (float32, float64, complex64; requiring grad or not; contiguous, permuted, or a
stepped view of a base that is in the program too), then random steps: views (slices with
steps, select, transpose, permute, t, view, reshape, expand, unsqueeze, squeeze, narrow,
diagonal, unbind, split, chunk, unsafe_split, unsafe_chunk, as_strided, real, imag,
view_as_real, conj, detach), out-of-place ops, and in-place writes into any value (a leaf,
a base, a view, a view of a view), some under ``no_grad``. After each step its new values
(and, where drawn, every value's autograd state) are compared; at the end every value's
data, dtype, shape, ``_version``, whether it is a view, ``is_conj()``, ``requires_grad``,
``grad_fn`` (its name, up to the names of ``_SAME_NODE``) and ``is_leaf``, then the leaves'
``.grad`` after the backward of a random weighting of the values' real parts. An error (a
step, an attribute read, the backward) must be the same type on both, with the same key
phrase (``_PHRASES``) where torch's message has one.

CI runs a fixed set of examples (hypothesis derandomized, a few seconds);
``STAGED_FUZZ_EXAMPLES=N`` runs N random ones (a failure prints the program's source).

Known differences, by design (not drawn, or compared up to them):

* ``v.copy_(src)`` where one is a conj view and the other a view of the same memory: a
  conj view's data is a copy of its base's (Note [conj views] in staged/eager/views.py),
  so staged's overlap check sees no partial overlap where torch's does, and computes as
  from a copy: not drawn (other in-place ops run on copies of conj operands in torch too);
* ``grad_fn`` names of views made from a few primitives differ (``_SAME_NODE``):
  ``x[0]`` is a ``ViewBackward0`` (a reshape of a slice), torch's ``SelectBackward0``;
* an op's result may be a view of a temporary in staged (``a @ b`` of vectors: a reshape of
  a matrix product), torch's never is, and its layout may differ (``x.expand(2, 3).sin()``),
  which decides whether its reshape is a view: whether it is a view, and its grad_fn's
  name, are not compared for results of ops and their reshapes (``Program.made``); nor is
  ``is_conj()``: torch's ``y @ y`` of a conj view ``y`` is a conj-bit result (views of
  such a result, whose ``is_conj()`` and ``view_as_real`` differ too, are not drawn);
* writes whose source shares memory with the written tensor, and masked or indexed writes
  into an expanded view, are not drawn: torch's result there is its kernel's order
  (``x.index_add_(0, i, x[0].expand(2))`` accumulates the updated ``x[0]``), and it writes
  through some expanded views staged refuses (``masked_fill_``);
* a write whose source shares memory with the written tensor through an alias
  (``b.add_(b.detach()[0])``): torch refuses a partial overlap, staged's check compares
  views of one base only and computes as from a copy (``check_overlap`` in
  staged/eager/ops/inplace.py): not drawn;
* ``x[index] = y`` with a tensor index or mask and ``y`` of another dtype: torch's
  index_put raises ("source and destination dtypes match"), staged casts ``y`` as for a
  basic index (``staged/eager/ops/indexing.py:setitem``): not drawn;
* a view made a leaf that requires grad (``b[::2].requires_grad_()``) is not drawn: after
  a write into its base torch's backward through it reports its version changed where
  nothing saved it;
* ``x.view(-1)`` of a non-contiguous ``x``: torch's op results keep their operand's
  layout (``p + p`` of a permuted ``p``), so its view raises where staged's (a tensor that
  is no view counts as contiguous, ``staged/eager/ops/shape.py:view``) does not: drawn for
  contiguous values only;
* ``x.mul_(x)`` with grad: torch's Node saves ``other``, the ``x`` its own write then
  changes, so its backward raises the version error; staged's keeps the value before the
  write for every saved operand that is ``x`` (Note [in-place] in
  staged/eager/ops/inplace.py) and gives the gradient: not drawn;
* ``v.copy_(src)``, ``v.fill_(src)`` or ``v[...] = src`` (a whole ``v``) where both
  require grad: torch's CopyBackwards also sends a zero gradient into ``v``'s old
  history, so ``v = x.exp(); v.copy_(x)``
  fails torch's backward (exp saved its result, which copy_ wrote); staged's Node of the
  write has ``src``'s edge alone (``copy_``/``fill_`` in staged/eager/ops/inplace.py;
  the gradients agree where torch has them): not drawn;
* an op of operands of two dtypes (``v1 * x0``, float32 and complex64): staged's
  promotion casts ``v1`` first and the Node saves that copy, so a later write into ``v1``
  is not seen by the backward (which uses the value at the op, the recorded one); torch's
  saves ``v1`` and raises the version error: ops are drawn on operands of one dtype;
* ``as_strided`` of an op's result: its layout may differ from torch's
  (``x.permute(0, 2, 1).clone().sum(0)``: torch's strides (3, 1), staged's (1, 3), NumPy's
  reduction keeping the input's order), and as_strided reads memory in that layout: drawn
  on contiguous leaves only;
* writes into ``as_strided`` windows that overlap (strides (1, 1)): torch's result is its
  kernel's order (an element in two windows gets the update twice): not drawn;
* ``fill_`` of an expanded view with grad: torch's forward writes it, its CopySlices
  backward then refuses to write the expanded gradient (internal overlap): not drawn;
* the partial-overlap check compares strides as torch's does, but NumPy's stride of a
  dim of one made by ``None`` or a reshape is not torch's: ``b[::2].add_(b[None, 0])`` of
  a 2-vector (one element, strides (2,) in both views in torch) raises in staged only
  (``_partial_overlap`` in staged/eager/ops/inplace.py; so does ``b[None, 0]`` of a
  (2, 2) ``b`` against ``b[::2]``); ``_checked_overlap`` draws a source sharing memory
  only where both are contiguous with no dim of one;
* ``x.index_add_(d, i, src)``: torch's Node saves ``src`` (for its shape), so a later
  write into ``src`` fails torch's backward; staged's keeps the shape: drawn with a copy;
* ``clamp_``/``relu_`` of a complex tensor (no complex form in either; torch's autograd
  checks come before its dtype error, staged's after) and ``conj_physical_`` of a real one
  (torch writes nothing, not even into an expanded view) are not drawn;
* ``tensor_split`` pieces are plain slices in both (torch too: not a multi-output view);
  ``unsafe_split``/``unsafe_chunk`` pieces are no views in either: they share their
  input's memory, and a write into one reaches it unseen by autograd (their grad_fn is
  torch's one ``UnsafeSplitBackward0``, staged's ``SliceBackward0`` each). They are drawn
  of tensors that require no grad, outside conj programs: a piece's Node that saved it
  (``piece.sigmoid_()``) reads, in torch's backward, a later write into the input that
  autograd did not see, staged's the value it saved; and pieces of a conj view's copy
  (also of ``x.conj().conj()``, torch's plain view) stay views in staged, so that writes
  into them reach the base (``untracked`` in staged/eager/views.py);
* an in-place op on a view whose base came to require grad by a write through a view of
  it (``v = x.permute(0); v[None] = y; v.div_(2)``, ``y`` requiring grad): torch checks
  the view's grad_fn field without regenerating it, and its write into ``v[None]`` left
  ``v``'s unregenerated, so it raises "a leaf Variable that requires grad is being used in
  an in-place operation" unless ``v.grad_fn`` (or ``is_leaf``) was read since; staged's
  write into ``v`` regenerates it, and the op runs as torch's does after such a read. The
  comparison of such a program ends there (``_unregenerated_view``);
* a view made under ``no_grad`` of a base that requires grad: torch's ``requires_grad`` is
  true (its base's), yet it has no grad_fn and no gradient accumulator, so an op on it
  records a Node whose backward sends nothing anywhere; staged's is false (an op on it
  records nothing, and a backward through it alone raises "does not require grad"). Such a
  view is only written into afterwards, and its ``requires_grad`` is not compared
  (``Program.blind``).
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import staged

EXAMPLES = int(os.environ.get("STAGED_FUZZ_EXAMPLES", "0"))

# key phrases of torch's errors: where torch's message holds one, staged's must too
_PHRASES = (
    "modified by an inplace operation",
    "This view is the output of a function that returns multiple views",
    "is a view and its base or another view of its base has been modified inplace",
    "is a view and is being modified inplace",
    # torch's "a view of a leaf Variable ..." where x[None] = 1 writes a view of leaf x,
    # staged's setitem x itself: the same check
    "a leaf Variable that requires grad is being used in an in-place operation",
    "A view was created in no_grad mode",
    "more than one element of the written-to tensor refers to a single memory location",
    "some elements of the input tensor and the written-to tensor refer to a single",
    "can't be cast to the desired output type",
    "doesn't match the broadcast shape",
    "does not require grad and does not have a grad_fn",
)

# grad_fn names that differ by design: torch's name -> staged's (views made of other
# primitives: the multi-output views are slices and reshapes; x.real is torch's select of
# view_as_real(x), staged's own primitive), compared where torch's is one of these keys
_SAME_NODE = {
    "SelectBackward0": {"ViewBackward0", "SliceBackward0", "RealBackward0", "ImagBackward0"},
    # identity views (x.t() of a vector, x.expand(x.shape), x[:]) are reshapes in staged
    "TBackward0": {"PermuteBackward0", "ViewBackward0"},
    "TransposeBackward0": {"PermuteBackward0", "ViewBackward0"},
    "ExpandBackward0": {"ViewBackward0"},
    "SliceBackward0": {"ViewBackward0"},
    "UnsqueezeBackward0": {"ViewBackward0", "SliceBackward0"},
    "SqueezeBackward0": {"ViewBackward0"},
    "SqueezeBackward1": {"ViewBackward0"},
    "AliasBackward0": {"ViewBackward0"},
    "DiagonalBackward0": {"AsStridedBackward0"},
    "UnbindBackward0": {"ViewBackward0"},
    "UnsafeViewBackward0": {"ViewBackward0"},  # a reshape that copies
    "ReshapeAliasBackward0": {"ViewBackward0"},
    "SplitBackward0": {"SliceBackward0"},
    "UnsafeSplitBackward0": {"SliceBackward0"},
    "IndexBackward0": {"GatherBackward0"},
    "ClampBackward1": {"ClampWhereBackward0"},
    "ConjPhysicalBackward1": {"ConjBackward0"},
}
# torch's Nodes of writes that staged records as composites: any name
_ANY_NAME = {
    *("IndexPutBackward0", "MaskedFillBackward0", "IndexAddBackward0"),
    *("CopyBackwards", "FillBackward2", "FillBackward3", "ZeroBackward0"),
    # x[i] = y: staged's setitem writes a slice_scatter, a where, or (where x[i] is all of
    # x) y itself into x
    "CopySlices",
}

TOL = {"float32": (2e-5, 1e-5), "float64": (1e-9, 1e-12)}  # (rtol, atol)


# --- programs -------------------------------------------------------------------------------
@dataclass
class Step:
    code: str  # one statement, in the names of the values and constants
    outs: tuple = ()  # the names it binds
    no_grad: bool = False
    probe: bool = False  # compare every value's autograd state after it
    made: bool = False  # an op's: a new tensor (staged's may be a view of a temporary)


@dataclass(repr=False)
class Program:
    consts: dict  # name -> NumPy array (leaf data, masks, indices, weights)
    leaves: list  # names of the leaves (tensors made by the set-up; a stepped view's
    # base needs no grad, nor does the view)
    setup: list  # statements making the leaves (and the bases of view leaves)
    steps: list = field(default_factory=list)
    loss: tuple = ()  # names of the values the loss weights
    blind: set = field(default_factory=set)  # names whose requires_grad is not compared
    made: set = field(default_factory=set)  # results of ops: grad_fn and view not compared

    def __repr__(self):
        lines = [f"{k} = np.array({v.tolist()!r}, np.{v.dtype})" for k, v in self.consts.items()]
        lines += self.setup
        for s in self.steps:
            lines.append(("with T.no_grad(): " if s.no_grad else "") + s.code)
        lines.append(f"loss over {list(self.loss)}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle):
        p.text(repr(self))


def _outcome(fn):
    """(result, None) or (None, the exception) of ``fn()``."""
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001  (compared with the other library's)
        return None, e


class Run:
    """One library's run of a program, a step at a time."""

    def __init__(self, prog, lib):
        self.lib = lib
        self.ns = {"T": lib, "np": np, **prog.consts}
        self.errors = []
        for line in prog.setup:
            exec(line, self.ns)  # noqa: S102  (the program's own source)

    def step(self, s):
        code = compile(s.code, "<program>", "exec")

        def go():
            if s.no_grad:
                with self.lib.no_grad():
                    exec(code, self.ns)  # noqa: S102
            else:
                exec(code, self.ns)  # noqa: S102

        return _outcome(go)[1]

    def values(self):
        return {k: v for k, v in self.ns.items() if k[0] in "xbv" and _is_tensor(v)}


def _is_tensor(v):
    return isinstance(v, (torch.Tensor, staged.Tensor))


# --- comparing ------------------------------------------------------------------------------
def _same_error(s, t, what):
    if t is None:
        assert s is None, f"{what}: staged raised {type(s).__name__}: {s}; torch did not"
        return
    assert s is not None, f"{what}: torch raised {type(t).__name__}: {t}; staged did not"
    assert isinstance(s, type(t)), (
        f"{what}: staged raised {type(s).__name__}: {s}; torch {type(t).__name__}: {t}"
    )
    # where torch's message has a key phrase staged's has it, or another of them: two
    # checks failing at once, made in another order (``x.add_(v)`` of a leaf ``x`` and a
    # stale multi-output view ``v``: torch checks the written leaf first, staged reads
    # ``v``'s grad_fn computing the value first)
    want = [p for p in _PHRASES if p in str(t)]
    if want:
        have = [p for p in _PHRASES if p in str(s)]
        assert want[0] in have or have and len(want) == 1 and _two_checks(t, s), (
            f"{what}: staged's message {s!r}; torch's {t!r}"
        )


def _unregenerated_view(t, step, run) -> bool:
    """Whether torch refused an in-place op on a view as "a leaf Variable that requires
    grad" because the view's grad_fn was not regenerated since its base came to require
    grad (see the known differences above)."""
    m = re.match(r"(\w+)[.\[]", step.code)
    v = run.ns.get(m.group(1)) if m else None
    return (
        t is not None
        and "leaf Variable that requires grad" in str(t)
        and isinstance(v, torch.Tensor)
        and v._base is not None
        and v._base.requires_grad
    )


def _two_checks(t, s):
    """Whether torch's error ``t`` and staged's ``s`` are two autograd checks of a write
    that both fail (their order differs), not one error for another."""
    checks = ("leaf Variable", "is a view and", "A view was created")
    return any(c in str(t) for c in checks) and any(c in str(s) for c in checks)


def _array(v):
    if isinstance(v, torch.Tensor):
        return v.numpy(force=True)
    return np.asarray(v.detach().resolve_conj())


def _tol(prog):
    """float64's tolerances for a program of float64 leaves alone, float32's otherwise (a
    float32 or complex64 value written into a float64 one carries its rounding)."""
    kinds = {a.dtype.name for k, a in prog.consts.items() if k[0] == "C" and a.dtype.kind in "fc"}
    return TOL["float64"] if kinds == {"float64"} else TOL["float32"]


def _same_value(s, t, what, tol):
    a, b = _array(s), _array(t)
    assert a.shape == b.shape, f"{what}: shape {a.shape}, expected {b.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype}, expected {b.dtype}"
    np.testing.assert_allclose(a, b, rtol=tol[0], atol=tol[1], err_msg=what)


def _node_name(fn):
    return None if fn is None else fn.name().removeprefix("torch::autograd::")


def _same_node(s, t):
    # a write of another dtype: staged's Node is the cast of the value written
    if t in _ANY_NAME or s == "CastBackward0" and t is not None:
        return s is not None
    return s == t or s in _SAME_NODE.get(t, ())


def _state(v):
    """A value's autograd state as (name, result or exception), read in this order (a
    grad_fn read may regenerate a stale view's, or raise)."""
    out = [
        ("_version", _outcome(lambda: v._version)),
        ("view", _outcome(lambda: v._base is not None)),
        ("is_conj", _outcome(v.is_conj)),
        ("requires_grad", _outcome(lambda: v.requires_grad)),
        ("grad_fn", _outcome(lambda: _node_name(v.grad_fn))),
        ("is_leaf", _outcome(lambda: v.is_leaf)),
    ]
    return out


def _same_state(s, t, what, blind, made):
    for (key, (sv, se)), (_, (tv, te)) in zip(_state(s), _state(t)):
        _same_error(se, te, f"{what}.{key}")
        if key == "requires_grad" and blind or key in ("view", "is_conj") and made:
            continue
        if key == "grad_fn" and made:
            assert (sv is None) == (tv is None), f"{what}.grad_fn: {sv!r}, expected {tv!r}"
            continue
        if key == "grad_fn":
            assert _same_node(sv, tv), f"{what}.grad_fn: {sv!r}, expected {tv!r}"
            continue
        assert sv == tv, f"{what}.{key}: {sv!r}, expected {tv!r}"


def _compare(sr, tr, names, state, prog):
    sv, tv = sr.values(), tr.values()
    for k in names:
        assert (k in sv) == (k in tv), k
        if k in tv:
            _same_value(sv[k], tv[k], k, _tol(prog))
    if state:
        for k in names:
            if k in tv:
                _same_state(sv[k], tv[k], k, k in prog.blind, k in prog.made)


def _loss(run, prog):
    """The sum of the weighted real parts of ``prog.loss``'s values that require grad."""
    lib, ns = run.lib, run.ns
    total = None
    for i, k in enumerate(prog.loss):
        v = ns.get(k)
        if v is None or not v.requires_grad:
            continue
        part = v.real if v.is_complex() else v
        w = lib.tensor(prog.consts[f"w{i}"]).to(part.dtype)
        term = (part * w).sum()
        total = term if total is None else total + term
    return total


def _blind(step, run, blind):
    """The values ``step`` made in torch's ``run`` whose ``requires_grad`` is torch's
    artefact: views made under no_grad of a base that requires grad (module docstring),
    and values made from those (``blind``)."""
    if set(re.findall(r"\w+", step.code)) & blind:
        return list(step.outs)
    out = []
    for k in step.outs if step.no_grad else ():
        t = run.ns.get(k)
        if t is not None and t._base is not None and t.requires_grad:
            out.append(k)
    return out


def check(prog):
    sr, tr = Run(prog, staged), Run(prog, torch)
    for n, s in enumerate(prog.steps):
        se, te = sr.step(s), tr.step(s)
        if se is None and _unregenerated_view(te, s, tr):
            return  # torch's state now differs by a write it refused: nothing more to compare
        _same_error(se, te, f"step {n}: {s.code}")
        _compare(sr, tr, s.outs, False, prog)
        prog.blind.update(_blind(s, tr, prog.blind))
        if s.probe:
            _compare(sr, tr, sorted(tr.values()), True, prog)
    _compare(sr, tr, sorted(tr.values()), True, prog)
    (sl, se), (tl, te) = _outcome(lambda: _loss(sr, prog)), _outcome(lambda: _loss(tr, prog))
    _same_error(se, te, "loss")
    if tl is None:
        return
    assert sl is not None
    error = _outcome(tl.backward)[1]
    _same_error(_outcome(sl.backward)[1], error, "backward")
    if error is not None:  # the gradients accumulated before it: the engine's order
        return
    sv, tv = sr.values(), tr.values()
    for k in prog.leaves:
        if not tv[k].is_leaf:  # written in place with a value that requires grad
            continue
        sg, tg = sv[k].grad, tv[k].grad
        assert (sg is None) == (tg is None), f"{k}.grad: {sg}, expected {tg}"
        if tg is not None:
            _same_value(sg, tg, f"{k}.grad", _tol(prog))


# --- drawing --------------------------------------------------------------------------------
class Drawer:
    """Draws a program step by step, running torch alongside to learn shapes and dtypes."""

    def __init__(self, draw, views):
        self.draw = draw
        self.consts = {}
        self.made = set()  # the program's ``made``
        self.views = views  # the views drawn from

    def const(self, a):
        name = f"C{len(self.consts)}"
        self.consts[name] = a
        return name

    def array(self, shape, dtype):
        n = int(np.prod(shape))
        vals = self.draw(st.lists(st.floats(-2, 2, width=32), min_size=n, max_size=n))
        a = np.asarray(vals, np.float64).reshape(shape)
        if dtype == "complex64":
            a = a + 1j * np.asarray(
                self.draw(st.lists(st.floats(-2, 2, width=32), min_size=n, max_size=n))
            ).reshape(shape)
        return a.astype(dtype)


@st.composite
def programs(draw, max_steps=10, conj=False):
    """A program; ``conj``: of complex64 leaves, with conj views drawn as often as all
    other views together."""
    d = Drawer(draw, _VIEWS + ("conj",) * len(_VIEWS) if conj else _VIEWS)
    dtype = draw(st.sampled_from(("float32", "float64")))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    setup, leaves = [], []
    for i in range(draw(st.integers(1, 3))):
        dt = "complex64" if conj else draw(st.sampled_from((dtype, dtype, "complex64")))
        sh = shape if draw(st.booleans()) else shape[draw(st.integers(0, len(shape) - 1)) :]
        rg = draw(st.integers(0, 2)) > 0
        layout = draw(st.sampled_from(("plain", "plain", "permuted", "stepped")))
        x = f"x{i}"
        if layout == "permuted" and len(sh) >= 2:
            perm = tuple(draw(st.permutations(range(len(sh)))))
            inv = tuple(np.argsort(perm))
            a = d.const(np.ascontiguousarray(d.array(sh, dt).transpose(perm)))
            setup.append(f"{x} = T.tensor({a}).permute{inv}.clone().requires_grad_({rg})")
        elif layout == "stepped":
            a = d.const(d.array((2 * sh[0],) + sh[1:], dt))
            setup.append(f"b{i} = T.tensor({a}); {x} = b{i}[::2]")
        else:
            a = d.const(d.array(sh, dt))
            setup.append(f"{x} = T.tensor({a}).requires_grad_({rg})")
        leaves.append(x)
    prog = Program(d.consts, leaves, setup)
    d.made = prog.made
    run = Run(prog, torch)
    for n in range(draw(st.integers(3, max_steps))):
        try:
            step = _draw_step(d, run, n, prog.blind)
        except RuntimeError:  # torch's view of a stale view raises while drawing (split)
            continue
        if step is None:
            continue
        step.no_grad = draw(st.integers(0, 5)) == 0
        step.probe = draw(st.integers(0, 3)) == 0
        run.ns.update(d.consts)  # the constants the step made (its masks and indices)
        run.step(step)
        prog.steps.append(step)
        if step.made:
            prog.made.update(step.outs)
        prog.blind.update(_blind(step, run, prog.blind))
    names = sorted(set(run.values()) - prog.blind)
    grads = [k for k in names if run.ns[k].requires_grad]
    names = grads or names
    loss = tuple(draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    for i, k in enumerate(loss):
        v = run.ns[k]
        prog.consts[f"w{i}"] = rng.uniform(0.5, 1.5, tuple(v.shape)).astype(np.float64)
    prog.loss = loss
    return prog


def _dim(draw, v):
    return draw(st.integers(-v.dim(), v.dim() - 1))


def _basic_key(draw, v):
    key = []
    for n in v.shape[: draw(st.integers(0, v.dim()))]:
        form = draw(st.sampled_from(("int", "slice", "step", "all")))
        if form == "int":
            key.append(str(draw(st.integers(-n, n - 1))))
        elif form == "slice":
            key.append(f"{draw(st.integers(-n, n - 1))}:{draw(st.integers(-n, n))}")
        elif form == "step":
            key.append(f"{draw(st.integers(0, n - 1))}::{draw(st.integers(1, 3))}")
        else:
            key.append(":")
    if draw(st.integers(0, 4)) == 0:
        key.insert(draw(st.integers(0, len(key))), "None")
    return ", ".join(key) or "..."


_VIEWS = (
    "getitem",
    "select",
    "transpose",
    "permute",
    "t",
    "view",
    "reshape",
    "expand",
    "unsqueeze",
    "squeeze",
    "narrow",
    "diagonal",
    "unbind",
    "split",
    "chunk",
    "unsafe_split",
    "unsafe_chunk",
    "as_strided",
    "real",
    "view_as_real",
    "conj",
    "detach",
)
_OPS = ("add", "mul", "sin", "exp", "matmul", "sum", "clone", "where", "neg", "sigmoid", "pow")
_WRITES = (
    "add_",
    "mul_",
    "div_",
    "clamp_",
    "relu_",
    "sigmoid_",
    "copy_",
    "fill_",
    "zero_",
    "masked_fill_",
    "index_add_",
    "setitem",
    "conj_physical_",
    "exp_",
)


def _draw_step(d, run, n, blind):
    """A step reading values not in ``blind`` (those only as the target of a write)."""
    draw = d.draw
    every = run.values()
    vals = {k: u for k, u in every.items() if k not in blind}
    kind = draw(st.sampled_from(("view", "view", "op", "write", "write", "write")))
    names = sorted(every if kind == "write" else vals)
    if not names:
        return None
    x = draw(st.sampled_from(names))
    v = every[x]
    leaf = v._base is None and v.grad_fn is None and v.requires_grad  # (no view: no raise)
    if not v.numel() or kind == "write" and leaf and draw(st.booleans()):
        return None  # (half the writes into a leaf that requires grad: torch's error)
    if kind == "view":
        return _draw_view(d, x, v, n, draw(st.sampled_from(d.views)))
    if kind == "op":
        step = _draw_op(d, x, v, vals, n, draw(st.sampled_from(_OPS)))
        step.made = True
        return step
    return _draw_write(d, x, v, vals, draw(st.sampled_from(_WRITES)))


_PIECES = ("split", "chunk", "unsafe_split", "unsafe_chunk")


def _draw_view(d, x, v, n, name):
    draw, o, nd = d.draw, f"v{n}", v.dim()
    if x in d.made and v.is_conj():  # torch's op result with a conjugate bit (``y @ y`` of
        return None  # a conj view): its views' is_conj() and view_as_real differ too
    if name == "getitem":
        return Step(f"{o} = {x}[{_basic_key(draw, v)}]", (o,))
    if name in ("select", "narrow", "unbind", *_PIECES, "squeeze") and not nd:
        return None
    if name == "select":
        dim = _dim(draw, v)
        return Step(f"{o} = {x}.select({dim}, {draw(st.integers(0, v.shape[dim] - 1))})", (o,))
    if name == "transpose" and nd:
        return Step(f"{o} = {x}.transpose({_dim(draw, v)}, {_dim(draw, v)})", (o,))
    if name == "permute" and nd:  # torch's permute() takes no empty dims
        return Step(f"{o} = {x}.permute{tuple(draw(st.permutations(range(nd))))}", (o,))
    if name == "t" and nd <= 2:
        return Step(f"{o} = {x}.t()", (o,))
    if name == "view" and not v.is_contiguous():  # torch's layout of results: not drawn
        name = "reshape"
    if name in ("view", "reshape"):
        # of an op's result: a view or a copy by the result's layout, which may differ
        return Step(f"{o} = {x}.{name}(-1)", (o,), made=x in d.made)
    if name == "expand":
        return Step(f"{o} = {x}.expand(2, *{x}.shape)", (o,))
    if name == "unsqueeze":
        return Step(f"{o} = {x}.unsqueeze({draw(st.integers(-nd - 1, nd))})", (o,))
    if name == "squeeze":
        return Step(f"{o} = {x}.squeeze({_dim(draw, v)})", (o,))
    if name == "narrow":
        dim = _dim(draw, v)
        start = draw(st.integers(0, v.shape[dim] - 1))
        length = draw(st.integers(0, v.shape[dim] - start))
        return Step(f"{o} = {x}.narrow({dim}, {start}, {length})", (o,))
    if name == "diagonal" and nd >= 2:
        off = draw(st.integers(-1, 1))
        return Step(f"{o} = {x}.diagonal({off}, {_dim(draw, v)}, {_dim(draw, v)})", (o,))
    if name in ("unsafe_split", "unsafe_chunk") and (v.requires_grad or "conj" in d.views):
        return None  # (module docstring: unsafe pieces)
    if name in ("unbind", *_PIECES):
        dim = _dim(draw, v)
        size = v.shape[dim]
        arg = "" if name == "unbind" else f"{draw(st.integers(1, max(size, 1)))}, "
        k = size if name == "unbind" else len(getattr(v, name)(int(arg[:-2]), dim))
        outs = tuple(f"v{n}_{i}" for i in range(k))
        return Step(f"{', '.join(outs)}, = {x}.{name}({arg}{dim})", outs) if outs else None
    # of a contiguous leaf only: the layout of an op's result may differ (torch's sum of a
    # permuted tensor is contiguous, staged's NumPy's keeps the permuted strides), which
    # as_strided reads
    if name == "as_strided" and x[0] == "x" and v.is_contiguous() and v.numel() >= 2:
        shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
        # a stride 0, or a transposed layout: no two elements overlap but repeated ones
        # (torch's result of a write into overlapping windows is its kernel's order)
        stride = draw(st.sampled_from(((shape[1], 1), (1, shape[0]), (0, 1), (shape[1], 0))))
        last = (shape[0] - 1) * stride[0] + (shape[1] - 1) * stride[1]
        if last >= v.numel():
            return None
        off = draw(st.integers(0, v.numel() - 1 - last))
        return Step(f"{o} = {x}.as_strided({shape}, {stride}, {off})", (o,))
    if name == "real" and v.is_complex():
        return Step(f"{o} = {x}.{draw(st.sampled_from(('real', 'imag')))}", (o,))
    if name == "view_as_real" and v.is_complex():
        return Step(f"{o} = T.view_as_real({x})", (o,))
    if name == "conj" and v.is_complex():
        return Step(f"{o} = {x}.conj()", (o,))
    if name == "detach":
        return Step(f"{o} = {x}.detach()", (o,))
    return None


def _broadcasting(vals, shape, exclude=()):
    """Names of values whose shape broadcasts to ``shape``."""
    out = []
    for k, u in vals.items():
        if k in exclude:
            continue
        try:
            if torch.broadcast_shapes(u.shape, shape) == shape:
                out.append(k)
        except RuntimeError:
            pass
    return sorted(out)


def _draw_op(d, x, v, vals, n, name):
    draw, o = d.draw, f"v{n}"
    if name in ("add", "mul", "where"):
        ys = [k for k in _broadcasting(vals, v.shape) if vals[k].dtype == v.dtype]
        y = draw(st.sampled_from(ys)) if ys else x
        if name == "where":
            m = d.const(
                np.asarray(
                    draw(st.lists(st.booleans(), min_size=v.numel(), max_size=v.numel())), bool
                ).reshape(v.shape)
            )
            return Step(f"{o} = T.where(T.tensor({m}), {x}, {y})", (o,))
        return Step(f"{o} = {x} {'+' if name == 'add' else '*'} {y}", (o,))
    if name == "matmul":
        if v.dim() < 2:
            return Step(f"{o} = {x} @ {x}" if v.dim() == 1 else f"{o} = {x} * 2", (o,))
        return Step(f"{o} = {x} @ {x}.mT", (o,))
    if name == "sum":
        return Step(
            f"{o} = {x}.sum({_dim(draw, v) if v.dim() and draw(st.booleans()) else ''})", (o,)
        )
    if name == "pow":
        return Step(f"{o} = {x} ** 2", (o,))
    if name == "neg":
        return Step(f"{o} = -{x}", (o,))
    return Step(f"{o} = {x}.{name}()", (o,))


def _draw_write(d, x, v, vals, name):
    draw = d.draw
    if name in ("add_", "mul_", "div_", "copy_"):
        ys = [
            k
            for k in _broadcasting(vals, v.shape, exclude=(x,))
            if not _aliased(vals[k], v)
            and _checked_overlap(vals[k], v)
            and not (name == "copy_" and _overwrites_history(vals[k], v))
            and not (name == "copy_" and _conj_overlap(vals[k], v))
            # two errors at once (an expanded target, a complex value into a real one):
            # staged's checks come in another order
            and not (_overlapping(v) and vals[k].is_complex() > v.is_complex())
        ]
        if name == "div_" or not ys or draw(st.integers(0, 3)) == 0:
            if name == "copy_":
                return None
            return Step(f"{x}.{name}({draw(st.sampled_from((2, 0.5, -1.5)))})")
        return Step(f"{x}.{name}({draw(st.sampled_from(ys))})")
    if name in ("clamp_", "relu_") and v.is_complex():  # an op torch has no complex form of
        return None
    if name == "conj_physical_" and not v.is_complex():  # torch writes nothing there
        return None
    if name in ("fill_", "zero_") and _overlapping(v) and v.requires_grad:
        return None  # torch's backward writes into the expanded gradient, and refuses
    if name == "clamp_":
        return Step(f"{x}.clamp_({draw(st.sampled_from((-1.0, -0.5)))}, 0.75)")
    if name == "fill_":
        # a real value into a complex tensor: torch's backward fails its own internal
        # assert (isFloatingType(grad) || input_is_complex == grad_is_complex)
        ys = [
            k
            for k, u in vals.items()
            if u.dim() == 0
            and k != x
            and u.is_complex() == v.is_complex()
            and not _overwrites_history(u, v)
        ]
        arg = draw(st.sampled_from(ys)) if ys and draw(st.booleans()) else "1.25"
        return Step(f"{x}.fill_({arg})")
    if name in ("masked_fill_", "index_add_", "setitem") and _overlapping(v):
        return None  # torch writes some elements of an expanded view, staged refuses all
    if name == "masked_fill_":
        m = d.const(_mask(draw, v.shape))
        return Step(f"{x}.masked_fill_(T.tensor({m}), -0.5)")
    if name == "index_add_":
        if not v.dim():
            return None
        dim = _dim(draw, v)
        idx = draw(st.lists(st.integers(0, v.shape[dim] - 1), min_size=1, max_size=3))
        shape = list(v.shape)
        shape[dim] = len(idx)
        ys = [
            k
            for k in _broadcasting(vals, torch.Size(shape), exclude=(x,))
            if vals[k].dtype == v.dtype and not (_shares(vals[k], v) or _aliased(vals[k], v))
        ]
        # a copy: torch's index_add_ saves its source (for its shape), so a later write
        # into it fails torch's backward, where staged saves the shape alone
        src = f"{draw(st.sampled_from(ys))}.expand{tuple(shape)}.clone()" if ys else "None"
        if src == "None":
            return None
        i = d.const(np.asarray(idx, np.int64))
        return Step(f"{x}.index_add_({dim}, T.tensor({i}), {src})")
    if name == "setitem":
        return _draw_setitem(d, x, v, vals)
    return Step(f"{x}.{name}()")


def _shares(a, b):
    """Whether ``a`` and ``b`` are views of one memory (a source read while its target is
    written: torch's result depends on its kernel's order, where it does not refuse)."""
    return (a._base if a._base is not None else a) is (b._base if b._base is not None else b)


def _aliased(a, b):
    """Whether ``a`` and ``b`` share memory through an alias (``detach()``), not as views
    of one base: staged's overlap check sees views of one base only (Note [overlapping
    writes] in staged/eager/ops/inplace.py)."""
    same = a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    return same and not _shares(a, b)


def _checked_overlap(a, b):
    """Whether a source ``a`` may share memory with its target ``b``: where both are
    contiguous torch's overlap check decides (a partial overlap raises), elsewhere its
    result is its kernel's order."""
    if not _shares(a, b):
        return True
    # (no dim of one: its stride is NumPy's, not torch's, module docstring)
    return a.is_contiguous() and b.is_contiguous() and 1 not in (*a.shape, *b.shape)


def _conj_overlap(src, v):
    """``v.copy_(src)`` of views of one memory, one of them a conj view (module
    docstring)."""
    return _shares(src, v) and (src.is_conj() or v.is_conj())


def _overwrites_history(src, v):
    """``v.copy_(src)`` (or ``fill_``) where both require grad: torch's Node sends a zero
    gradient into ``v``'s old history, whose saved tensors then fail their version check
    (``v = x.exp(); v.copy_(x)``); staged's drops that history (module docstring)."""
    return src.requires_grad and v.requires_grad


def _overlapping(v):
    return any(s == 0 and n > 1 for s, n in zip(v.stride(), v.shape))


def _mask(draw, shape):
    n = int(np.prod(shape))
    return np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)), bool).reshape(shape)


def _draw_setitem(d, x, v, vals):
    draw = d.draw
    form = draw(st.sampled_from(("basic", "mask", "index")))
    if form == "mask" or not v.dim():
        key = f"T.tensor({d.const(_mask(draw, v.shape))})"
    elif form == "index":
        dim = draw(st.integers(0, v.dim() - 1))
        size = v.shape[dim]
        idx = draw(
            st.lists(
                st.integers(-size, size - 1), min_size=1, max_size=3, unique_by=lambda i: i % size
            )
        )
        key = ":, " * dim + f"T.tensor({d.const(np.asarray(idx, np.int64))})"
    else:
        key = _basic_key(draw, v)
    try:
        target = eval(f"_v[{key}]", {"_v": v.detach(), "T": torch, **d.consts})  # noqa: S307
    except Exception:  # noqa: BLE001  (a key torch refuses: drawn as such)
        return Step(f"{x}[{key}] = 0.5")
    # v[...] = src, v[:] = src: torch's copy_ of v itself (_overwrites_history)
    whole = form == "basic" and (target.shape, target.stride()) == (v.shape, v.stride())
    ys = [
        k
        for k in _broadcasting(vals, target.shape, exclude=(x,))
        if not (_shares(vals[k], v) or _aliased(vals[k], v))
        and (form == "basic" or vals[k].dtype == v.dtype)
        and not (whole and _overwrites_history(vals[k], v))
    ]
    src = draw(st.sampled_from(ys)) if ys and draw(st.booleans()) else "0.5"
    return Step(f"{x}[{key}] = {src}")


# --- tests ----------------------------------------------------------------------------------
@settings(
    max_examples=EXAMPLES or 150,
    derandomize=not EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
@given(programs())
def test_views_and_inplace_match_torch(prog):
    check(prog)


@settings(
    max_examples=EXAMPLES or 60,
    derandomize=not EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
@given(programs(conj=True))
def test_conj_views_and_inplace_match_torch(prog):
    """Complex programs, half their views conj views (Note [conj views] in
    staged/eager/views.py): reads and writes through either side, autograd, is_conj()."""
    check(prog)


# chains of conj views, aliases (detach(), .data) and views of them, written at any link
_CHAIN_LINKS = {
    "conj": lambda t: t.conj(),
    "detach": lambda t: t.detach(),
    "data": lambda t: t.data,
    "slice": lambda t: t[..., 1:],
    "view": lambda t: t.view(t.shape),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "mT": lambda t: t.mT,
    "flatten": lambda t: t.flatten(),  # of a non-contiguous link: a copy, not a view
    "split": lambda t: t.split(1, dim=-1)[0],
}
_CHAIN_WRITES = {
    "mul_": lambda t, T: t.mul_(2j),
    "fill_": lambda t, T: t.fill_(0.5 - 1j),
    "copy_": lambda t, T: t.copy_(T.full(t.shape, 3 + 4j, dtype=T.complex64)),
    "setitem": lambda t, T: t.__setitem__((..., 0), 7 - 2j),
    "add_": lambda t, T: t.add_(1 + 1j),
}


def _chain(T, mode, links, writes) -> list:
    """Each link's ``is_conj()`` and resolved values after each write, or the error's type."""
    grad_mode = {"grad": contextlib.nullcontext, "no_grad": T.no_grad}
    out = []
    with grad_mode.get(mode, T.inference_mode)():
        ts = [T.tensor(np.array([[1 + 2j, 3 - 1j, 2 + 0.5j], [0.5j, -1 + 1j, 2 - 2j]], "c8"))]
        try:
            for link in links:
                ts.append(_CHAIN_LINKS[link](ts[-1]))
            for at, write in writes:
                _CHAIN_WRITES[write](ts[at % len(ts)], T)
                out.append([(t.is_conj(), t.resolve_conj().tolist()) for t in ts])
        except (RuntimeError, IndexError) as e:
            out.append(type(e).__name__)
    return out


@settings(
    max_examples=EXAMPLES or 300,
    derandomize=not EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
)
@given(
    st.sampled_from(["grad", "no_grad", "inference"]),
    st.lists(st.sampled_from(sorted(_CHAIN_LINKS)), min_size=1, max_size=7),
    st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from(sorted(_CHAIN_WRITES))), min_size=1, max_size=3
    ),
)
def test_writes_along_chains_of_conj_views_and_aliases_match_torch(mode, links, writes):
    """A write anywhere along ``x.conj().detach()[1:].conj().data ...`` reaches every link as
    torch's (which share one memory) and ``is_conj()`` is torch's at each: found lost (a conj
    view of a conj view's ``detach()``; any conj view of an inference tensor's alias), sent
    into the base through a reshape that torch copies (a conj view's copy was contiguous
    where the view is not), and ``is_conj()`` False on views of a conj view's ``detach()``."""
    assert _chain(staged, mode, links, writes) == _chain(torch, mode, links, writes)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.view(x.shape),
        lambda x: x.reshape(x.shape),
        lambda x: x.permute(0, 1),
        lambda x: x.transpose(1, 1),
        lambda x: x.expand(x.shape),
        lambda x: x.squeeze(),
        lambda x: x[:],
        lambda x: x[...],
    ],
    ids=["view", "reshape", "permute", "transpose", "expand", "squeeze", ":", "..."],
)
def test_an_identity_view_is_a_view_of_its_own(make):
    """``x.view(x.shape)``, ``x[:]`` ... returned ``x`` itself: ``retain_grad`` on it got
    x's whole gradient (5 where torch's is 2), and ``requires_grad_()`` on a view of a
    plain tensor made the tensor require grad."""
    for lib in (staged, torch):
        leaf = lib.ones(2, 3, requires_grad=True)
        x = leaf * 1
        v = make(x)
        assert v is not x and v._base is x
        v.retain_grad()
        ((v * 2).sum() + (x * 3).sum()).backward()
        np.testing.assert_array_equal(_array(v.grad), np.full(v.shape, 2, np.float32))
        b = lib.ones(2, 3)
        make(b).requires_grad_()
        assert not b.requires_grad


_MULTI = "This view is the output of a function that returns multiple views"


@pytest.mark.parametrize(
    "pieces, name",
    [
        (lambda x: x.unbind(1), "Output 1 of Unbind"),
        (lambda x: x.split(1), "Output 1 of Split"),
        (lambda x: x.split([1, 1]), "Output 1 of SplitWithSizes"),
        (lambda x: x.chunk(2), "Output 1 of Split"),
    ],
    ids=["unbind", "split", "split_with_sizes", "chunk"],
)
def test_writing_into_a_multi_output_view_raises(pieces, name):
    """Writes into ``x.unbind()[1]`` (or ``split``, ``chunk``) with grad involved went
    through, where torch refuses (Note [multi-output views] in staged/eager/views.py)."""
    for lib in (staged, torch):
        x = lib.ones(2, 2, requires_grad=True).clone()
        with pytest.raises(RuntimeError, match=f"{name} is a view and is being modified") as e:
            pieces(x)[1].mul_(2)
        assert _MULTI in str(e.value)
        with pytest.raises(RuntimeError, match=_MULTI):  # a view of one
            pieces(x)[1][:1].mul_(2)
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            pieces(lib.ones(2, 2))[1].mul_(lib.ones(1, requires_grad=True))
        pieces(lib.ones(2, 2))[1].mul_(2)  # no grad involved: allowed
        u = pieces(x)
        with lib.no_grad():
            pieces(x)[1].mul_(2)  # made and written under no_grad: allowed
            of_one = u[1][:1]
        with pytest.raises(RuntimeError, match="Given that this use case is ambiguous"):
            of_one.mul_(2)  # a view of one made under no_grad: a no_grad view
        u = pieces(x)
        x.add_(1)
        with pytest.raises(RuntimeError, match="its base or another view of its base") as e:
            u[1].grad_fn
        assert _MULTI in str(e.value)


def test_writing_into_an_as_strided_view_with_repeated_elements_raises():
    """``x.as_strided((2,), (0,)).copy_(src)`` wrote each element in turn into the one
    memory location (the last won) where torch refuses (its internal overlap check)."""
    for lib in (staged, torch):
        x = lib.zeros(3)
        v = x.as_strided((2,), (0,), 1)
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            v.copy_(lib.tensor([1.0, 2.0]))
        v.fill_(4.0)  # one value everywhere: torch writes it
        np.testing.assert_array_equal(_array(x), [0, 4, 0])


@pytest.mark.parametrize("write", ["sigmoid_", "exp_", "relu_"])
def test_a_write_after_an_inplace_op_saved_its_output_fails_backward(write):
    """``v.sigmoid_()`` saves its output, the written ``v``: a later write into ``v`` (here
    under no_grad) went unseen (staged saved the out-of-place result, never written
    again), and the backward used the value before the write where torch raises."""
    for lib in (staged, torch):
        x = lib.tensor([0.5, -1.0], requires_grad=True)
        v = x * 1
        getattr(v, write)()
        with lib.no_grad():
            v.mul_(3)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            v.sum().backward()


def test_a_view_of_a_no_grad_view_is_a_no_grad_view():
    """``v = x[1:]`` under no_grad, ``w = v[0]`` outside it: torch's ``w``
    inherits v's creation (propagate_creation_meta), so after a write into ``x`` reading
    its grad_fn raises; staged's ``w`` counted as made with grad mode and regenerated."""
    for lib in (staged, torch):
        x = lib.zeros(2, 2)
        with lib.no_grad():
            v = x[1:]
        w = v[0]
        x.add_(lib.ones(2, 2, requires_grad=True))
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and its"):
            w.grad_fn
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is"):
            w.mul_(lib.ones(2, requires_grad=True))


@pytest.mark.parametrize(
    "write",
    [
        lambda v, y: v.masked_fill_(v > 0, -0.5),
        lambda v, y: v.scatter_add_(
            0, v.new_zeros(1, dtype=torch.int64 if isinstance(v, torch.Tensor) else staged.int64), y
        ),
        lambda v, y: v.__setitem__(v > 5, 1.0),
    ],
    ids=["masked_fill_", "scatter_add_", "setitem"],
)
def test_writing_into_an_unread_stale_view_raises_as_into_a_leaf(write):
    """``v = b[::2]`` before ``b`` required grad: until its grad_fn is read, torch's
    check counts ``v`` as a leaf and refuses the write; masked_fill_, scatter_add_ and
    setitem computed the new value from ``v`` first (reading, so regenerating, its
    grad_fn) and let it through."""
    for lib in (staged, torch):
        b = lib.zeros(4)
        v = b[::2]
        b.add_(lib.ones(4, requires_grad=True))
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being"):
            write(v, lib.ones(1))
