"""Python threads against torch 2.13 (the eleventh trust probe): backward from several
threads into shared leaves and through one retained graph applies every contribution;
grad mode, inference mode, saved-tensor hooks and their disabling, a custom forward's or
rule's hiding of ops from forward AD (Note [levels seen per thread] in
staged/autograd/forward_ad.py) and ``allow_mutation_on_saved_tensors`` are the thread's
own, anomaly mode and forward-AD levels the process's, as in torch; vmap's levels and
torch.func's transforms are the thread's own (Note [levels per thread] in
staged/autograd/vmap.py, Note [transform leaves] in staged/func/transforms.py); draws
from one generator on several threads, eager or a compiled step's, each take a run of the
stream (Note [one draw at a time] in staged/eager/random/generator.py); a profile records only the thread that
opened it (Note [profiled threads] in staged/autograd/profiler.py); hooks registered from
another thread while backward or forward runs, optimizers stepping on threads, the
DataLoader's order with workers; compiled steps (background mode, dynamic batch sizes)
called from three threads apply every update once.

Interleavings are forced with barriers and events; where a race needs the interpreter to
switch threads inside one call (a draw), the switch interval is made tiny, so that an
unguarded read-modify-write fails on every run rather than now and then."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import staged
from tests.threads import in_threads, switching_often


@pytest.fixture
def switch_often():
    with switching_often():
        yield


def _both(fn):
    """``fn(L)`` for torch and staged: the two results must be equal."""
    want, got = fn(torch), fn(staged)
    assert got == want
    return got


# --- backward from threads --------------------------------------------------------------


def test_backward_on_own_graphs_sharing_leaves_accumulates_every_contribution(switch_often):
    """Each backward adds a whole number to .grad: the sum is exact in any order."""

    def run(L):
        w = L.zeros(3, dtype=L.float64, requires_grad=True)
        b = L.zeros((), dtype=L.float64, requires_grad=True)

        def work(k):
            x = L.tensor([k, 2.0 * k, 3.0], dtype=L.float64)
            for _ in range(40):
                ((w * x).sum() + b * k).backward()

        in_threads(*[lambda k=k: work(k) for k in (1.0, 2.0, 3.0)])
        return w.grad.tolist(), b.grad.item()

    assert _both(run) == ([240.0, 480.0, 360.0], 240.0)


def test_backward_on_one_retained_graph_from_threads_applies_every_pass(switch_often):
    def run(L):
        x = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        y = (x * x).sum()

        def work():
            for _ in range(25):
                y.backward(retain_graph=True)

        in_threads(work, work, work)
        return x.grad.tolist()

    assert _both(run) == [150.0, 300.0]


# --- modes: the thread's own, or the process's ------------------------------------------


def _while_open(L, ctx, probe):
    """``probe(L)`` on one thread while another is inside ``ctx(L)``."""
    inside, done, seen = threading.Event(), threading.Event(), {}

    def holder():
        with ctx(L):
            inside.set()
            assert done.wait(60)

    def other():
        assert inside.wait(60)
        try:
            seen["got"] = probe(L)
        finally:
            done.set()

    in_threads(holder, other)
    return seen["got"]


def _records(L):
    x = L.ones(2, requires_grad=True)
    return L.is_grad_enabled(), (x * 2).requires_grad


def _inference(L):
    return L.is_inference_mode_enabled(), L.ones(1).is_inference(), _records(L)


def _packed(L):
    packed = []
    x = L.ones(2, requires_grad=True)
    with L.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        (x * x).sum().backward()
    return len(packed), x.grad.tolist()


def _hooks_elsewhere(L):
    """Pack hooks opened on another thread do not apply to this thread's ops."""
    x = L.ones(2, requires_grad=True)
    (x * x).sum().backward()
    return x.grad.tolist()


def _nested_dual(L):
    fwAD = L.autograd.forward_ad
    try:
        with fwAD.dual_level():
            return "entered"
    except RuntimeError as e:
        return str(e)


