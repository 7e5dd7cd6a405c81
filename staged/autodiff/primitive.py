"""Primitives: each declared once with its impl, shape rule, VJP and JVP.

A VJP rule is a plain function whose argument names say what it needs (Note [saved
tensors from signatures]):

* ``g``        the cotangent of the output;
* ``out``      the primitive's output (saved);
* an input's name (``x``, ``y`` ...) saves that input;
* ``<x>_aval`` keeps only the input's shape and dtype;
* any other name is a static parameter of the primitive (``dims``, ``shape`` ...);
* ``i`` (variadic primitives only, whose impl takes ``*xs``): the operand's position.

Rules are written in the strict vocabulary of ``lax.py`` (primitives bound on operands
of one shape and dtype, never NumPy, never the public ops' promotion and broadcasting),
so they run eagerly, record under capture and differentiate again.
"""

from __future__ import annotations

import copy
import functools
import inspect
from typing import NamedTuple
from collections.abc import Callable

from .. import dtypes as dt
from .avals import Aval

# JVP tags (PyTorch's auto_element_wise / auto_linear; JAX's deflinear / defjvp_zero).
ELEMENTWISE = "elementwise"  # jvp(t) = sum_i conj(vjp_i(conj(t_i)))
LINEAR = "linear"  # jvp(t) = prim(t_0, t_1, ...) with zeros for missing tangents
ZERO = "zero"  # output is not differentiable

REGISTRY: dict[str, Primitive] = {}
FUSED: dict[str, Fused] = {}  # eager-only kernels (``Fused``), never in a graph

# Set by staged.eager at import: binds a primitive to Tensor operands, and wraps a payload
# (a constant the strict vocabulary, ``lax.py``, makes) as a Tensor.
_bind: list[Callable] = [None]  # type: ignore[list-item]  # set at import, as said
_constant: list[Callable] = [None]  # type: ignore[list-item]
# Set by staged.eager: a constant ``array`` to combine with the payload ``like`` that is
# not a NumPy array (a meta tensor's metadata where ``like`` is meta)
_constant_like: list[Callable] = [lambda array, like: _constant[0](array)]
# Set by staged.eager: whether a Fused primitive may run its own kernel for these operands
_fused_here: list[Callable] = [None]  # type: ignore[list-item]
# Set by staged.eager: ``plain(fn, args, params)``, the NumPy function ``fn`` on the Tensor
# ``args``' arrays as a Tensor where no graph is built, else None (Note [plain rules])
_plain: list[Callable] = [lambda fn, args, params: None]


class Public(NamedTuple):
    """An op's public surface, declared once (``staged/eager/ops/table.py`` builds it):
    ``staged.<name>`` (``export``), ``Tensor.<name>`` (``method``), the same for each of
    ``aliases``, ``Tensor.<name>_`` (``inplace``) and ``nn.functional.<name>``
    (``functional``). ``op`` is the function; on a primitive declared with ``public=`` it
    says how the generated function readies its operands: ``"promote"`` (PyTorch's type
    promotion and broadcasting) or ``"float"`` (the same, then integers and bools become
    the default float dtype)."""

    op: object = "promote"
    aliases: tuple = ()
    method: bool = True
    inplace: bool = False
    export: bool = True
    functional: bool = False


CLASSES = ("bool", "int", "uint", "float", "complex")  # dtype classes (``DType.dclass``)


def domain(*inside, others=None, **outside) -> dict:
    """A primitive's dtype domain, as the classes outside it with why: ``{class: reason}``.

    ``domain(complex=WHY)`` is every class but complex; ``domain("float", "complex",
    others=WHY)`` is float and complex only, ``others`` saying why for the rest. A keyword
    ``integer`` names int and uint together. Every class outside needs its reason.
    """
    if "integer" in outside:
        why = outside.pop("integer")
        outside.update(int=why, uint=why)
    unknown = (set(inside) | set(outside)) - set(CLASSES)
    if unknown:
        raise ValueError(f"unknown dtype class(es) {sorted(unknown)}; the classes are {CLASSES}")
    if not inside:
        return outside
    rest = [c for c in CLASSES if c not in inside and c not in outside]
    if rest and not others:
        raise ValueError(f"domain: no reason given for {rest} (pass others=...)")
    return {**dict.fromkeys(rest, others), **outside}


UNORDERED = "complex numbers are not ordered (PyTorch has no complex form of this op either)"
ORDERED = domain(complex=UNORDERED)  # the domain of comparisons, extrema and sorts


class Rule:
    """One VJP rule with its argument names split by role (computed once)."""

    __slots__ = ("fn", "inputs", "avals", "static", "wants_out", "saved_names", "positional")

    def __init__(self, fn, input_names, static_names, bound=()):
        names = [n for n in inspect.signature(fn).parameters if n not in bound]
        if not names or names[0] != "g":
            raise TypeError(f"VJP rule {fn.__qualname__} must take the cotangent `g` first")
        self.fn = fn
        self.inputs = tuple(n for n in names[1:] if n in input_names)
        self.avals = tuple(n[:-5] for n in names[1:] if n.endswith("_aval"))
        self.wants_out = "out" in names
        self.static = tuple(n for n in names[1:] if n in static_names)
        self.saved_names = self.inputs + ("out",) if self.wants_out else self.inputs
        # fn(g, *saved) will do: its arguments are the saved tensors, in their order
        self.positional = not bound and tuple(names[1:]) == self.saved_names
        unknown = (
            set(names[1:])
            - set(self.inputs)
            - {a + "_aval" for a in self.avals}
            - set(self.static)
            - {"out"}
        )
        if unknown:
            raise TypeError(f"VJP rule {fn.__qualname__}: unknown argument(s) {sorted(unknown)}")


