"""The public-op table: each op's surface declared once, as a row of ``ROWS`` or, for an op
generated from its primitive, as ``public=`` on the primitive (``staged/autodiff``).

``staged.<name>``, ``Tensor.<name>``, ``Tensor.<name>_``, the aliases and the activations
of ``nn.functional`` are all made from ``OPS``; ``tests/ops`` fails for an exported op
without an op-database entry.
"""

from __future__ import annotations

import functools
import inspect

from ... import autodiff as ad
from ..._where import at_user
from ...autodiff import Public
from ...autodiff.elementwise import BESSEL
from ...autodiff.polynomials import POLYNOMIALS
from .. import autocast, views
from ..tensor import Tensor
from . import (
    attention,
    composite,
    data_dependent,
    indexing,
    inplace,
    linalg,
    metadata,
    out,
    quantiles,
    reduction,
    scatters,
    shape,
)
from . import elementwise as ew

ROWS = {
    # elementwise ops written by hand (keyword options, dtype rules, composites)
    **{
        n: Public(getattr(ew, n), inplace=True)
        for n in (
            "add",
            "sub",
            "div",
            "pow",
            "neg",
            "floor",
            "ceil",
            "round",
            "trunc",
            "remainder",
            "fmod",
            "floor_divide",
            "square",
            "reciprocal",
            "clamp_min",
            "clamp_max",
            "lerp",
            "addcmul",
            "addcdiv",
        )
    },
    "clamp": Public(ew.clamp, aliases=("clip",), inplace=True),
    **{
        n: Public(getattr(ew, n))
        for n in (
            "clone",
            "conj",
            "sign",
            "isnan",
            "isinf",
            "isfinite",
            "isposinf",
            "isneginf",
            "isreal",
        )
    },
    "rsub": Public(ew.rsub, method=False),
    **{
        n: Public(getattr(ew, n), inplace=True)
        for n in ("logical_and", "logical_or", "logical_not", "logical_xor")
    },
    # Tensor.where(condition, other) and the .real/.imag properties are in __init__.py
    # Tensor.polygamma(n) takes its arguments the other way round: in __init__.py
    **{n: Public(getattr(ew, n), method=False) for n in ("where", "real", "imag", "polygamma")},
    **{
        n: Public(getattr(composite, n), method=False, functional=True)
        for n in ("gelu", "silu", "softplus")
    },
    **{n: Public(getattr(composite, n), functional=True) for n in ("hardshrink", "prelu")},
    "nan_to_num": Public(ew.nan_to_num, inplace=True),
    "softmax": Public(composite.softmax),
    "log_softmax": Public(composite.log_softmax),
    "scaled_dot_product_attention": Public(
        attention.scaled_dot_product_attention, method=False, export=False, functional=True
    ),
    **{
        n: Public(getattr(linalg, n))
        for n in (
            *("matmul", "mm", "bmm", "outer", "dot", "mv"),
            *("vdot", "inner", "dist", "cov", "corrcoef"),
        )
    },
    **{n: Public(getattr(linalg, n), inplace=True) for n in ("addmm", "baddbmm", "addmv", "addr")},
    "einsum": Public(linalg.einsum, method=False),
    **{
        n: Public(getattr(reduction, n))
        for n in (
            "sum",
            "mean",
            "var",
            "std",
            "amax",
            "amin",
            "max",
            "min",
            "argmax",
            "argmin",
            "logsumexp",
            "prod",
            "cumsum",
            "cumprod",
            "diff",
            "sort",
            "argsort",
            "topk",
            "norm",
            "aminmax",
            "msort",
        )
    },
    "sum_to_size": Public(reduction.sum_to_size, export=False),
    "trapezoid": Public(reduction.trapezoid, aliases=("trapz",), method=False),
    "cumulative_trapezoid": Public(reduction.cumulative_trapezoid, method=False),
    "gradient": Public(reduction.gradient, method=False),
    **{
        n: Public(getattr(shape, n))
        for n in (
            "reshape",
            "flatten",
            "unflatten",
            "diagonal",
            "diag",
            "squeeze",
            "unsqueeze",
            "permute",
            "transpose",
            "t",
            "split",
            "chunk",
            "narrow",
            "repeat_interleave",
            "flip",
            "fliplr",
            "flipud",
            "roll",
            "unbind",
            "tensor_split",
            "hsplit",
            "vsplit",
            "dsplit",
            "ravel",
            "rot90",
            "diag_embed",
            "diagflat",
            "adjoint",
            "is_nonzero",
            "is_same_size",
            "is_signed",
        )
    },
    **{n: Public(getattr(shape, n), inplace=True) for n in ("tril", "triu")},
    **{
        n: Public(getattr(shape, n), method=False)
        for n in (
            "cat",
            "stack",
            "numel",
            "is_tensor",
            "is_floating_point",
            "is_complex",
            "tril_indices",
            "triu_indices",
        )
    },
    # torch has them as functions only (no Tensor methods)
    **{n: Public(getattr(shape, n), method=False) for n in ("view_as_real", "view_as_complex")},
    **{n: Public(getattr(composite, n), method=False) for n in ("complex", "polar")},
    **{
        n: Public(getattr(shape, n), export=False)
        for n in (
            "view",
            "expand",
            "contiguous",
            "new_zeros",
            "repeat",
            "view_as",
            "expand_as",
            "reshape_as",
            "unfold",
        )
    },
    **{n: Public(getattr(data_dependent, n)) for n in ("nonzero", "unique", "argwhere")},
    **{
        n: Public(getattr(indexing, n))
        for n in ("index_select", "gather", "scatter_add", "masked_fill", "take_along_dim")
    },
    **{
        n: Public(getattr(indexing, n), inplace=True) for n in ("scatter", "index_put", "index_add")
    },
    # NumPy-style names (the compatibility issue)
    **{
        n: Public(getattr(composite, n), inplace=True)
        for n in ("deg2rad", "rad2deg", "xlogy", "frac", "logit", "sinc")
    },
    # torch.special's own (staged.special.<name> only: SPECIAL below)
    **{
        n: Public(getattr(composite, n), method=False, export=False)
        for n in ("ndtr", "xlog1py", "log_ndtr", "modified_bessel_i0", "modified_bessel_i1")
    },
    "mvlgamma": Public(composite.mvlgamma, inplace=True),
    **{
        n: Public(getattr(composite, n))
        for n in (
            "logaddexp",
            "logaddexp2",
            "logcumsumexp",
            "fmax",
            "fmin",
            "positive",
            "float_power",
            "isclose",
            "allclose",
        )
    },
    **{
        n: Public(getattr(reduction, n))
        for n in (
            "count_nonzero",
            "any",
            "all",
            "nansum",
            "nanmean",
            "trace",
            "cummax",
            "cummin",
        )
    },
    **{n: Public(getattr(reduction, n), method=False) for n in ("var_mean", "std_mean")},
    "movedim": Public(shape.movedim, aliases=("moveaxis",)),
    **{n: Public(getattr(shape, n)) for n in ("tile", "select")},
    "vstack": Public(shape.vstack, aliases=("row_stack",), method=False),
    **{
        n: Public(getattr(shape, n), method=False)
        for n in (
            "atleast_1d",
            "atleast_2d",
            "atleast_3d",
            "hstack",
            "dstack",
            "column_stack",
            "meshgrid",
            "broadcast_tensors",
        )
    },
    **{n: Public(getattr(indexing, n)) for n in ("take", "masked_select")},
    "index_fill": Public(indexing.index_fill, inplace=True),
    "scatter_reduce": Public(indexing.scatter_reduce, inplace=True),
    **{n: Public(getattr(linalg, n)) for n in ("kron", "cross")},
    **{n: Public(getattr(linalg, n), method=False) for n in ("tensordot", "cdist")},
    **{
        n: Public(getattr(shape, n), method=False)
        for n in ("cartesian_prod", "block_diag", "combinations")
    },
    "broadcast_to": Public(shape.broadcast_to),
    "heaviside": Public(composite.heaviside),
    "signbit": Public(composite.signbit),
    "copysign": Public(composite.copysign, inplace=True),
    "isin": Public(composite.isin, method=False),
    **{
        n: Public(getattr(quantiles, n)) for n in ("median", "nanmedian", "quantile", "nanquantile")
    },
    **{n: Public(getattr(quantiles, n), method=False) for n in ("searchsorted", "bucketize")},
    # in-place methods with their own code (not "compute, then write")
    **{n: Public(getattr(indexing, n), export=False) for n in ("masked_fill_", "scatter_add_")},
    **{n: Public(getattr(inplace, n), export=False) for n in ("fill_", "zero_", "copy_")},
    # order statistics, histograms, bits and integers
    **{n: Public(getattr(quantiles, n)) for n in ("kthvalue", "mode", "histc", "histogram")},
    "histogramdd": Public(quantiles.histogramdd, method=False),
    **{n: Public(getattr(data_dependent, n)) for n in ("bincount", "unique_consecutive")},
    "frexp": Public(composite.frexp),
    "nonzero_static": Public(composite.nonzero_static),
    **{
        n: Public(getattr(composite, n), inplace=True)
        for n in ("ldexp", "gcd", "lcm", "nextafter", "renorm")
    },
    "float_power_": Public(composite.float_power_, export=False),
    "addbmm": Public(linalg.addbmm, inplace=True),
    # writing into parts of a tensor
    **{
        n: Public(getattr(scatters, n), inplace=True)
        for n in ("index_copy", "index_reduce", "masked_scatter", "put")
    },
    **{
        n: Public(getattr(scatters, n))
        for n in ("slice_scatter", "select_scatter", "diagonal_scatter")
    },
    "fill_diagonal_": Public(scatters.fill_diagonal_, export=False),
    **{n: Public(getattr(shape, n)) for n in ("split_with_sizes", "narrow_copy")},
    # metadata and memory: the in-place view ops, as_strided, resize_, new, conj bits ...
    **{
        n: Public(getattr(metadata, n), export=False)
        for n in ("squeeze_", "unsqueeze_", "t_", "transpose_")
    },
    **{n: Public(metadata.transpose_, export=False) for n in ("swapaxes_", "swapdims_")},
    **{
        n: Public(getattr(metadata, n))
        for n in ("as_strided", "resolve_conj", "resolve_neg", "is_conj", "is_neg")
    },
    "conj_physical": Public(metadata.conj_physical, inplace=True),
    **{
        n: Public(getattr(metadata, n), export=False)
        for n in (
            *("resize_", "resize_as_", "new", "new_empty_strided", "apply_", "map_"),
            *("is_shared", "share_memory_"),
        )
    },
}
# torch's other names of ops declared above (NumPy's and the Array API's)
ALIASES = {
    "mul": ("multiply",),
    "sub": ("subtract",),
    "cat": ("concat", "concatenate"),
    "outer": ("ger",),
    "div": ("divide", "true_divide"),
    "neg": ("negative",),
    "transpose": ("swapaxes", "swapdims"),
    "gt": ("greater",),
    "lt": ("less",),
    "ge": ("greater_equal",),
    "le": ("less_equal",),
    "ne": ("not_equal",),
    "trunc": ("fix",),
    # torch's unsafe_ forms: their pieces are no views (``OWN``)
    "chunk": ("unsafe_chunk",),
    "split": ("unsafe_split",),
    "split_with_sizes": ("unsafe_split_with_sizes",),
}
# ops declared above whose rows (or primitives) leave out their in-place form; comparisons
# in place write their bools in the tensor's dtype (1 and 0), as torch's
INPLACE = (
    *("log1p", "expm1", "rsqrt", "sign", "cumsum", "cumprod", "heaviside"),
    *("eq", "ne", "lt", "le", "gt", "ge"),
)
# torch.special's names of ops declared above: staged.special.<name> (staged/special.py)
SPECIAL = {
    "digamma": ("digamma", "psi"),
    "lgamma": ("gammaln",),
    "sigmoid": ("expit",),
    "mvlgamma": ("multigammaln",),
    **dict.fromkeys(
        (
            "erf",
            "erfc",
            "erfinv",
            "exp2",
            "expm1",
            "log1p",
            "log_softmax",
            "logit",
            "logsumexp",
            "polygamma",
            "round",
            "softmax",
            "xlogy",
            "sinc",
            "ndtr",
            "xlog1py",
            *("entr", "erfcx", "log_ndtr", "ndtri", "i0", "i0e", "i1", "i1e", "zeta"),
            *("modified_bessel_i0", "modified_bessel_i1", *BESSEL),
            *POLYNOMIALS,
        ),
        (),
    ),
}
# torch.special's orthogonal polynomials: torch's argument names (x, n) and its TypeError
ROWS.update({n: Public(getattr(composite, n), method=False, export=False) for n in POLYNOMIALS})
OPS = {
    **{
        p.name: p.public._replace(op=getattr(ew, p.name))
        for p in ad.REGISTRY.values()
        if p.public is not None
    },
    **ROWS,
}
OPS.update({n: OPS[n]._replace(aliases=OPS[n].aliases + more) for n, more in ALIASES.items()})
OPS.update({n: OPS[n]._replace(inplace=True) for n in INPLACE})
# the in-place forms of aliases (Tensor.arccos_, multiply_, fix_ ...): rows of their own,
# method and export left to the aliased op's row
OPS.update(
    {
        a: Public(row.op, method=False, export=False, inplace=True)
        for row in list(OPS.values())
        if row.inplace
        for a in row.aliases
    }
)