MODES = {
    "no_grad": (lambda L: L.no_grad(), _records),
    "set_grad_enabled": (lambda L: L.set_grad_enabled(False), _records),
    "inference_mode": (lambda L: L.inference_mode(), _inference),
    "saved_tensors_hooks": (
        lambda L: L.autograd.graph.saved_tensors_hooks(lambda t: 1 / 0, lambda t: t),
        _hooks_elsewhere,
    ),
    "disable_saved_tensors_hooks": (
        lambda L: L.autograd.graph.disable_saved_tensors_hooks("not here"),
        _packed,
    ),
    # the process's in torch: anomaly mode is a static flag, forward-AD levels one list
    "set_detect_anomaly": (
        lambda L: L.autograd.set_detect_anomaly(True),
        lambda L: L.is_anomaly_enabled(),
    ),
    "dual_level": (lambda L: L.autograd.forward_ad.dual_level(), _nested_dual),
}


@pytest.mark.parametrize("mode", MODES)
def test_a_mode_open_on_one_thread_is_seen_on_another_as_torch_sees_it(mode):
    ctx, probe = MODES[mode]
    _both(lambda L: _while_open(L, ctx, probe))


def test_set_grad_enabled_as_a_decorator_switches_only_its_calls_thread():
    def run(L):
        off = L.set_grad_enabled(False)  # made on this thread, called on another

        @off
        def f(x):
            return (x * 2).requires_grad, L.is_grad_enabled()

        inside, done, seen = threading.Event(), threading.Event(), {}

        def caller():
            seen["call"] = f(L.ones(1, requires_grad=True))
            inside.set()
            assert done.wait(60)

        def other():
            assert inside.wait(60)
            seen["other"] = L.is_grad_enabled()
            done.set()

        in_threads(caller, other)
        return seen, L.is_grad_enabled()

    assert _both(run) == ({"call": (False, False), "other": True}, True)


def _held_in(L, method: str):
    """A custom Function whose ``forward`` or ``jvp`` (``method``) sets ``inside`` and waits
    for ``done``: (the Function, inside, done)."""
    inside, done = threading.Event(), threading.Event()

    def hold():
        inside.set()
        assert done.wait(60)

    class Twice(L.autograd.Function):
        @staticmethod
        def forward(x):
            if method == "forward":
                hold()
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

        @staticmethod
        def jvp(ctx, t):
            if method == "jvp":
                hold()
            return t * 2

    return Twice, inside, done


def _dual_times_three(L, inside, done):
    """On a thread: the tangent of ``3 * dual(1, 5)`` once ``inside`` is set."""
    fw, got = L.autograd.forward_ad, {}

    def run():
        assert inside.wait(60)
        try:
            with fw.dual_level():
                d = fw.make_dual(L.ones(2), L.full((2,), 5.0))
                t = fw.unpack_dual(d * 3).tangent
                got["tangent"] = None if t is None else t.tolist()
            got["jvp"] = L.func.jvp(L.sin, (L.zeros(2),), (L.ones(2),))[1].tolist()
        finally:
            done.set()

    return run, got


def test_a_custom_forward_on_one_thread_hides_its_ops_from_forward_ad_only_there():
    """torch turns forward grad mode off thread-locally around a custom forward: a dual
    op on another thread meanwhile had no tangent, and func.jvp returned zeros."""

    def run(L):
        Twice, inside, done = _held_in(L, "forward")
        other, got = _dual_times_three(L, inside, done)
        in_threads(lambda: got.setdefault("out", Twice.apply(L.ones(2)).tolist()), other)
        return got

    assert _both(run) == {"out": [2.0, 2.0], "tangent": [15.0, 15.0], "jvp": [1.0, 1.0]}


def test_a_custom_jvp_running_on_one_thread_leaves_another_threads_tangents():
    """A rule at a level hides its ops from that level on its own thread only (the
    levels themselves are the process's: the dual tensor is made outside the threads)."""

    def run(L):
        fw = L.autograd.forward_ad
        Twice, inside, done = _held_in(L, "jvp")
        got = {}
        with fw.dual_level():
            a = fw.make_dual(L.ones(2), L.ones(2))
            b = fw.make_dual(L.ones(2), L.full((2,), 5.0))

            def other():
                assert inside.wait(60)
                try:
                    got["b"] = fw.unpack_dual(b * 3).tangent.tolist()
                finally:
                    done.set()

            def custom():
                got["a"] = fw.unpack_dual(Twice.apply(a)).tangent.tolist()

            in_threads(custom, other)
        return got

    assert _both(run) == {"a": [2.0, 2.0], "b": [15.0, 15.0]}


