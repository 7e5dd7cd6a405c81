"""nn.Module hooks against torch 2.13 (the eighteenth trust probe), what real programs do
with them: forward pre-hooks and forward hooks (``with_kwargs``, ``prepend``,
``always_call`` when forward raises, replacements as a tuple or a single value) on nested
submodules and containers, removed through their handles during and between calls,
registered twice, and the global hooks' place before the module's own; full backward hooks
and backward pre-hooks (``grad_input``/``grad_output`` with several, non-tensor, keyword
and unused inputs and outputs, replacements, tensor hooks and ``retain_grad`` on the same
tensors, in-place ops on hooked outputs, a module called twice, outputs that are views of
inputs, grad modes), the legacy ``register_backward_hook``; the state-dict hooks
(``register_state_dict_pre_hook``, ``_register_state_dict_hook``/
``register_state_dict_post_hook``, the load pre- and post-hooks editing incompatible keys).
Each program runs under both libraries from the same weights and logs every hook call in
order with its arguments; the logs, results and gradients must agree. Training steps whose
modules carry hooks (scaling grads, changing outputs, recording into lists, buffers and
dicts, reading and counting on the Module they get) run compiled by ``staged.compile``
call for call against eager and torch, reading what the hooks recorded after each call.
The strict xfails are faults; each ``reason`` names the function to change."""

from __future__ import annotations

import copy
import functools
import pickle
import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch

import staged
from tests.checks import message
from tests.nn.test_module_hooks import B, W, X, linear, mlp  # the same weights and layers

# --- harness -------------------------------------------------------------------------------


def summary(v):
    """A comparable record of a hook argument: tensors as (dtype, shape, values)."""
    if isinstance(v, (tuple, list)):
        return tuple(summary(x) for x in v)
    if isinstance(v, dict):
        return {k: summary(x) for k, x in v.items()}
    if isinstance(v, (staged.Tensor, torch.Tensor)):
        a = np.array(v.detach().tolist(), np.float64)
        return ("T", str(v.dtype).rpartition(".")[2], tuple(v.shape), a)
    return v


def _same(a, b, path="log", atol=1e-6, rel=1e-5):
    """``a`` equals ``b``; arrays to ``atol`` plus ``rel`` of the largest entry (float32
    sums)."""
    if isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and a.shape == b.shape, (path, a, b)
        tol = atol + rel * float(np.abs(b).max(initial=0.0))
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=tol, err_msg=path)
    elif isinstance(b, (tuple, list)):
        assert isinstance(a, (tuple, list)) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", atol, rel)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b), (path, a, b)
        for k in b:
            _same(a[k], b[k], f"{path}[{k}]", atol, rel)
    elif isinstance(b, float):  # .item() of a float32 sum
        assert isinstance(a, float) and abs(a - b) <= atol + 1e-5 * abs(b), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _warned(caught) -> list:
    """The hook warnings (by category and message), in order, once each."""
    out: list = []
    for w in caught:
        text = str(w.message).replace("torch.", "staged.")
        if "hook" in text and (w.category.__name__, text) not in out:
            out.append((w.category.__name__, text))
    return out


def run(program, ns):
    """``program(ns, log)``'s log, then what it raised (type and message), then its hook
    warnings."""
    log: list = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            program(ns, log)
        except Exception as e:  # noqa: BLE001 -- compared with torch's
            text = message(e) if ns is staged else str(e).replace("torch.", "staged.")
            log.append(("raised", type(e).__name__, text))
    log.append(("warnings", _warned(caught)))
    return log


def both(program, rel=1e-5):
    """``program`` under staged and torch: the same events in the same order, the same
    arguments, results, errors and warnings (arrays within ``rel`` of their largest
    entry)."""
    ours, want = run(program, staged), run(program, torch)
    names = [e[0] if isinstance(e, tuple) else e for e in want]
    assert [e[0] if isinstance(e, tuple) else e for e in ours] == names, (ours, want)
    _same(ours, want, rel=rel)
    return want


def rec(log, name, ret=None):
    """A hook logging ``name`` and its arguments after the module; ``ret(*args)`` returned."""

    def hook(*args):
        log.append((name, summary(args[1:])))
        return ret(*args) if ret else None

    return hook


def module(ns, forward, name="M"):
    """A module of library ``ns`` running ``forward(self, *args, **kwargs)``."""
    return type(name, (ns.nn.Module,), {"forward": forward})()


def grads(log, *tensors):
    log.append(("grads", tuple(summary(t.grad) for t in tensors)))


def leaf(ns, v=X, grad=True):
    return ns.tensor(v, requires_grad=grad)


def globals_(ns):
    return ns.nn.modules.module


@pytest.fixture(autouse=True)
def _no_global_hooks_left():
    yield
    for ns in (staged, torch):
        g = globals_(ns)
        for d in (
            g._global_forward_pre_hooks,
            g._global_forward_hooks,
            g._global_backward_pre_hooks,
            g._global_backward_hooks,
        ):
            assert not d, "a case left a global hook"


# --- forward pre-hooks and forward hooks ---------------------------------------------------------

PRE_RETURNS = {
    "none": None,
    "tuple": lambda m, a: (a[0] * 2,),
    "single": lambda m, a: a[0] + 1,
    "expanded": lambda m, a: (a[0][:, :1].expand(4, 2) * 1,),
}
FWD_RETURNS = {
    "none": None,
    "tensor": lambda m, a, o: o * -1,
    "tuple": lambda m, a, o: (o, o.sum()),
}


@pytest.mark.parametrize("prepend", [False, True])
@pytest.mark.parametrize("fwd", list(FWD_RETURNS))
@pytest.mark.parametrize("pre", list(PRE_RETURNS))
def test_pre_and_forward_hook_returns(pre, fwd, prepend):
    def program(ns, log):
        lin = linear(ns)
        lin.register_forward_pre_hook(rec(log, "pre-a"))
        lin.register_forward_pre_hook(rec(log, "pre-b", PRE_RETURNS[pre]), prepend=prepend)
        lin.register_forward_hook(rec(log, "fwd-a"))
        lin.register_forward_hook(rec(log, "fwd-b", FWD_RETURNS[fwd]), prepend=prepend)
        lin.register_forward_hook(rec(log, "fwd-c"))
        x = leaf(ns)
        out = lin(x)
        log.append(("out", summary(out)))
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        grads(log, x, lin.weight)

    both(program)


KW_PRE = {
    "none": lambda m, a, kw: None,
    "args-and-kwargs": lambda m, a, kw: ((a[0] + 1,), {**kw, "scale": kw.get("scale", 1) * 3}),
    "drop-kwarg": lambda m, a, kw: (a, {}),
    "add-kwarg": lambda m, a, kw: (a, {**kw, "shift": a[0] * 0 + 5}),
    "bad-return": lambda m, a, kw: a,
    "list-pair": lambda m, a, kw: [a, kw],
}


def _scaled(ns):
    def forward(self, x, *, scale=1.0, shift=None):
        y = x * scale
        return y if shift is None else y + shift

    return module(ns, forward, "Scaled")


