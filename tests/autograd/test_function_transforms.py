"""Custom Functions under composed torch.func transforms, against torch 2.13: a transform
outside a ``vmap`` differentiates the Function's physical values (its backward and jvp
mapped over the batch, as functorch's generated vmap rule), and the checks torch makes on
what a Function's ``jvp`` returns."""

import numpy as np
import pytest
import torch

import staged
from tests.autograd.test_function_forward_over_reverse import V, X, _ctx_style, _new_style
from tests.checks import close, compare, raises_like_torch

ROWS = np.stack([V, 2 * V])
NEW = sorted(_new_style(staged))

# the functions of _new_style written with plain ops: the oracle where torch's own
# custom-Function result is wrong (below)
PLAIN = {
    "exp_out": lambda x: x.exp().sum(),
    "sin_in": lambda x: x.sin().sum(),
    "pow_k": lambda x: (x**3.0).sum(),
    "two_outputs": lambda x: (x.sin() * x.cos()).sum(),
    "composed": lambda x: (x.sin().exp() * x).sum(),
    "exp_times_x": lambda x: (x.exp() * x).sum(),
}


def _grad_of_vmap(lib, f, x):
    rows = lib.tensor(ROWS)
    return lib.func.grad(lambda x: lib.func.vmap(lambda w: f(x * w))(rows).sum())(x)


def _jvp_of_vmap(lib, f, x):
    rows = lib.tensor(ROWS)
    return lib.func.jvp(lambda x: lib.func.vmap(lambda w: f(x * w))(rows), (x,), (lib.tensor(V),))[
        1
    ]


def _grad_of_grad_of_vmap(lib, f, x):
    rows = lib.tensor(ROWS)
    J = lib.func
    return J.grad(lambda x: J.grad(lambda y: J.vmap(lambda w: f(y * w))(rows).sum())(x).sum())(x)


def _grad_of_vmap_unbatched(lib, f, x):  # the Function's input only lifted into the level
    rows = lib.tensor(ROWS)
    return lib.func.grad(lambda x: lib.func.vmap(lambda w: f(x) * w)(rows).sum())(x)


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize(
    "transform",
    [_grad_of_vmap, _jvp_of_vmap, _grad_of_grad_of_vmap, _grad_of_vmap_unbatched],
    ids=["grad_vmap", "jvp_vmap", "grad_grad_vmap", "grad_vmap_unbatched"],
)
def test_transform_outside_vmap_of_custom_function(name, transform):
    compare(lambda lib: transform(lib, _new_style(lib)[name], lib.tensor(X)))


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize(
    "transform",
    [
        lambda J, f, x, v: J.jvp(J.jacfwd(J.grad(f)), (x,), (v,))[1],
        lambda J, f, x, v: J.jacfwd(lambda x: J.jvp(J.grad(f), (x,), (v,))[1])(x),
    ],
    ids=["jvp_jacfwd_grad", "jacfwd_jvp_grad"],
)
def test_third_order_of_custom_function(name, transform):
    """Against torch.func on the same function in plain ops: torch's custom-Function
    result drops the second-order tangent of a saved output (0 for exp_out, half the
    third derivative for two_outputs)."""
    ours = transform(staged.func, _new_style(staged)[name], staged.tensor(X), staged.tensor(V))
    theirs = transform(torch.func, PLAIN[name], torch.tensor(X), torch.tensor(V))
    close(ours, theirs)


def _straight_through(lib):
    class RoundST(lib.autograd.Function):  # a backward that is not forward's derivative
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x.round()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            return t

    return RoundST


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_transform_outside_vmap_uses_the_custom_rules(mode):
    def run(lib):
        f = _straight_through(lib).apply
        rows, x = lib.tensor(ROWS), lib.tensor(X)

        def h(x):
            return lib.func.vmap(lambda w: f(x * w))(rows)

        if mode == "grad":
            return lib.func.grad(lambda x: h(x).sum())(x)
        return lib.func.jvp(h, (x,), (lib.tensor(V),))[1]

    compare(run)