# torch's Node names of the indexed writes whose result staged's primitives make (a
# scatter, a select): (that of a tensor value, that of a number), for x.op and x.op_ alike
NODES = {
    "index_put": ("IndexPutBackward0", None),
    "index_add": ("IndexAddBackward0", None),
    "index_copy": ("IndexCopyBackward0", None),
    "index_reduce": ("IndexReduceBackward0", None),
    "index_fill": ("IndexFillBackward1", "IndexFillBackward0"),
    "masked_fill": ("MaskedFillBackward1", "MaskedFillBackward0"),
    "masked_scatter": ("MaskedScatterBackward0", None),
    "scatter": ("ScatterBackward0", "ScatterBackward1"),
    "put": ("PutBackward0", None),
}


def _torch_node(op, of_tensor: str, of_number: str | None):
    """``op`` whose result's Node, where ``op`` made one, is named torch's: ``of_number``
    where the value written (the last argument, or ``value=``/``src=``) is a number."""

    @functools.wraps(op)
    def call(*args, **kwargs):
        y = op(*args, **kwargs)
        fn = y.grad_fn
        if fn is not None and all(
            getattr(a, "grad_fn", None) is not fn for a in (*args, *kwargs.values())
        ):
            value = kwargs.get("value", kwargs.get("src", args[-1]))
            number = of_number is not None and not isinstance(value, Tensor)
            views.named(y, of_number if number else of_tensor)
        return y

    return call