@pytest.mark.parametrize("kw_fwd", [False, True])
@pytest.mark.parametrize("pre", list(KW_PRE))
def test_forward_hooks_with_kwargs(pre, kw_fwd):
    def program(ns, log):
        m = _scaled(ns)
        m.register_forward_pre_hook(rec(log, "pre", KW_PRE[pre]), with_kwargs=True)
        m.register_forward_pre_hook(rec(log, "pre-plain"))
        if kw_fwd:
            m.register_forward_hook(rec(log, "fwd"), with_kwargs=True)
        else:
            m.register_forward_hook(rec(log, "fwd"))
        log.append(("out", summary(m(ns.ones(2), scale=2.0))))
        log.append(("out-no-kwargs", summary(m(ns.ones(2)))))

    both(program)


RAISE_AT = ["pre-hook", "forward", "first-fwd-hook", "last-fwd-hook", "nowhere"]


@pytest.mark.parametrize("kwargs", [False, True])
@pytest.mark.parametrize("where", RAISE_AT)
def test_always_call_hooks(where, kwargs):
    def program(ns, log):
        def forward(self, x, k=1.0):
            if where == "forward":
                raise ValueError("forward failed")
            return x * k

        def boom(*a):
            log.append(("boom", len(a)))
            raise KeyError("hook failed")

        m = module(ns, forward)
        g = globals_(ns).register_module_forward_hook(rec(log, "global-always"), always_call=True)
        try:
            m.register_forward_pre_hook(boom if where == "pre-hook" else rec(log, "pre"))
            if where == "first-fwd-hook":
                m.register_forward_hook(boom)
            m.register_forward_hook(rec(log, "plain"))
            m.register_forward_hook(
                rec(log, "always", lambda *a: a[-1] if a[-1] is None else a[-1] + 100),
                always_call=True,
                with_kwargs=kwargs,
            )
            m.register_forward_hook(rec(log, "plain-2"))
            if where == "last-fwd-hook":
                m.register_forward_hook(boom)
            m.register_forward_hook(rec(log, "always-last"), always_call=True)
            log.append(("out", summary(m(ns.ones(2), k=3.0))))
        finally:
            g.remove()

    both(program)


def test_always_call_hook_sees_the_backward_hook_inputs():
    """The inputs an ``always_call`` hook gets after forward raised are those forward got:
    with a backward hook, the outputs of its identity Node."""

    def program(ns, log):
        def forward(self, x):
            raise ValueError("forward failed")

        m = module(ns, forward)
        m.register_full_backward_hook(rec(log, "bw"))
        m.register_forward_hook(
            lambda mod, a, o: log.append(("always", a[0].grad_fn.name(), o)), always_call=True
        )
        m(ns.ones(2, requires_grad=True))

    both(program)


def test_always_call_hook_error_while_forward_raises_is_a_warning():
    def program(ns, log):
        def forward(self, x):
            raise ValueError("forward failed")

        m = module(ns, forward)
        g = globals_(ns).register_module_forward_hook(lambda *a: 1 / 0, always_call=True)
        m.register_forward_hook(lambda *a: [][1], always_call=True)
        try:
            m(ns.ones(1))
        finally:
            g.remove()

    log = both(program)
    assert len(log[-1][1]) == 2


def _container(ns, kind):
    """A model of ``kind`` whose submodules are named; its output for ``X``."""
    if kind == "sequential":
        return mlp(ns)
    if kind == "nested-sequential":
        return ns.nn.Sequential(ns.nn.Sequential(linear(ns), ns.nn.Tanh()), linear(ns, W.T, B[:2]))
    if kind == "modulelist":
        layers = ns.nn.ModuleList([linear(ns), ns.nn.Tanh(), linear(ns, W.T, B[:2])])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

        m = module(ns, forward, "Stack")
        m.layers = layers
        return m
    if kind == "moduledict":
        layers = ns.nn.ModuleDict(
            {"inp": linear(ns), "act": ns.nn.ReLU(), "out": linear(ns, W.T.copy(), B[:2])}
        )

        def forward(self, x):
            return self.d["out"](self.d["act"](self.d["inp"](x)))

        m = module(ns, forward, "Dict")
        m.d = layers
        return m
    raise AssertionError(kind)


CONTAINERS = ["sequential", "nested-sequential", "modulelist", "moduledict"]


@pytest.mark.parametrize("use_globals", [False, True])
@pytest.mark.parametrize("kind", CONTAINERS)
def test_hooks_on_every_submodule_fire_in_torch_order(kind, use_globals):
    def program(ns, log):
        model = _container(ns, kind)
        hs = []
        if use_globals:
            g = globals_(ns)
            hs += [
                g.register_module_forward_pre_hook(
                    lambda m, a: log.append(("g-pre", type(m).__name__))
                ),
                g.register_module_forward_hook(
                    lambda m, a, o: log.append(("g-fwd", type(m).__name__))
                ),
                g.register_module_full_backward_pre_hook(
                    lambda m, go: log.append(("g-bpre", type(m).__name__, summary(go)))
                ),
                g.register_module_full_backward_hook(
                    lambda m, gi, go: log.append(("g-bw", type(m).__name__, summary(gi)))
                ),
            ]
        try:
            for name, m in model.named_modules():
                m.register_forward_pre_hook(rec(log, f"pre[{name}]"))
                m.register_forward_hook(rec(log, f"fwd[{name}]"))
                m.register_full_backward_pre_hook(rec(log, f"bpre[{name}]"))
                m.register_full_backward_hook(rec(log, f"bw[{name}]"))
            x = leaf(ns)
            model(x).pow(2).sum().backward()
            grads(log, x, *model.parameters())
        finally:
            for h in hs:
                h.remove()

    both(program)


HOOK_KINDS = ["forward_pre", "forward", "full_backward_pre", "full_backward"]


def _register(m, kind, hook):
    return getattr(m, f"register_{kind}_hook")(hook)


def _fire(ns, m, log, x=None):
    """One call of ``m`` and a backward through it."""
    x = leaf(ns) if x is None else x
    m(x).sum().backward()
    log.append(("called",))


REMOVALS = ["self-during", "later-during", "earlier-during", "between", "context", "twice"]


@pytest.mark.parametrize("how", REMOVALS)
@pytest.mark.parametrize("kind", HOOK_KINDS)
def test_removal_through_handles(kind, how):
    def program(ns, log):
        lin = linear(ns)
        handles: dict = {}

        def remover(name, target):
            def hook(*args):
                log.append((name,))
                if target in handles:
                    handles[target].remove()

            return hook

        handles["a"] = _register(lin, kind, rec(log, "a"))
        if how in ("self-during", "later-during", "earlier-during"):
            target = {"self-during": "r", "later-during": "c", "earlier-during": "a"}[how]
            handles["r"] = _register(lin, kind, remover("r", target))
        handles["c"] = _register(lin, kind, rec(log, "c"))
        _fire(ns, lin, log)
        if how == "between":
            handles["a"].remove()
        if how == "twice":
            handles["a"].remove()
            handles["a"].remove()
        if how == "context":
            with _register(lin, kind, rec(log, "ctx")):
                _fire(ns, lin, log)
        _fire(ns, lin, log)

    both(program)