def test_allow_mutation_on_saved_tensors_applies_to_its_own_thread():
    """Another thread's in-place write to a tensor it saved still fails its backward, as
    in torch (its hooks and dispatch mode are the thread's own); a second block opened
    anywhere raises."""

    def run(L):
        def mutate_saved():
            x = L.ones(2, requires_grad=True)
            y = x * 1
            z = y * y
            y.mul_(2)
            try:
                z.sum().backward()
                return x.grad.tolist()
            except RuntimeError as e:
                return str(e).split(":")[0]

        def second_block():
            try:
                with L.autograd.graph.allow_mutation_on_saved_tensors():
                    return "opened"
            except RuntimeError as e:
                return str(e)

        allow = L.autograd.graph.allow_mutation_on_saved_tensors
        return (
            _while_open(L, lambda L: allow(), lambda L: mutate_saved()),
            _while_open(L, lambda L: allow(), lambda L: second_block()),
        )

    modified, nested = _both(run)
    assert modified.startswith("one of the variables needed for gradient computation")
    assert nested == "allow_mutation_on_saved_tensors contexts cannot be nested"


# --- vmap and torch.func: the thread's own levels ---------------------------------------


def test_vmap_left_on_one_thread_keeps_the_level_of_another_open():
    """Thread 1 enters vmap, then thread 2; thread 1 leaves while thread 2 is inside (one
    level list for the process: thread 1 popped thread 2's level, an IndexError)."""

    def run(L):
        first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
        got = {}

        def body1(x):
            first_in.set()
            assert second_in.wait(60)
            return x * 2

        def body2(x):
            second_in.set()
            assert first_out.wait(60)
            return (x * 3).sum()

        def t1():
            got["1"] = L.func.vmap(body1)(L.ones(3, 2)).tolist()
            first_out.set()

        def t2():
            assert first_in.wait(60)
            got["2"] = L.func.vmap(body2)(L.ones(3, 2)).tolist()

        in_threads(t1, t2)
        return got

    assert _both(run) == {"1": [[2.0, 2.0]] * 3, "2": [6.0] * 3}


def _draws(L):
    L.manual_seed(3)
    return (
        L.rand(2).tolist(),
        L.nn.functional.dropout(L.ones(4), 0.5).tolist(),
        L.ones(3).sum().item(),
    )


def test_draws_on_a_thread_outside_vmap_while_another_is_inside():
    """vmap's randomness="error" on one thread refused every draw of the process."""

    def vmapped(L, body):
        return L.func.vmap(body)(L.ones(3, 2))

    _both(lambda L: _while_open(L, lambda L: _Inside(L, vmapped), _draws))


def test_func_grad_on_one_thread_does_not_nest_another_threads_grad():
    """A transform running on another thread made this one's result keep its graph."""

    def differentiated(L, body):
        return L.func.grad(lambda x: (body(x) * x).sum())(L.ones(2))

    def probe(L):
        g = L.func.grad(lambda x: (x.sin() * 3).sum())(L.zeros(2, dtype=L.float64))
        return g.tolist(), g.requires_grad, g.grad_fn is None

    got = _both(lambda L: _while_open(L, lambda L: _Inside(L, differentiated), probe))
    assert got == ([3.0, 3.0], False, True)


class _Inside:
    """A context holding another thread inside a transform: ``transform(L, body)`` runs on
    it, and ``body`` waits there until the context exits."""

    def __init__(self, L, transform):
        self.entered, self.release = threading.Event(), threading.Event()

        def body(x):
            self.entered.set()
            assert self.release.wait(60)
            return x

        self.thread = threading.Thread(target=lambda: transform(L, body))

    def __enter__(self):
        self.thread.start()
        assert self.entered.wait(60)

    def __exit__(self, *exc):
        self.release.set()
        self.thread.join(60)
        return False


# --- one generator, several threads ------------------------------------------------------