OPS.update({n: OPS[n]._replace(op=_torch_node(OPS[n].op, *names)) for n, names in NODES.items()})

# Note [own results]: these ops compute their result in steps and return a view of the
# last one (a reshape of a matmul's product, a squeeze of a sort's values), where torch's
# result is a tensor of its own (``_is_view()`` false): written in place in grad mode after
# being made under no_grad, staged's raised torch's no_grad-view error, which torch does not
# (found by tests/fuzz/test_views_inplace.py on ``v = x @ x`` of vectors). Their results
# are made tensors of their own (``views.owned``) where they view no argument; matmul's
# (and the ``@`` operator's) in ``linalg.matmul``. Not einsum, whose torch result is a
# permuted view of its product in some cases and not in others.
OWN_RESULTS = (
    "dot vdot mv addmv kron kthvalue mode median nanmedian quantile nanquantile "
    "masked_scatter put index_put index_select take diagonal_scatter complex polar "
    "logsumexp diag diag_embed diagflat roll rot90 combinations"
).split()


def _owned(op):
    @functools.wraps(op)
    def call(*args, **kwargs):
        return views.owned(op(*args, **kwargs), args, kwargs)

    return call


OPS.update({n: OPS[n]._replace(op=_owned(OPS[n].op)) for n in OWN_RESULTS})