@pytest.mark.parametrize("kind", HOOK_KINDS)
def test_the_same_hook_registered_twice(kind):
    def program(ns, log):
        lin = linear(ns)
        hook = rec(log, "h")
        h1 = _register(lin, kind, hook)
        _register(lin, kind, hook)
        _fire(ns, lin, log)
        h1.remove()
        _fire(ns, lin, log)

    both(program)


@pytest.mark.parametrize("prepend", [False, True])
def test_global_hooks_come_before_module_hooks_even_prepended(prepend):
    def program(ns, log):
        g = globals_(ns)
        lin = linear(ns)
        hs = [
            g.register_module_forward_pre_hook(rec(log, "g-pre", lambda m, a: (a[0] * 2,))),
            g.register_module_forward_hook(rec(log, "g-fwd", lambda m, a, o: o + 1)),
            g.register_module_full_backward_pre_hook(
                rec(log, "g-bpre", lambda m, go: (go[0] * 3,))
            ),
            g.register_module_full_backward_hook(rec(log, "g-bw")),
        ]
        try:
            lin.register_forward_pre_hook(rec(log, "pre"), prepend=prepend)
            lin.register_forward_hook(rec(log, "fwd"), prepend=prepend)
            lin.register_full_backward_pre_hook(rec(log, "bpre"), prepend=prepend)
            lin.register_full_backward_hook(rec(log, "bw"), prepend=prepend)
            x = leaf(ns)
            lin(x).sum().backward()
            grads(log, x, lin.weight)
        finally:
            for h in hs:
                h.remove()
        _fire(ns, lin, log)

    both(program)


def test_global_hooks_removed_inside_a_hook():
    def program(ns, log):
        g = globals_(ns)
        model = mlp(ns)
        hs: list = []

        def once(m, a):
            log.append(("once", type(m).__name__))
            hs[0].remove()

        hs.append(g.register_module_forward_pre_hook(once))
        hs.append(g.register_module_forward_hook(rec(log, "g-fwd")))
        try:
            model(leaf(ns))
            model(leaf(ns))
        finally:
            for h in hs:
                h.remove()

    both(program)


# --- full backward hooks: what they receive ------------------------------------------------------


def _mod_forms(ns):
    """Modules with several, non-tensor, keyword, unused inputs and outputs: name ->
    (module, call(module) -> output to sum, inputs to read grads of)."""

    def two_in(self, a, b):
        return a * b + b

    def int_between(self, a, k, b):
        return (a * k - b).exp()

    def kw_tensor(self, a, *, w):
        return a * w

    def two_out(self, a, b):
        return a + b, a * b

    def out_with_int(self, a):
        return a.sin(), 7, a.cos()

    def unused_out(self, a):
        return a * 2, a * 3

    def none_in(self, a, b=None):
        return a * 2

    def list_out(self, a):
        return [a * 2, a * 3]

    def dict_out(self, a):
        return {"y": a * 2}

    def out_is_in(self, a, b):
        return a, b * 2

    def with_indices(self, a):
        return a * 2, a.argmax()

    def nested_out(self, a, b):
        return a * b, (a.exp(), b * 3)

    def named_out(self, a, b):
        return Pair(a * b, a - b)

    a = ns.tensor([1.0, -2.0, 0.5], requires_grad=True)
    b = ns.tensor([0.5, 1.5, -1.0], requires_grad=True)
    c = ns.tensor([2.0, 2.0, 2.0])  # requires no grad
    first = lambda o: o[0] if isinstance(o, (tuple, list)) else o  # noqa: E731
    return {
        "two-in": (two_in, lambda m: m(a, b), (a, b)),
        "one-in-no-grad": (two_in, lambda m: m(a, c), (a,)),
        "int-between": (int_between, lambda m: m(a, 3, b), (a, b)),
        "kw-tensor": (kw_tensor, lambda m: m(a, w=b), (a, b)),
        "two-out": (two_out, lambda m: m(a, b)[0] * 2 + m_out(m(a, b)), (a, b)),
        "out-with-int": (out_with_int, lambda m: sum_tensors(m(a)), (a,)),
        "unused-out": (unused_out, lambda m: m(a)[1], (a,)),
        "none-in": (none_in, lambda m: m(a, None), (a,)),
        "list-out": (list_out, lambda m: first(m(a)), (a,)),
        "dict-out": (dict_out, lambda m: m(a)["y"], (a,)),
        "out-is-in": (out_is_in, lambda m: sum_tensors(m(a, b)), (a, b)),
        "out-with-indices": (with_indices, lambda m: m(a)[0], (a,)),
        "nested-out": (nested_out, lambda m: m(a, b)[0] + m(a, b)[1][0], (a, b)),
        "namedtuple-out": (named_out, lambda m: named_sum(m(a, b)), (a, b)),
    }


Pair = namedtuple("Pair", ["prod", "diff"])


def named_sum(o):
    """A namedtuple output keeps its type through the backward hook's identity."""
    return o.prod * 2 + o.diff


def m_out(o):
    return o[1]


def sum_tensors(o):
    return sum(t.sum() for t in o if not isinstance(t, int))


FORMS = [
    "two-in",
    "one-in-no-grad",
    "int-between",
    "kw-tensor",
    "two-out",
    "out-with-int",
    "unused-out",
    "none-in",
    "list-out",
    "dict-out",
    "out-is-in",
    "out-with-indices",
    "nested-out",
    "namedtuple-out",
]
BW_MODES = {
    "record": (None, None),
    "pre-scales": (lambda m, go: tuple(None if g is None else g * 2 for g in go), None),
    "bw-scales": (None, lambda m, gi, go: tuple(None if g is None else g * -3 for g in gi)),
    "bw-drops-first": (None, lambda m, gi, go: (None,) + tuple(gi[1:])),
}


@pytest.mark.parametrize("mode", list(BW_MODES))
@pytest.mark.parametrize("form", FORMS)
def test_backward_hook_arguments_and_replacements(form, mode):
    def program(ns, log):
        fwd, call, inputs = _mod_forms(ns)[form]
        m = module(ns, fwd)
        pre, bw = BW_MODES[mode]
        m.register_full_backward_pre_hook(rec(log, "bpre", pre))
        m.register_full_backward_hook(rec(log, "bw", bw))
        m.register_full_backward_hook(rec(log, "bw-after"))
        out = call(m)
        out.sum().backward()
        grads(log, *inputs)

    both(program)


def test_backward_hook_returning_a_tensor_not_a_tuple():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_hook(lambda m, gi, go: gi[0] * 2)
        x = leaf(ns)
        lin(x).sum().backward()
        grads(log, x)

    both(program)


def test_backward_pre_hook_returning_a_list():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_pre_hook(lambda m, go: [go[0] * 2])
        x = leaf(ns)
        lin(x).sum().backward()
        grads(log, x, lin.weight)

    both(program)


def test_backward_hook_grad_of_wrong_shape():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_hook(lambda m, gi, go: (gi[0][:1],))
        x = leaf(ns)
        lin(x).sum().backward()
        grads(log, x)

    both(program)