class PerOperand:
    """The VJP rules of a variadic primitive: its one rule ``fn(g, i, ...)`` with ``i``
    bound to each operand position in turn (iterating never ends; zip it with operands)."""

    __slots__ = ("rule", "_bound")

    def __init__(self, rule):
        self.rule = rule
        self._bound = []

    def __iter__(self):
        i = 0
        while True:
            if i == len(self._bound):
                r = copy.copy(self.rule)
                r.fn = functools.partial(self.rule.fn, i=i)
                self._bound.append(r)
            yield self._bound[i]
            i += 1


class Primitive:
    """A shape-strict operation with everything needed to run, differentiate and lower it."""

    __slots__ = (
        "name",
        "impl",
        "shape_rule",
        "vjp",
        "jvp",
        "inputs",
        "static",
        "view",
        "node_name",
        "doc",
        "unsupported",
        "np_domain",
        "variadic",
        "public",
        "save_plans",
    )

    def __init__(
        self,
        name,
        impl,
        shape_rule,
        *,
        vjp=None,
        jvp=None,
        view=False,
        node_name=None,
        domain=None,
        public=None,
        registry=REGISTRY,
    ):
        if name in registry:
            raise ValueError(f"primitive {name!r} declared twice")
        sig = inspect.signature(impl)
        self.name = name
        self.impl = impl
        self.shape_rule = shape_rule
        self.inputs = tuple(
            p.name
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        )
        self.static = tuple(p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY)
        # variadic (``impl(*xs, ...)``, e.g. concat): one rule for every operand, given ``i``
        self.variadic = any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values())
        if self.variadic:
            self.vjp = None if vjp is None else PerOperand(Rule(vjp, (), self.static, ("i",)))
        else:
            if vjp is not None and not isinstance(vjp, tuple):
                vjp = (vjp,)
            if vjp is not None and len(vjp) != len(self.inputs):
                raise TypeError(f"{name}: one VJP rule per input ({len(self.inputs)}) expected")
            self.vjp = (
                None
                if vjp is None
                else tuple(None if f is None else Rule(f, self.inputs, self.static) for f in vjp)
            )
        if jvp is None:
            jvp = ZERO if vjp is None else None
        self.jvp = jvp
        self.view = view
        self.node_name = node_name or "".join(p.title() for p in name.split("_")) + "Backward0"
        self.doc = (impl.__doc__ or "").strip()
        # the dtype domain (of the first operand; a primitive with one keeps its operands'
        # dtypes equal): ``unsupported`` {class outside: why}, ``np_domain`` the NumPy
        # dtypes inside (None: all), which binding checks (``check_domain``)
        self.unsupported = dict(domain or {})
        self.np_domain = (
            None
            if not domain
            else frozenset(d.np for d in dt.ALL if d.dclass not in self.unsupported)
        )
        self.public = public
        self.save_plans = {}  # autograd's, per pattern of inputs needing a gradient
        registry[name] = self

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None

    def __call__(self, *args, **params):
        return _bind[0](self, args, params)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"

    def domain_error(self, np_dtype) -> RuntimeError:
        """The error for binding this primitive to a dtype outside its domain (PyTorch's
        class for a kernel a dtype lacks)."""
        d = dt.from_numpy_dtype(np_dtype)
        return RuntimeError(
            f"primitive {self.name!r} is not defined for {d.name} tensors: "
            f"{self.unsupported[d.dclass]}"
        )

    def abstract_eval(self, *avals: Aval, **params) -> Aval:
        return self.shape_rule(*avals, **params)


class Fused(Primitive):
    """An eager kernel for what is elsewhere a composite of primitives (``linear``,
    ``layer_norm``): on NumPy operands it runs ``impl`` and records one Node whose VJP
    rules may bind further Fused kernels; under vmap a kernel with a batching rule binds
    itself on the batch; everywhere else (a capture, forward AD, vmap without a rule, and,
    for one without VJP rules, wherever its result would need a grad_fn) it calls
    ``decomposition``, the same function of the same operands written with primitives.
    So graphs, lowerings and higher derivatives see only the decomposition, and eager
    code pays one dispatch and one Node (Note [fused kernels] in ``eager/dispatch.py``).
    ``tests/autodiff/test_fused.py`` checks each against its decomposition."""

    __slots__ = ("decomposition",)

    def __init__(self, name, impl, decomposition, *, vjp=None, node_name=None, view=False):
        super().__init__(
            name, impl, _no_shape_rule, vjp=vjp, node_name=node_name, view=view, registry=FUSED
        )
        self.decomposition = decomposition

    def __call__(self, *args, **params):
        here = _fused_here[0](self, args)  # True, False, or how to bind it instead
        if here is True:
            return _bind[0](self, args, params)
        if here:
            return here(self, args, params)
        return self.decomposition(*args, **params)


def _no_shape_rule(*avals, **params):
    raise TypeError("a Fused kernel is never traced: its decomposition is")


def primitive(name, shape_rule, **kw):
    """Decorator form: ``@primitive("reduce_sum", reduce_shape)`` over the NumPy impl."""

    def wrap(impl):
        return Primitive(name, impl, shape_rule, **kw)

    return wrap