def _names(row, name):
    return (name,) + row.aliases


def _fn(alias, name):
    """The function of ``alias``, a name of op ``name``: its own where ``OWN`` gives one."""
    return _OWN_SITED.get(alias) or _SITED[name]


def _exported(alias, name):
    """``staged.<alias>``: ``_fn``'s, taking ``out=`` where torch's does (``out.py``)."""
    return _OWN_SITED.get(alias) or _EXPORTED[name]


def exports() -> dict:
    """``{name: function}`` of ``staged.<name>`` (aliases included); every function the
    table gives names the user's line in its errors (``sited``)."""
    return {
        n: _exported(n, name) for name, row in OPS.items() if row.export for n in _names(row, name)
    }


def functional() -> dict:
    """``{name: function}`` of the ``nn.functional`` names the table gives."""
    return {
        name: (_EXPORTED if row.export else _SITED)[name]
        for name, row in OPS.items()
        if row.functional
    }


def special() -> dict:
    """``{name: function}`` of ``staged.special``: torch.special's names (``SPECIAL``; an
    empty tuple keeps the op's own name) for ops of the table."""
    return {
        n: _EXPORTED.get(name, _SITED[name])  # taking out= as torch.special's do
        for name, names in SPECIAL.items()
        for n in names or (name,)
    }