# --- the checks on what jvp returns -------------------------------------------------------
def _apply_dual(lib, forward, jvp, mark):
    class C(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = forward(x)
            if mark == "mark_dirty":
                ctx.mark_dirty(x)
            elif mark == "mark_non_differentiable":
                ctx.mark_non_differentiable(y)
            return y

        @staticmethod
        def backward(ctx, g):
            return g

    C.jvp = staticmethod(lambda ctx, t: jvp(t))
    fw = lib.autograd.forward_ad
    with fw.dual_level():
        x = fw.make_dual(lib.tensor([1.0, 2.0]), lib.tensor([1.0, -1.0]))
        return fw.unpack_dual(C.apply(x)).tangent


@pytest.mark.parametrize(
    "forward, jvp, mark, words",
    [
        (lambda x: x * 2, lambda t: t * 2, "mark_non_differentiable", "is not a differentiable"),
        (lambda x: x, lambda t: t.clone(), None, "the jvp is not returning a view."),
        (lambda x: x, lambda t: t, None, "the jvp is not returning a view."),
        (lambda x: x[:1], lambda t: t[:1].clone(), None, "not returning a view."),
        (
            lambda x: x,
            lambda t: t.clone().view_as(t),
            None,
            "not returning a view of the given grad input",
        ),
        (lambda x: x.mul_(2), lambda t: t * 2, "mark_dirty", "not modifying the forward mode"),
        (lambda x: x.mul_(2), lambda t: t, "mark_dirty", "not modifying the forward mode"),
        (lambda x: x.mul_(2), lambda t: None, "mark_dirty", "not modifying the forward mode"),
        (
            lambda x: x.mul_(2),
            lambda t: t.clone().mul_(2),
            "mark_dirty",
            "not returning the forward mode gradients as-is",
        ),
    ],
    ids=[
        "non_differentiable",
        "as_is_clone",
        "as_is_same",
        "view_clone",
        "as_is_view_of_other",
        "dirty_new",
        "dirty_unmodified",
        "dirty_none",
        "dirty_other_modified",
    ],
)
def test_jvp_checks_like_torch(forward, jvp, mark, words):
    raises_like_torch(lambda lib: _apply_dual(lib, forward, jvp, mark), words)


@pytest.mark.parametrize(
    "forward, jvp, mark",
    [
        (lambda x: x * 2, lambda t: None, "mark_non_differentiable"),
        (lambda x: x, lambda t: t.view_as(t), None),
        (lambda x: x, lambda t: t[:], None),
        (lambda x: x.mul_(2), lambda t: t.mul_(2), "mark_dirty"),
    ],
    ids=["non_differentiable_none", "as_is_view", "as_is_slice", "dirty_in_place"],
)
def test_jvp_accepted_like_torch(forward, jvp, mark):
    ours = _apply_dual(staged, forward, jvp, mark)
    theirs = _apply_dual(torch, forward, jvp, mark)
    assert (ours is None) == (theirs is None)
    if theirs is not None:
        close(ours, theirs)


def test_a_saved_output_unpacks_as_the_output_it_is():
    """A Function saving its second output: the double backward reached the first (a saved
    output unpacked with output number 0)."""
    compare(
        lambda lib: lib.autograd.grad(
            lib.autograd.grad(
                _new_style(lib)["two_outputs"](x := lib.tensor(X, requires_grad=True)),
                x,
                create_graph=True,
            )[0].sum(),
            x,
        )[0]
    )


@pytest.mark.parametrize("outside", ["grad", "backward", "jvp"])
def test_a_ctx_style_function_under_vmap_that_a_transform_outside_differentiates_raises(outside):
    """torch.func refuses a Function whose forward takes ctx; staged runs it under vmap
    alone, and raises torch's error where a transform outside would see nothing of it
    (its gradient or tangent came out 0)."""

    def run(lib):
        f = lib.func.vmap(_ctx_style(lib)["cube_in"])
        x = lib.tensor(ROWS)
        if outside == "grad":
            return lib.func.grad(lambda x: f(x).sum())(x)
        if outside == "jvp":
            return lib.func.jvp(f, (x,), (lib.ones_like(x),))
        f(x.requires_grad_()).sum().backward()

    raises_like_torch(run, "it must override the setup_context staticmethod")
    want = torch.func.vmap(_new_style(torch)["pow_k"])(torch.tensor(ROWS))
    close(staged.func.vmap(_ctx_style(staged)["cube_in"])(staged.tensor(ROWS)), want)


def _doubling(lib, rule=None):
    """A Function doubling its input, with ``rule`` as its vmap staticmethod."""

    class Double(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    if rule is not None:
        Double.vmap = staticmethod(lambda info, in_dims, x: rule(Double, info, in_dims, x))
    return Double


def test_vmap_staticmethod_batching_rules_as_torch():
    """The user's rule gets torch's info and in_dims; its out_dims place the batch dim;
    without a rule or generate_vmap_rule, and with a rule returning one value, torch's
    errors."""
    seen = {}

    def moving(cls, info, in_dims, x):
        seen.setdefault(len(seen), (info.batch_size, info.randomness, in_dims))
        return cls.apply(x.movedim(in_dims[0], 0)), 0

    rules = {
        "moving": moving,
        "in place of the batch": lambda cls, info, in_dims, x: (x * 2, in_dims[0]),
        "negative": lambda cls, info, in_dims, x: (x * 2, in_dims[0] - x.ndim),
    }
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    for name, rule in rules.items():
        outs = []
        for lib in (staged, torch):
            x = lib.tensor(a, requires_grad=True)
            y = lib.func.vmap(_doubling(lib, rule).apply, in_dims=1)(x)
            (y * lib.arange(3.0)).sum().backward()
            outs.append((y, x.grad))
        for ours, theirs in zip(*outs):
            np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy(), name)
    assert seen[0] == (4, "error", (1,))
    for rule, words in (
        (None, "does not have vmap support. Please override and implement the vmap"),
        (lambda cls, info, in_dims, x: x * 2, "Expected the vmap staticmethod to have two"),
    ):
        for lib in (staged, torch):
            with pytest.raises(RuntimeError, match=words):
                lib.func.vmap(_doubling(lib, rule).apply)(lib.ones(2, 3))