# --- tensor hooks, retain_grad and backward hooks on the same tensors ----------------------------

TENSOR_HOOK_PLACES = ["output", "input-leaf", "input-nonleaf", "hooked-output", "hooked-input"]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("place", TENSOR_HOOK_PLACES)
def test_tensor_hooks_and_retain_grad_with_module_hooks(place, replace):
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_pre_hook(rec(log, "bpre", lambda m, go: (go[0] * 2,)))
        lin.register_full_backward_hook(rec(log, "bw", lambda m, gi, go: (gi[0] + 1,)))
        seen: dict = {}

        def tensor_hook(name):
            def hook(g):
                log.append((name, summary(g)))
                return g * 10 if replace else None

            return hook

        x0 = leaf(ns)
        x = x0 * 1 if place == "input-nonleaf" else x0
        if place in ("input-leaf", "input-nonleaf"):
            x.register_hook(tensor_hook("t-in"))
            x.retain_grad()

        def watch(key, t, name):
            """A tensor hook and retain_grad on ``t``, an argument a module hook got."""
            t.register_hook(tensor_hook(name))
            t.retain_grad()
            seen[key] = t

        if place == "hooked-input":  # the input before and after the hooks' identity
            lin.register_forward_pre_hook(
                lambda m, a: a[0].register_hook(tensor_hook("t-in")) and None
            )
            lin.register_forward_hook(lambda m, a, o: watch("a", a[0], "t-in-wrapped"))
        if place == "hooked-output":  # the output before the hooks' identity
            lin.register_forward_hook(lambda m, a, o: watch("o", o, "t-out-raw"))
        y = lin(x)
        if place == "output":
            y.register_hook(tensor_hook("t-out"))
            y.retain_grad()
        (y * 2).sum().backward()
        log.append(("x.grad", summary(x.grad)))  # a leaf, or retained
        grads(log, x0, lin.weight)
        if place == "output":
            log.append(("y.grad", summary(y.grad)))
        if "o" in seen:
            log.append(("o.grad", summary(seen["o"].grad)))
        if "a" in seen:
            log.append(("a.grad", summary(seen["a"].grad)))

    both(program)


def test_post_accumulate_grad_hook_after_module_hooks():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_hook(rec(log, "bw"))
        lin.register_full_backward_pre_hook(rec(log, "bpre"))
        lin.weight.register_post_accumulate_grad_hook(
            lambda p: log.append(("acc-w", summary(p.grad)))
        )
        x = leaf(ns)
        x.register_post_accumulate_grad_hook(lambda p: log.append(("acc-x", summary(p.grad))))
        lin(x).sum().backward()

    both(program)


# --- in-place ops, views, a module called twice ----------------------------------------------------

INPLACE = [
    "output-add_",
    "output-view-mul_",
    "relu-inplace",
    "forward-writes-input",
    "hook-writes-output",
    "output-clone-add_",
]


@pytest.mark.parametrize("how", INPLACE)
def test_inplace_ops_around_full_backward_hooks(how):
    def program(ns, log):
        if how == "relu-inplace":
            m = ns.nn.ReLU(inplace=True)
        elif how == "forward-writes-input":
            m = module(ns, lambda self, x: x.mul_(2))
        else:
            m = linear(ns)
        m.register_full_backward_hook(rec(log, "bw"))
        if how == "hook-writes-output":
            m.register_forward_hook(lambda mod, a, o: o.add_(1))
        x0 = leaf(ns)
        x = x0 * 1
        y = m(x)
        if how == "output-add_":
            y.add_(1)
        elif how == "output-view-mul_":
            y[0].mul_(2)
        elif how == "output-clone-add_":
            y = y.clone().add_(1)
        log.append(("y", summary(y)))
        y.sum().backward()
        grads(log, x0)

    both(program)


def test_inplace_on_hooked_input_after_forward():
    def program(ns, log):
        seen = []
        lin = linear(ns)
        lin.register_full_backward_hook(rec(log, "bw"))
        lin.register_forward_hook(lambda m, a, o: seen.append(a[0]))
        x0 = leaf(ns)
        y = lin(x0 * 1)
        seen[0].add_(1)
        y.sum().backward()
        grads(log, x0)

    both(program)


VIEW_FORMS = {
    "identity": lambda self, x: x,
    "index": lambda self, x: x[0],
    "view": lambda self, x: x.view(-1),
    "transpose": lambda self, x: x.t(),
    "detach": lambda self, x: x.detach(),
}


@pytest.mark.parametrize("form", list(VIEW_FORMS))
def test_output_is_a_view_of_the_input(form):
    def program(ns, log):
        m = module(ns, VIEW_FORMS[form])
        m.register_full_backward_pre_hook(rec(log, "bpre"))
        m.register_full_backward_hook(rec(log, "bw", lambda mod, gi, go: tuple(g * 2 for g in gi)))
        x0 = leaf(ns)
        x = x0 * 1
        y = m(x)
        log.append(("view", y._base is x if hasattr(y, "_base") else None, y.requires_grad))
        (y * ns.arange(y.numel()).reshape(y.shape)).sum().backward() if y.requires_grad else None
        grads(log, x0)

    both(program)


@pytest.mark.parametrize("same_input", [False, True])
def test_module_called_twice_in_one_forward(same_input):
    def program(ns, log):
        lin = linear(ns, W[:2, :2].copy(), B[:2])
        lin.register_forward_hook(rec(log, "fwd"))
        lin.register_full_backward_pre_hook(rec(log, "bpre"))
        lin.register_full_backward_hook(rec(log, "bw", lambda m, gi, go: (gi[0] * 2,)))
        x = leaf(ns)
        h = lin(x)
        y = lin(x if same_input else h.tanh())
        (h.sum() * 0.5 + y.pow(2).sum()).backward()
        grads(log, x, lin.weight)

    both(program)


def test_two_backward_calls_through_one_forward():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_hook(rec(log, "bw"))
        lin.register_full_backward_pre_hook(rec(log, "bpre"))
        x = leaf(ns)
        y = lin(x)
        y.sum().backward(retain_graph=True)
        (y * 2).sum().backward()
        grads(log, x)

    both(program)


def test_autograd_grad_through_hooked_module():
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_hook(rec(log, "bw", lambda m, gi, go: (gi[0] * 5,)))
        x = leaf(ns)
        (g,) = ns.autograd.grad(lin(x).sum(), [x])
        log.append(("g", summary(g)))
        (gw,) = ns.autograd.grad(lin(x).sum(), [lin.weight])
        log.append(("gw", summary(gw)))
        grads(log, x)

    both(program)


def _unused_input(ns, log):
    """An input the forward ignores gets zeros from the hooks' identity Node, not None."""
    m = module(ns, lambda self, a, b: a * 2)
    m.register_full_backward_hook(rec(log, "bw"))
    a, b = ns.ones(2, requires_grad=True), ns.ones(2, requires_grad=True)
    m(a, b).sum().backward()
    grads(log, a, b)