DRAWS = {
    "randn float64 (blocks)": lambda L: L.randn(100, dtype=L.float64),
    "randn 7 (serial, cached sine)": lambda L: L.randn(7),
    "normal_": lambda L: L.empty(20).normal_(),
    "rand": lambda L: L.rand(33),
    "randperm": lambda L: L.randperm(30),
    "dropout": lambda L: L.nn.functional.dropout(L.ones(50), 0.5),
}


def _after(L, fn, n):
    """The draw that follows ``n`` serial draws of ``fn`` from seed 0."""
    L.manual_seed(0)
    for _ in range(n):
        fn(L)
    return fn(L).tolist()


@pytest.mark.parametrize("draw", DRAWS)
def test_threads_drawing_from_one_generator_each_take_a_run_of_the_stream(draw, switch_often):
    """torch's kernels hold the generator's mutex for a whole fill: the draws of two
    threads are the serial stream's, in some order; none repeated, none skipped."""
    fn, k = DRAWS[draw], 150

    def run(L):
        L.manual_seed(0)
        serial = sorted(tuple(fn(L).tolist()) for _ in range(2 * k))
        L.manual_seed(0)
        got: list = []

        def work():
            for _ in range(k):
                got.append(tuple(fn(L).tolist()))

        in_threads(work, work)
        return sorted(got) == serial, fn(L).tolist() == _after(L, fn, 2 * k)

    assert _both(run) == (True, True)


def test_a_compiled_steps_draws_and_eager_draws_on_threads_each_take_a_run(switch_often):
    """A compiled call makes its draws on the host (Note [host draws]), each under the
    generator's lock as an eager draw: the two threads' draws are the serial stream's."""
    k = 100
    step = staged.compile(lambda x: x + staged.randn(100, dtype=staged.float64))
    zero = staged.zeros(100, dtype=staged.float64)
    step(zero)
    staged.manual_seed(0)
    serial = sorted(tuple(staged.randn(100, dtype=staged.float64).tolist()) for _ in range(2 * k))
    staged.manual_seed(0)
    got: list = []

    def compiled():
        for _ in range(k):
            got.append(tuple(step(zero).tolist()))

    def eager():
        for _ in range(k):
            got.append(tuple(staged.randn(100, dtype=staged.float64).tolist()))

    in_threads(compiled, eager)
    assert sorted(got) == serial


def test_a_generator_is_copied_and_pickled_with_its_stream():
    import copy
    import pickle

    def run(L):
        g = L.Generator().manual_seed(5)
        L.rand(3, generator=g)
        return [
            L.rand(4, generator=c).tolist()
            for c in (copy.deepcopy(g), pickle.loads(pickle.dumps(g)))
        ]

    a, b = _both(run)
    assert a == b


# --- the profiler -----------------------------------------------------------------------


def test_a_profile_records_only_the_thread_that_opened_it():
    def run(L):
        inside, done, names = threading.Event(), threading.Event(), set()

        def profiled():
            with L.autograd.profiler.profile() as p:
                inside.set()
                assert done.wait(60)
                x = L.ones(3, requires_grad=True)
                (x * 2).sum().backward()
            names.update(e.name for e in p.function_events)

        def other():
            assert inside.wait(60)
            try:
                y = L.ones(3, requires_grad=True)
                y.sin().exp().backward(L.ones(3))
                with L.autograd.profiler.record_function("elsewhere"):
                    L.ones(2).cos()
            finally:
                done.set()

        in_threads(profiled, other)
        names = {n.removeprefix("aten::") for n in names}
        return (
            "mul" in names,
            "MulBackward0" in names,
            names & {"sin", "exp", "cos", "SinBackward0", "ExpBackward0", "elsewhere"},
        )

    assert _both(run) == (True, True, set())


# --- hooks registered from another thread -----------------------------------------------


def test_node_hooks_registered_and_removed_while_backward_runs():
    def run(L):
        calls: list = []
        x = L.ones(4, dtype=L.float64, requires_grad=True)
        y = x * 2
        z = y.sin()
        inside, done = threading.Event(), threading.Event()

        def pre(go):
            calls.append("z pre")
            inside.set()
            assert done.wait(60)

        z.grad_fn.register_prehook(pre)
        old = y.grad_fn.register_hook(lambda gi, go: calls.append("y post, removed"))

        def other():
            assert inside.wait(60)
            y.grad_fn.register_hook(lambda gi, go: calls.append("y post"))
            old.remove()
            y.grad_fn.register_prehook(lambda go: calls.append("y pre"))
            done.set()

        in_threads(lambda: z.sum().backward(), other)
        return calls, x.grad.tolist()

    _both(run)