def methods() -> dict:
    """``{name: method}`` of ``Tensor``: ``<name>`` and aliases, and ``<name>_`` (the op
    computed, then written into the tensor) where the row says ``inplace``."""
    out = {}
    for name, row in OPS.items():
        if row.method:
            out.update({n: _fn(n, name) for n in _names(row, name)})
        if row.inplace:
            out[name + "_"] = inplace.inplace_method(row.op)  # sited inline
    return out


# NumPy's names of arguments that torch's argument parser takes for its own (``x.sum(axis=1,
# keepdims=True)``); torch's Python-level functions (``torch.split``, ``F.softmax``) don't
NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}
# torch's keyword names of positional arguments, where staged's functions name them
# otherwise (``x``, ``y``, ``a``, ``b``): their position (``torch.take_along_dim(input=t,
# indices=i, dim=1)``, as transformers' beam search calls it; ``torch.add(input=a, other=b)``)
TORCH_POSITIONAL = {
    "input": 0,
    "other": 1,
    "mat2": 1,
    "tensor": 1,
    "exponent": 1,
    "vec": 1,
    "vec2": 1,
}


# torch's keyword names of one op's argument, by overload, where staged's has one name
TORCH_KEYWORDS = {
    "tensor_split": dict.fromkeys(
        ("sections", "indices", "tensor_indices_or_sections"), "indices_or_sections"
    ),
}


def _renamer(op, name=None):
    """``retry`` for ``op``'s sited function (``_where.sited``): a call's keywords with
    torch's names that ``op`` lacks given the names ``op`` has for them (NumPy's ``axis`` and
    ``keepdims`` too), or None where there is none to rename."""
    try:
        sig = inspect.signature(op).parameters
    except (TypeError, ValueError):
        return None
    params = frozenset(sig)
    positional = [
        n for n, p in sig.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    names = {k: v for k, v in NUMPY_NAMES.items() if v in params and k not in params}
    names.update(TORCH_KEYWORDS.get(name, {}))
    for k, i in TORCH_POSITIONAL.items():
        if k not in params and i < len(positional):
            names[k] = positional[i]
    if not names:
        return None

    def retry(args, kwargs):
        if not kwargs.keys() & names.keys():
            return None
        out = dict(kwargs)
        for theirs, ours in names.items():
            if theirs in out:
                i = positional.index(ours) if ours in positional else len(args)
                if ours in out or i < len(args):
                    raise TypeError(at_user(f"got multiple values for argument '{theirs}'"))
                out[ours] = out.pop(theirs)
        return args, out

    return retry


def _sited(name, op):
    """The public function of ``op``: sited, with autocast's policy where torch lists the op
    (Note [autocast]), taking torch's keyword names and NumPy's (``_renamer``): a call
    that fails on them is made again with staged's (no cost to other calls)."""
    return autocast.sited(op, name, retry=_renamer(op, name))


_SITED = {name: _sited(name, row.op) for name, row in OPS.items()}
_EXPORTED = {
    name: _SITED[name] if name in out.NO_OUT else out.takes_out(name, _SITED[name])
    for name, row in OPS.items()
    if row.export
}
# aliases with a function of their own, of the aliased op's signature (which the stubs and
# the op database read): torch's unsafe_ forms, whose pieces are not tracked as views
OWN = {n: getattr(shape, n) for n in ("unsafe_chunk", "unsafe_split", "unsafe_split_with_sizes")}
_OWN_SITED = {n: _sited(n, fn) for n, fn in OWN.items()}


# torch.special.gammainc / gammaincc are torch.igamma / igammac
SPECIAL.update({"igamma": ("gammainc",), "igammac": ("gammaincc",)})