def _same_tensor_twice(ns, log):
    m = module(ns, lambda self, a, b: a * b)
    m.register_full_backward_hook(rec(log, "bw", lambda mod, gi, go: (gi[0], gi[1] * 0)))
    m.register_full_backward_pre_hook(rec(log, "bpre"))
    a = ns.tensor([1.0, 2.0], requires_grad=True)
    m(a, a).sum().backward()
    grads(log, a)


def _deepcopied(ns, log):
    lin = linear(ns)
    lin.register_forward_hook(rec(log, "fwd"))
    lin.register_full_backward_hook(rec(log, "bw"))
    c = copy.deepcopy(lin)
    x = leaf(ns)
    c(x).sum().backward()
    grads(log, x, c.weight, lin.weight)


def _global_kwargs_hook_when_forward_raises(ns, log):
    """torch calls a global ``with_kwargs`` always-call hook without the kwargs once
    forward raised (its ``_call_impl`` checks only the module's dict): matched."""

    def forward(self, x, k=1):
        raise ValueError("forward failed")

    g = globals_(ns)
    hs = [
        g.register_module_forward_hook(
            lambda *a: log.append(("always", len(a))), with_kwargs=True, always_call=True
        ),
        g.register_module_forward_hook(lambda *a: log.append(("kw", len(a))), with_kwargs=True),
    ]
    try:
        linear(ns)(leaf(ns))
        module(ns, forward)(ns.ones(1), k=2)
    finally:
        for h in hs:
            h.remove()


def _pre_hook_fills_a_none_grad(ns, log):
    m = module(ns, lambda self, a: (a * 2, a * 3))
    m.register_full_backward_pre_hook(rec(log, "bpre", lambda mod, go: (go[0], ns.ones(2))))
    a = ns.ones(2, requires_grad=True)
    m(a)[0].sum().backward()
    grads(log, a)


def _hook_returns_grad_for_non_tensor(ns, log):
    m = module(ns, lambda self, a, k: a * k)
    m.register_full_backward_hook(rec(log, "bw", lambda mod, gi, go: (gi[0], ns.ones(2))))
    a = ns.ones(2, requires_grad=True)
    m(a, 3).sum().backward()
    grads(log, a)


def _keyword_only_inputs(ns, log):
    m = module(ns, lambda self, *, a: a * 2)
    m.register_full_backward_hook(rec(log, "bw"))
    a = ns.ones(2, requires_grad=True)
    m(a=a).sum().backward()
    grads(log, a)


def _double_backward(ns, log):
    m = module(ns, lambda self, a: a.pow(3))
    m.register_full_backward_hook(rec(log, "bw"))
    x = ns.tensor([1.0, 2.0], requires_grad=True)
    (g,) = ns.autograd.grad(m(x).sum(), x, create_graph=True)
    log.append(("g", summary(g)))
    g.sum().backward()
    grads(log, x)


def _module_output_fed_back(ns, log):
    lin = linear(ns)
    lin.register_full_backward_hook(rec(log, "bw"))
    x = leaf(ns)
    lin(lin(x)[:, :2]).sum().backward()
    grads(log, x)


def _pickled_hooks(ns, log):
    lin = linear(ns)
    lin.register_forward_hook(_noop_hook)
    copy_ = pickle.loads(pickle.dumps(lin))
    copy_(leaf(ns))
    log.append(("hooks", len(copy_._forward_hooks)))


def _noop_hook(m, a, o):
    return None


def _filled(ns, m):
    """``m`` with every parameter set to a ramp in [-0.5, 0.5] (the same in both)."""
    with ns.no_grad():
        for p in m.parameters():
            ramp = np.linspace(-0.5, 0.5, p.numel(), dtype=np.float32)
            p.copy_(ns.tensor(ramp.reshape(tuple(p.shape))))
    return m


def _lazy_module_init_hook(ns, log):
    """LazyLinear's own initializing pre-hook runs before the user's (unless prepended),
    then removes itself."""
    m = ns.nn.LazyLinear(3)
    m.register_forward_pre_hook(
        lambda mod, a: log.append(("user", type(mod.weight).__name__, len(mod._forward_pre_hooks)))
    )
    m.register_forward_pre_hook(
        lambda mod, a: log.append(("first", type(mod.weight).__name__)), prepend=True
    )
    m(leaf(ns))
    m(leaf(ns))
    log.append(("after", len(m._forward_pre_hooks), type(m).__name__))


def _weight_norm_pre_hook(ns, log):
    """weight_norm recomputes ``weight`` in a pre-hook: a user pre-hook registered before
    it sees the old weight, one after sees the new."""
    lin = linear(ns)
    lin.register_forward_pre_hook(lambda m, a: log.append(("before-wn", summary(m.weight))))
    lin = ns.nn.utils.weight_norm(lin)
    lin.register_forward_pre_hook(lambda m, a: log.append(("after-wn", summary(m.weight))))
    with ns.no_grad():
        lin.weight_g.mul_(2)
    x = leaf(ns)
    lin(x).sum().backward()
    grads(log, x, lin.weight_g, lin.weight_v)


def _embedding(ns, log):
    """Integer input: the hooks fire from the outputs' Node, grad_input all None."""
    e = _filled(ns, ns.nn.Embedding(5, 2))
    e.register_full_backward_hook(rec(log, "bw"))
    e.register_full_backward_pre_hook(rec(log, "bpre"))
    e(ns.tensor([1, 3, 3])).pow(2).sum().backward()
    grads(log, e.weight)


def _lstm(ns, log):
    """(out, (h, c)): the nested tuple is no tensor to the hooks, its grad_output None."""
    lstm = _filled(ns, ns.nn.LSTM(2, 3, batch_first=True))
    lstm.register_full_backward_hook(rec(log, "bw"))
    lstm.register_full_backward_pre_hook(rec(log, "bpre"))
    lstm.register_forward_hook(lambda m, a, o: log.append(("fwd", len(o), type(o[1]).__name__)))
    x = ns.tensor(X.reshape(2, 2, 2), requires_grad=True)
    out, (h, c) = lstm(x)
    (out.sum() + h.sum() * 2).backward()
    grads(log, x)


def _multihead_attention(ns, log):
    mha = _filled(ns, ns.nn.MultiheadAttention(4, 2, batch_first=True))
    mha.register_full_backward_hook(rec(log, "bw"))
    mha.register_full_backward_pre_hook(rec(log, "bpre"))
    q = ns.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4), requires_grad=True)
    out, weights = mha(q, q, q)
    out.sum().backward()
    grads(log, q)


def _batchnorm_buffers(ns, log):
    bn = ns.nn.BatchNorm1d(2)
    bn.register_forward_pre_hook(lambda m, a: log.append(("pre", summary(m.running_mean))))
    bn.register_forward_hook(
        lambda m, a, o: log.append(("fwd", summary(m.running_mean), summary(m.num_batches_tracked)))
    )
    bn.register_full_backward_hook(rec(log, "bw"))
    x = leaf(ns)
    bn(x).pow(2).sum().backward()
    grads(log, x)