def test_module_hook_registered_while_forward_runs_a_hook():
    def run(L):
        calls: list = []
        m = L.nn.Linear(2, 2)
        inside, done = threading.Event(), threading.Event()

        def first(mod, args):
            calls.append("first")
            inside.set()
            assert done.wait(60)

        m.register_forward_pre_hook(first)

        handles = []

        def other():
            assert inside.wait(60)
            m.register_forward_pre_hook(lambda mod, args: calls.append("added"))
            handles.append(
                L.nn.modules.module.register_module_forward_hook(lambda *a: calls.append("global"))
            )
            done.set()

        try:
            in_threads(lambda: m(L.ones(2)), other)
            m(L.ones(2))
        finally:
            for h in handles:
                h.remove()
        return calls

    _both(run)


# --- optimizers and data on threads -----------------------------------------------------


@pytest.mark.parametrize("opt", ["Adam", "SGD", "RMSprop", "Adagrad"])
def test_optimizers_stepping_on_threads_give_their_serial_results(opt, switch_often):
    def train(L, seed):
        p = L.tensor(np.random.default_rng(seed).standard_normal(5), requires_grad=True)
        o = getattr(L.optim, opt)([p], lr=0.01)
        for i in range(30):
            o.zero_grad()
            ((p - float(i)) ** 2).sum().backward()
            o.step()
        return p.detach().numpy().copy()

    for L in (torch, staged):
        serial = [train(L, s) for s in range(3)]
        got: dict = {}
        in_threads(*[lambda s=s: got.__setitem__(s, train(L, s)) for s in range(3)])
        for s in range(3):
            np.testing.assert_array_equal(got[s], serial[s])
    np.testing.assert_allclose(train(staged, 1), train(torch, 1), rtol=1e-10)


def test_a_dataloader_with_workers_gives_torchs_order_and_stream():
    def run(L):
        ds = L.utils.data.TensorDataset(L.arange(20))
        L.manual_seed(5)
        seeded = L.utils.data.DataLoader(
            ds, batch_size=3, shuffle=True, num_workers=2, generator=L.Generator().manual_seed(3)
        )
        default = L.utils.data.DataLoader(ds, batch_size=3, shuffle=True, num_workers=2)
        return [b[0].tolist() for b in seeded], [b[0].tolist() for b in default], L.rand(2).tolist()

    _both(run)


# --- compiled steps on three threads ----------------------------------------------------

CALLS = 12


def _sgd(w, opt):
    def step(x):
        (x @ w).sum().backward()  # the gradient is x summed over the batch
        opt.step()
        opt.zero_grad()

    return step


def test_a_background_compiled_step_from_three_threads_applies_every_update(switch_often):
    """The first calls race to trace; calls run eagerly while the module compiles, then
    compiled: every call's update is applied once, whichever ran it."""
    w = staged.zeros(3, requires_grad=True)
    opt = staged.optim.SGD([w], lr=0.5)
    step = staged.compile(_sgd(w, opt), mode="background")
    x = staged.tensor([[1.0, 2.0, 4.0]])
    in_threads(*[lambda: [step(x) for _ in range(CALLS)]] * 3)
    np.testing.assert_array_equal(w.detach().numpy(), -0.5 * 3 * CALLS * x.numpy()[0])
    assert step.traces == 1 and w.grad is None


def test_a_dynamic_compiled_step_from_threads_with_other_batch_sizes(switch_often):
    w = staged.zeros(3, requires_grad=True)
    opt = staged.optim.SGD([w], lr=0.25)
    step = staged.compile(_sgd(w, opt), dynamic=True)
    xs = [staged.ones(n, 3) for n in (2, 5, 7)]
    in_threads(*[lambda x=x: [step(x) for _ in range(CALLS)] for x in xs])
    np.testing.assert_array_equal(w.detach().numpy(), [-0.25 * CALLS * 14] * 3)
    assert step.traces == 1