def _assign_load(ns, log):
    lin = linear(ns)
    lin.register_load_state_dict_pre_hook(lambda m, sd, p, meta, *r: log.append(("pre", meta)))
    lin.register_load_state_dict_post_hook(
        lambda m, inc: log.append(("post", type(m.weight).__name__, m.weight.requires_grad))
    )
    lin.load_state_dict(linear(ns, W * 2).state_dict(), assign=True)
    log.append(("weight", summary(lin.weight)))


MORE = {
    f.__name__.lstrip("_"): f
    for f in (
        _unused_input,
        _same_tensor_twice,
        _deepcopied,
        _global_kwargs_hook_when_forward_raises,
        _pre_hook_fills_a_none_grad,
        _hook_returns_grad_for_non_tensor,
        _keyword_only_inputs,
        _double_backward,
        _module_output_fed_back,
        _pickled_hooks,
        _lazy_module_init_hook,
        _weight_norm_pre_hook,
        _embedding,
        _lstm,
        _multihead_attention,
        _batchnorm_buffers,
        _assign_load,
    )
}


@pytest.mark.parametrize("name", list(MORE))
def test_more_hook_programs(name):
    both(MORE[name])


# --- grad modes --------------------------------------------------------------------------------

GRAD_MODES = [
    "no_grad",
    "enable-inside-no-grad",
    "inference_mode",
    "set_grad_enabled-false",
    "frozen-params",
    "frozen-params-leaf-input",
    "detached-input",
]


@pytest.mark.parametrize("mode", GRAD_MODES)
def test_backward_hooks_under_grad_modes(mode):
    def program(ns, log):
        lin = linear(ns)
        lin.register_full_backward_pre_hook(rec(log, "bpre"))
        lin.register_full_backward_hook(rec(log, "bw"))
        lin.register_forward_hook(lambda m, a, o: log.append(("fwd", o.requires_grad)))
        x = leaf(ns, grad=mode != "detached-input")
        if mode == "no_grad":
            with ns.no_grad():
                y = lin(x)
        elif mode == "enable-inside-no-grad":
            with ns.no_grad(), ns.enable_grad():
                y = lin(x)
        elif mode == "inference_mode":
            with ns.inference_mode():
                y = lin(x)
        elif mode == "set_grad_enabled-false":
            with ns.set_grad_enabled(False):
                y = lin(x)
        elif mode.startswith("frozen-params"):
            lin.requires_grad_(False)
            y = lin(x if mode == "frozen-params-leaf-input" else ns.tensor(X))
        else:
            y = lin(x)
        log.append(("requires_grad", y.requires_grad))
        if y.requires_grad:
            y.sum().backward()
            grads(log, x, lin.weight)

    both(program)


# --- legacy register_backward_hook -------------------------------------------------------------


def _legacy_modules(ns):
    return {
        "relu": (ns.nn.ReLU(), 1),
        "tanh": (ns.nn.Tanh(), 1),
        "sigmoid-times": (module(ns, lambda self, x: x.sigmoid() * 2), 1),
        "two-outputs": (module(ns, lambda self, x: (x * 2, x * 3)), 1),
        "mul-two-inputs": (module(ns, lambda self, a, b: a * b), 2),
    }


LEGACY = ["relu", "tanh", "sigmoid-times", "two-outputs", "mul-two-inputs"]


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("name", LEGACY)
def test_legacy_backward_hook(name, replace):
    def program(ns, log):
        m, n = _legacy_modules(ns)[name]

        def hook(mod, gi, go):
            log.append(("legacy", summary(gi), summary(go)))
            if replace:
                return tuple(None if g is None else g * 2 for g in gi)
            return None

        m.register_backward_hook(hook)
        xs = [ns.tensor([0.5, -1.0, 2.0], requires_grad=True) for _ in range(n)]
        y = m(*xs)
        (y[0] + y[1] if isinstance(y, tuple) else y).sum().backward()
        grads(log, *xs)

    both(program)


_LINEAR_NODES = pytest.mark.xfail(
    strict=True,
    reason="staged's fused linear Node (staged/eager/ops/linalg.py: _linear, "
    "_linear_no_bias) takes the weight itself as its third input where torch's "
    "AddmmBackward0/MmBackward0 takes weight.t() (a TBackward0 between): a legacy hook sees "
    "a (out, in) grad_input[-1] where torch's is (in, out); a 1-D input runs the composite "
    "(AddBackward0) where torch's last Node is a ViewBackward0",
)


@pytest.mark.parametrize(
    "shape,bias",
    [
        pytest.param((4, 2), True, marks=_LINEAR_NODES),
        pytest.param((4, 2), False, marks=_LINEAR_NODES),
        pytest.param((2,), True, marks=_LINEAR_NODES),
    ],
)
def test_legacy_backward_hook_on_linear(shape, bias):
    """The seed's example of a legacy hook missing the advertised quantities: torch's hook
    sees AddmmBackward0's grads (bias, input, weight.t())."""

    def program(ns, log):
        lin = ns.nn.Linear(2, 3, bias=bias)
        with ns.no_grad():
            lin.weight.copy_(ns.tensor(W))
        lin.register_backward_hook(rec(log, "legacy"))
        x = ns.tensor(X[: shape[0]] if len(shape) == 2 else X[0], requires_grad=True)
        y = lin(x)
        log.append(("node", y.grad_fn.name()))
        y.sum().backward()
        grads(log, x, lin.weight)

    both(program)


def test_legacy_backward_hook_on_input_not_requiring_grad():
    def program(ns, log):
        m = ns.nn.Tanh()
        m.register_backward_hook(rec(log, "legacy"))
        y = m(ns.tensor([0.5, 1.0]))
        log.append(("requires_grad", y.requires_grad))

    both(program)


def test_global_legacy_backward_hook():
    def program(ns, log):
        g = globals_(ns)
        g._global_is_full_backward_hook = None  # left True by the full global hooks before
        h = g.register_module_backward_hook(rec(log, "g-legacy"))
        try:
            m = ns.nn.Tanh()
            x = ns.tensor([0.5, 1.0], requires_grad=True)
            m(x).sum().backward()
            grads(log, x)
        finally:
            h.remove()
            g._global_is_full_backward_hook = None

    both(program)


# --- state_dict hooks ----------------------------------------------------------------------------


def _net(ns):
    net = ns.nn.Sequential(linear(ns), ns.nn.BatchNorm1d(3))
    net.register_buffer("step", ns.tensor(4.0))
    net.register_buffer("tmp", ns.zeros(1), persistent=False)
    return net


def _keys(sd):
    return [(k, summary(v)) for k, v in sd.items()]


@pytest.mark.parametrize("keep_vars", [False, True])
@pytest.mark.parametrize("prefix", ["", "model."])
def test_state_dict_pre_and_post_hooks_order_and_arguments(prefix, keep_vars):
    def program(ns, log):
        net = _net(ns)
        for name, m in net.named_modules():
            m.register_state_dict_pre_hook(
                lambda mod, p, kv, name=name: log.append(("pre", name, p, kv))
            )
            m.register_state_dict_post_hook(
                lambda mod, sd, p, meta, name=name: log.append(
                    ("post", name, p, dict(meta), list(sd))
                )
            )
        sd = net.state_dict(prefix=prefix, keep_vars=keep_vars)
        log.append(("keys", list(sd), dict(sd._metadata)))
        log.append(("requires_grad", [getattr(v, "requires_grad", None) for v in sd.values()]))

    both(program)


def _zero_weight(sd, prefix):
    """Zero the saved weight in place: it is detached, but shares the parameter's memory."""
    sd[prefix + "weight"].mul_(0)


POST_EDITS = {
    "add-key": lambda mod, sd, p, meta: sd.__setitem__(p + "extra", mod.weight.detach() * 2),
    "drop-key": lambda mod, sd, p, meta: sd.__delitem__(p + "bias"),
    "scale-in-place": lambda mod, sd, p, meta: _zero_weight(sd, p),
    "return-new-dict": lambda mod, sd, p, meta: {"only": mod.bias.detach()},
    "return-none": lambda mod, sd, p, meta: None,
}


@pytest.mark.parametrize("where", ["root", "child"])
@pytest.mark.parametrize("public", [False, True])
@pytest.mark.parametrize("edit", list(POST_EDITS))
def test_state_dict_post_hook_edits(edit, public, where):
    def program(ns, log):
        lin = linear(ns)
        net = lin if where == "root" else ns.nn.Sequential(lin)
        hook = POST_EDITS[edit]

        def h(*a):
            return hook(*a)

        if public:
            lin.register_state_dict_post_hook(h)
        else:
            lin._register_state_dict_hook(h)
        sd = net.state_dict()
        log.append(("sd", _keys(sd)))
        log.append(("weight", summary(lin.weight)))

    both(program)


def test_state_dict_hook_registered_both_ways():
    def program(ns, log):
        lin = linear(ns)

        def h(*a):
            return None

        lin.register_state_dict_post_hook(h)
        lin._register_state_dict_hook(h)

    both(program)


def test_state_dict_pre_hook_changes_a_parameter_before_the_save():
    def program(ns, log):
        net = _net(ns)

        def pre(mod, prefix, keep_vars):
            with ns.no_grad():
                mod.weight.mul_(2)

        h = net[0].register_state_dict_pre_hook(pre)
        log.append(("sd", _keys(net.state_dict())))
        h.remove()
        log.append(("sd-after-remove", _keys(net.state_dict())))

    both(program)


LOAD_PRE = {
    "rename-old-keys": lambda mod, sd, p, *rest: [
        sd.__setitem__(p + k.replace("old_", ""), sd.pop(p + k))
        for k in [k[len(p) :] for k in list(sd) if k.startswith(p + "old_")]
    ],
    "record": lambda mod, sd, p, meta, strict, missing, unexpected, errors: None,
    "add-error": lambda mod, sd, p, meta, strict, missing, unexpected, errors: errors.append(
        "custom error"
    ),
    "scale-value": lambda mod, sd, p, *rest: (
        sd.__setitem__(p + "weight", sd[p + "weight"] * 3) if p + "weight" in sd else None
    ),
}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("pre", list(LOAD_PRE))
def test_load_state_dict_pre_hooks(pre, strict):
    def program(ns, log):
        src = _net(ns)
        sd = src.state_dict()
        sd["0.old_weight"] = sd.pop("0.weight") * 0.5
        net = _net(ns)
        for name, m in net.named_modules():

            def hook(mod, sdict, p, meta, st, missing, unexpected, errors, name=name):
                log.append(
                    ("pre", name, p, dict(meta), st, list(missing), list(unexpected), sorted(sdict))
                )
                return LOAD_PRE[pre](mod, sdict, p, meta, st, missing, unexpected, errors)

            m.register_load_state_dict_pre_hook(hook)
        r = net.load_state_dict(sd, strict=strict)
        log.append(("result", list(r.missing_keys), list(r.unexpected_keys), repr(r)))
        log.append(("weight", summary(net[0].weight)))
        log.append(("sd-unchanged", sorted(sd)))

    both(program)


LOAD_POST = {
    "clear-missing": lambda mod, inc: inc.missing_keys.clear(),
    "clear-both": lambda mod, inc: (inc.missing_keys.clear(), inc.unexpected_keys.clear()) and None,
    "add-unexpected": lambda mod, inc: inc.unexpected_keys.append("ghost"),
    "return-value": lambda mod, inc: inc,
    "record": lambda mod, inc: None,
}


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("post", list(LOAD_POST))
def test_load_state_dict_post_hooks_edit_incompatible_keys(post, strict):
    def program(ns, log):
        net = _net(ns)
        sd = _net(ns).state_dict()
        sd.pop("0.bias")
        sd["1.surprise"] = ns.ones(1)
        for name, m in net.named_modules():

            def hook(mod, inc, name=name):
                log.append(("post", name, list(inc.missing_keys), list(inc.unexpected_keys)))
                return LOAD_POST[post](mod, inc) if name == "" else None

            m.register_load_state_dict_post_hook(hook)
        r = net.load_state_dict(sd, strict=strict)
        log.append(("result", list(r.missing_keys), list(r.unexpected_keys)))

    both(program)


def test_private_load_pre_hook_without_module():
    def program(ns, log):
        lin = linear(ns)
        lin._register_load_state_dict_pre_hook(lambda *a: log.append(("pre", len(a), a[1])))
        lin._register_load_state_dict_pre_hook(
            lambda *a: log.append(("with-module", len(a), a[2])), with_module=True
        )
        lin.load_state_dict(linear(ns).state_dict())

    both(program)


def test_state_dict_hooks_removed_by_handle():
    def program(ns, log):
        lin = linear(ns)
        hs = [
            lin.register_state_dict_pre_hook(rec(log, "pre")),
            lin.register_state_dict_post_hook(lambda *a: log.append(("post",))),
            lin.register_load_state_dict_pre_hook(lambda *a: log.append(("load-pre",))),
            lin.register_load_state_dict_post_hook(lambda *a: log.append(("load-post",))),
        ]
        lin.load_state_dict(lin.state_dict())
        for h in hs:
            h.remove()
        lin.load_state_dict(lin.state_dict())
        log.append(("end",))

    both(program)


# --- under staged.compile ------------------------------------------------------------------------


class _Scale:
    """A backward hook object scaling ``grad_input`` by its ``k``, changed between calls."""

    def __init__(self):
        self.k = 2.0

    def __call__(self, m, gi, go):
        return (gi[0] * self.k,)


def _keep_output(acts, name, m, args, out):
    acts[name] = out.detach()


def _add_hooks(ns, model, variant, state) -> list:
    """The hooks of ``variant`` on ``model``, recording into ``state``; their handles."""
    rec_vals, floats, buf, cfg = state["vals"], state["floats"], state["buf"], state["cfg"]
    m0, m1, m2 = model
    hooks: dict[str, list] = {
        "scale-grads": [
            (m0.register_full_backward_hook, lambda m, gi, go: (gi[0] * 3,)),
            (m2.register_full_backward_pre_hook, lambda m, go: (go[0] * 0.5,)),
        ],
        "modify-output": [
            (m1.register_forward_hook, lambda m, a, o: o * 2 + 0.1),
            (m0.register_forward_pre_hook, lambda m, a: (a[0] * 0.5,)),
        ],
        "record": [
            (m2.register_forward_hook, lambda m, a, o: rec_vals.append(o.detach().sum())),
            (m2.register_full_backward_hook, lambda m, gi, go: rec_vals.append(go[0] * 1)),
        ],
        "record-buffer": [
            (m2.register_forward_hook, lambda m, a, o: buf[0].copy_(o.detach().sum())),
            (m2.register_full_backward_hook, lambda m, gi, go: buf[1].copy_(go[0].abs().sum())),
        ],
        "record-item": [
            (m2.register_full_backward_hook, lambda m, gi, go: floats.append(go[0].sum().item())),
        ],
        "hook-object": [(m0.register_full_backward_hook, state["scale"])],
        "config-dict": [
            (
                m2.register_full_backward_pre_hook,
                lambda m, go: (go[0].clamp(-cfg["clip"], cfg["clip"]),),
            )
        ],
    }
    hooks["activations-dict"] = [  # feature extraction: each child's output by name
        (m.register_forward_hook, functools.partial(_keep_output, state["acts"], name))
        for name, m in model.named_children()
    ]
    hooks["activation-attribute"] = [
        (m1.register_forward_hook, lambda m, a, o: setattr(m, "last", o.detach()))
    ]
    hooks["all"] = hooks["scale-grads"] + hooks["modify-output"] + hooks["record"]
    hooks["toggle"] = hooks["all"]
    handles = [register(hook) for register, hook in hooks[variant]]
    if variant == "with-kwargs":
        handles.append(
            m0.register_forward_pre_hook(lambda m, a, kw: ((a[0] * 0.5,), kw), with_kwargs=True)
        )
        handles.append(m1.register_forward_hook(lambda m, a, kw, o: o * 2, with_kwargs=True))
    return handles


def _hooked_step(ns, log, compiled, variant):
    """Four calls of a training step of an MLP whose modules carry the hooks of
    ``variant`` (``toggle``: removed after the first call, added again before the last;
    the hook object's ``k`` and the config's clip change every call): each call's loss,
    the input's gradient and what the hooks recorded, then the parameters."""
    model = mlp(ns)
    opt = ns.optim.SGD(model.parameters(), lr=0.1)
    state = {
        "vals": [],
        "floats": [],
        "buf": ns.zeros(2),
        "cfg": {},
        "scale": _Scale(),
        "acts": {},
    }
    handles = _add_hooks(ns, model, variant, state)

    def step(x):
        opt.zero_grad()
        x.grad = None
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    f = staged.compile(step) if compiled and ns is staged else step
    for i in range(4):
        if variant == "toggle" and i == 1:
            for h in handles:
                h.remove()
        if variant == "toggle" and i == 3:
            handles = _add_hooks(ns, model, variant, state)
        state["scale"].k = 2.0 + i
        state["cfg"]["clip"] = 0.5 / (i + 1)
        x = ns.tensor(X * (i + 1), requires_grad=True)
        log.append((f"loss{i}", summary(f(x))))
        log.append((f"x.grad{i}", summary(x.grad)))
        log.append((f"recorded{i}", summary(state["vals"]), list(state["floats"])))
        log.append((f"buffer{i}", summary(state["buf"])))
        log.append(
            (f"activations{i}", summary(state["acts"]), summary(getattr(model[1], "last", None)))
        )
        state["vals"].clear()
        state["floats"].clear()
    log.append(("params", summary(list(model.parameters()))))


COMPILED = [
    "scale-grads",
    "modify-output",
    "record",
    "record-buffer",
    "record-item",
    "hook-object",
    "config-dict",
    "with-kwargs",
    "activations-dict",
    "activation-attribute",
    "all",
    "toggle",
]


@pytest.mark.parametrize("variant", COMPILED)
def test_compiled_step_with_module_hooks(variant):
    """Eager staged and torch agree; the compiled step agrees with both call for call
    (its warnings aside: a hook appending tensors makes every call re-trace, and says so),
    or refuses clearly: a hook reading ``.item()`` while traced."""
    # four SGD steps in float32, gradients scaled up to 5x by the hooks (the hook object's
    # k): the CPU's BLAS kernels (Zen's, Skylake-X's) sum in other orders, and a gradient
    # entry that cancels (0.024 of terms up to 0.76) was 1.2e-5 of the largest off torch's
    # on an Ice Lake machine
    want = both(lambda ns, log: _hooked_step(ns, log, False, variant), rel=4e-5)
    ours = run(lambda ns, log: _hooked_step(ns, log, True, variant), staged)
    if variant == "record-item":
        assert ours[0][:2] == ("raised", "CaptureError") and ".item()" in ours[0][2]
    else:
        _same(ours[:-1], want[:-1], atol=1e-5, rel=4e-5)


def test_compiled_step_global_hook_added_between_calls():
    def program(ns, log):
        model = mlp(ns)
        g = globals_(ns)

        def step(x):
            model.zero_grad()
            y = model(x).sum()
            y.backward()
            return y.detach(), model[0].weight.grad.clone()

        f = staged.compile(step) if ns is staged else step
        hs: list = []
        try:
            for i in range(3):
                if i == 1:
                    hs.append(g.register_module_full_backward_pre_hook(lambda m, go: (go[0] * 2,)))
                    hs.append(g.register_module_forward_hook(lambda m, a, o: o + 1))
                if i == 2:
                    for h in hs:
                        h.remove()
                log.append((f"call{i}", summary(f(leaf(ns)))))
        finally:
            for h in hs:
                h.remove()

    both(program)


def _counting_step(ns, log, compiled, kind):
    """Hooks reading and writing plain attributes of the module they are called with (their
    first argument): a call counter, a scale the caller changes between calls."""
    model = mlp(ns)
    opt = ns.optim.SGD(model.parameters(), lr=0.1)
    for m in model:
        m.calls, m.scale = 0, 1.0

    def count(m, *args):
        m.calls += 1

    if kind == "forward-counter":
        model[0].register_forward_hook(count)
    elif kind == "backward-counter":
        model[2].register_full_backward_hook(count)
    elif kind == "shared-counter":
        for m in model:
            m.register_forward_pre_hook(count)
    elif kind == "reads-scale":
        model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * m.scale,))

    def step(x):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    f = staged.compile(step) if compiled and ns is staged else step
    for i in range(4):
        model[0].scale = 1.0 + i
        x = ns.tensor(X, requires_grad=True)
        log.append((f"call{i}", summary(f(x)), summary(x.grad), [m.calls for m in model]))


@pytest.mark.parametrize(
    "kind", ["forward-counter", "backward-counter", "shared-counter", "reads-scale"]
)
def test_compiled_hooks_read_and_write_their_module(kind):
    """Compiled calls re-trace per value a hook reads of its module, as the step's own
    reads of ``self.counter`` do: eager's counts and gradients, call for call."""
    want = both(lambda ns, log: _counting_step(ns, log, False, kind))
    ours = run(lambda ns, log: _counting_step(ns, log, True, kind), staged)
    _same(ours[:-1], want[:-1], atol=1e-5)
