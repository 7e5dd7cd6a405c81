"""``staged.onnx.export``: a function or module, its gradients and optionally one optimizer
step, traced into one graph and written as a standard ONNX model (``ai.onnx`` ops only).

The model's inputs are the example arguments, then the module's parameters (named by their
``state_dict`` keys, never initializers), then buffers the step updates, then optimizer
state (``state.<param>.<slot>``), then ``rng_state`` where it draws random numbers (Note
[exported RNG state]). Its outputs are the function's outputs (a scalar loss is
``loss``), then ``grad.<name>`` per differentiated input, then ``updated.<name>`` for every
input the step writes. Needs the ``onnx`` extra; ``staged`` itself never imports this module.
"""

from __future__ import annotations

import inspect
import json
import os
import warnings
from typing import Any

import numpy as np

from .._version import __version__
from .._where import at_user
from ..autodiff import Aval
from ..autograd import grad as _autograd_grad
from ..tracing.capture import trace
from ..tracing.dynamic import DynamicError, generalize, mismatch, resize, substitute
from ..tracing.ir import Graph, Input
from ..eager.random.counter import rng_state
from ..eager.tensor import Tensor
from ..lower.onnx_lowering import DEFAULT_OPSET, ExportError, to_onnx
from ..lower.onnx_lowering.model import check_opset
from ..nn import Module
from ..optim import Optimizer
from . import symbolic_helper, symbolic_opset11  # noqa: F401  (torchvision imports them)

__all__ = ["export", "export_captured", "ExportError", "is_in_onnx_export", "rng_state"]

# Above this many bytes of constants a model cannot be one protobuf (2 GiB, less room for
# the nodes): constants of >= 1 KiB are then streamed to ``<file>.data``.
EXTERNAL_ABOVE = 2**31 - 2**26


def export(
    fn_or_module,
    example_args,
    path,
    *,
    with_gradients=True,
    opset=DEFAULT_OPSET,
    dynamic_axes=None,
    training_step=None,
    loss_fn=None,
    input_names=None,
):
    """Trace ``fn_or_module`` on ``example_args`` and write it, with gradients, as ONNX.

    Args:
        fn_or_module: a function of tensors, or an ``nn.Module`` (the exported function is
            ``module(*args)``, or ``loss_fn(module(*args[:-1]), args[-1])`` with ``loss_fn``).
            With gradients its (first) output must be a scalar loss.
        example_args: a tensor or a tuple of tensors (Python scalars are baked in).
        path: the ``.onnx`` file to write.
        with_gradients: True for a ``grad.<name>`` output per parameter that requires grad
            and per tensor argument that requires grad; a list of input names for exactly
            those (arguments listed need not require grad); False for none.
        opset: the ai.onnx opset, 18 to 26.
        dynamic_axes: ``{input name: {axis: dim name}}`` (or a list of axes: axis 0 is
            ``batch``); the graph is traced once more per dim name with that dim changed,
            and every shape and constant that follows it becomes dynamic.
        training_step: an optimizer over the parameters: the model runs ``zero_grad()``,
            the loss, ``backward()`` and ``step()``, and returns the updated parameters and
            optimizer state (``updated.<name>``; the state must exist: take one step first).
        loss_fn: with a module, ``loss_fn(output, target)`` makes its loss.
        input_names: names for the example arguments (default: the function's parameter
            names, else ``input0, input1, ...``).

    Returns the ``onnx.ModelProto`` written (external data not loaded). Every check (opset,
    ops without an ONNX lowering, gradients of non-float inputs, duplicate names) runs
    before anything is written; errors are ``ExportError``.
    """
    check_opset(opset)
    _check_target(path)
    args = tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)
    if not all(isinstance(a, (Tensor, int, float, bool)) for a in args):
        raise TypeError(
            at_user(
                "example_args must be tensors and Python scalars, got "
                f"{[type(a).__name__ for a in args]}: pass staged.tensor(...) examples"
            )
        )
    fn, module = _function(fn_or_module, loss_fn)
    arg_names = _arg_names(fn_or_module, loss_fn, args, input_names)
    names = _state_names(module, fn, training_step)
    wrt = _gradient_targets(with_gradients, args, arg_names, names, training_step)
    exported = _trace(fn, args, arg_names, names, wrt, training_step)
    sources = {}
    if dynamic_axes:
        exported, sources = _dynamic(
            exported, fn, args, arg_names, names, wrt, training_step, dynamic_axes
        )
    g, in_names, out_names, meta = exported
    title = getattr(fn_or_module, "__qualname__", type(fn_or_module).__name__)
    doc = (
        f"{title}: {'one training step' if training_step else 'forward'}"
        f"{' and gradients' if meta['gradients'] else ''}, traced by staged {__version__}"
    )
    return _write(g, path, opset, in_names, out_names, meta, doc, sources)


def export_captured(captured, path, *, opset=DEFAULT_OPSET):
    """Write a ``Captured`` graph as ONNX with its own names (Note [state names] in
    ``staged/tracing/names.py``): arguments and state as the trace named them (``x``,
    ``0.weight``); outputs ``loss`` (what the function returns), ``grad.<state>``,
    ``updated.<state>``."""
    check_opset(opset)
    _check_target(path)
    if captured.rng is not None and captured.rng.draws:  # Note [host draws]
        what, where = captured.rng.whats[0]
        raise ExportError(
            f"the captured graph takes random draws made on the host at each "
            f"call ({what} at {where or 'an unknown line'}), which an ONNX model "
            "cannot make: export with staged.onnx.export(fn, args), which traces "
            "them in the graph (the counter-based stream), or in eval mode"
        )
    g = captured.graph
    prefix = {"out": "", "grad": "grad.", "state": "updated.", "escaped": "escaped."}
    outs = [prefix.get(o.kind, o.kind + ".") + o.name for o in g.outputs]
    meta = {
        "gradients": {n: o.name for n, o in zip(outs, g.outputs) if o.kind == "grad"},
        "updates": {n: o.name for n, o in zip(outs, g.outputs) if o.kind == "state"},
    }
    return _write(
        g,
        path,
        opset,
        [i.name for i in g.inputs],
        outs,
        meta,
        "a graph captured by staged.capture",
        {},
    )


_EXPORTING = [False]  # whether ``export`` is tracing


def is_in_onnx_export() -> bool:
    """True while ``export`` traces the exported function, as torch's (code that exports
    otherwise than it runs asks)."""
    return _EXPORTING[0]


def _check_target(path) -> None:
    """The directory ``path`` goes into exists (checked before anything is traced)."""
    parent = os.path.dirname(os.fspath(path)) or "."
    if not os.path.isdir(parent):
        raise FileNotFoundError(
            at_user(
                f"cannot write the ONNX model to {os.fspath(path)!r}: the directory "
                f"{parent!r} does not exist; create it first (os.makedirs({parent!r}))"
            )
        )


# --- what is exported -------------------------------------------------------------------
def _function(fn_or_module, loss_fn):
    if isinstance(fn_or_module, Module):
        m = fn_or_module
        if loss_fn is None:
            return m, m
        return (lambda *a: loss_fn(m(*a[:-1]), a[-1])), m
    if loss_fn is not None:
        raise TypeError("loss_fn= applies to a module; a function computes its own loss")
    if not callable(fn_or_module):
        raise TypeError(f"expected a function or an nn.Module, got {type(fn_or_module).__name__}")
    return fn_or_module, None


def _arg_names(fn_or_module, loss_fn, args, given):
    if given is not None:
        names = list(given)
        if len(names) != len(args):
            raise ExportError(f"input_names has {len(names)} names for {len(args)} arguments")
        return names
    target = fn_or_module.forward if isinstance(fn_or_module, Module) else fn_or_module
    try:
        params = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if loss_fn is not None:
        params = params[: len(args) - 1] + ["target"]
    return [params[i] if i < len(params) else f"input{i}" for i in range(len(args))]


def _state_names(module, fn, opt) -> dict:
    """``id(tensor) -> name`` for parameters and buffers (state_dict keys) of the module,
    or of the modules the function closes over, ``state.<param>.<slot>`` for the state of
    ``opt`` (else of the optimizers the function closes over: a step that calls
    ``opt.step()`` itself) and ``rng_state`` for the counter-based generator's (seed,
    counter), which dropout advances (Note [exported RNG state])."""
    mods = {"": module} if module is not None else _closure_values(fn, Module)
    names: dict[int, tuple[str, Any, bool]] = {}
    for prefix, m in mods.items():
        for kind in ("named_parameters", "named_buffers"):
            for k, t in getattr(m, kind)():
                names.setdefault(id(t), (prefix + k, t, kind == "named_parameters"))
    opts = [opt] if opt is not None else list(_closure_values(fn, Optimizer).values())
    for o in opts:
        for p, slots in o.state.items():
            pname = names.get(id(p), (None,))[0]
            for slot, t in slots.items():
                if isinstance(t, Tensor) and pname is not None:
                    names[id(t)] = (f"state.{pname}.{slot}", t, False)
    names[id(rng_state())] = ("rng_state", rng_state(), False)
    return names


# Note [exported RNG state]: dropout (and rand/randn) in an exported step draws from the
# counter-based stream (Note [counter-based RNG] in autodiff/random.py) and advances its
# (seed, counter) tensor (``staged.onnx.rng_state()``) in place, so the model takes it as
# the input ``rng_state`` and returns ``updated.rng_state``: fed back at each run, every
# run draws new masks, as ``staged.compile(step, rng="counter")`` does from the same seed.
# Before, the export raised ``ExportError: the step writes a tensor that is neither a
# parameter, ... (state4, int64[2])``.


def _closure_values(fn, cls) -> dict:
    """The ``cls`` instances a function reads from its closure or globals, by variable name
    (``{"": it}`` when there is one)."""
    try:
        cv = inspect.getclosurevars(fn)
    except (TypeError, ValueError):
        return {}
    found = {k: v for k, v in {**cv.globals, **cv.nonlocals}.items() if isinstance(v, cls)}
    if len(found) == 1:
        return {"": next(iter(found.values()))}
    return {f"{k}.": v for k, v in found.items()}


def _gradient_targets(with_gradients, args, arg_names, names, opt) -> list:
    """[(name, ("arg", index) or ("state", tensor))] to differentiate with respect to."""
    params = [(n, t) for n, t, is_param in names.values() if is_param]
    if with_gradients is True:
        wrt = [
            (n, ("arg", i))
            for i, (n, a) in enumerate(zip(arg_names, args))
            if isinstance(a, Tensor) and a.requires_grad
        ]
        wrt += [(n, ("state", t)) for n, t in params if t.requires_grad]
    elif not with_gradients:
        wrt = []
    else:
        by_name = {n: ("arg", i) for i, n in enumerate(arg_names)}
        by_name.update((n, ("state", t)) for n, t in params)
        unknown = [n for n in with_gradients if n not in by_name]
        if unknown:
            raise ExportError(
                f"with_gradients names unknown inputs {unknown}; inputs are {list(by_name)}"
            )
        wrt = [(n, by_name[n]) for n in with_gradients]
    for n, (kind, ref) in wrt:
        t = args[ref] if kind == "arg" else ref
        if not isinstance(t, Tensor) or not t.dtype.is_floating_point:
            what = type(t).__name__ if not isinstance(t, Tensor) else t.dtype.name
            raise ExportError(
                f"cannot export the gradient with respect to {n!r}: only "
                f"floating point inputs have gradients (it is {what})"
            )
    if opt is not None and not any(kind == "state" for _, (kind, _) in wrt) and with_gradients:
        raise ExportError("training_step= given, but no parameter requires grad")
    return wrt


# --- tracing ----------------------------------------------------------------------------
def _trace(fn, args, arg_names, names, wrt, opt):
    """Capture the exported step; returns (graph, input names, output names, metadata)."""
    args = tuple(
        a.detach().requires_grad_()
        if isinstance(a, Tensor) and any(k == ("arg", i) for _, k in wrt)
        else a
        for i, a in enumerate(args)
    )
    differentiate = bool(wrt) or opt is not None

    def body(*a):
        if opt is not None:
            opt.zero_grad()
        out = fn(*a)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if not differentiate:
            return tuple(outs)
        loss = outs[0] if outs else None
        if not isinstance(loss, Tensor) or loss.numel() != 1 or not loss.dtype.is_floating_point:
            raise ExportError(
                "exporting gradients needs the function's (first) output to be a "
                f"scalar floating point loss, got {_describe(loss)}"
            )
        targets = [a[ref] if kind == "arg" else ref for _, (kind, ref) in wrt]
        if opt is None:
            itself = (
                "export it with with_gradients=False, which writes its updated parameters "
                "and optimizer state as outputs (updated.<name>), or export the model with "
                "training_step=opt"
            )
            if targets and not loss.requires_grad:  # torch's bare RuntimeError otherwise
                raise ExportError(
                    "exporting gradients takes them of the function's (first) output, which "
                    "does not require grad: where the function is a training step that runs "
                    f"backward() itself and returns loss.detach(), {itself}"
                )
            try:
                grads = _autograd_grad(loss, targets, materialize_grads=True) if targets else ()
            except RuntimeError as err:
                if "backward through the graph a second time" not in str(err):
                    raise
                raise ExportError(
                    "exporting gradients takes them of the function's loss, and the function "
                    f"already ran backward() on it (a training step): {itself}"
                ) from err
        else:
            if not loss.requires_grad:  # backward() would raise torch's bare RuntimeError
                raise ExportError(
                    "training_step= runs backward() and opt.step() on the function's loss, "
                    "which does not require grad: a function that steps its optimizer "
                    "itself (returning loss.detach()) is exported without training_step= "
                    "(with_gradients=False); its optimizer's state is read from its closure"
                )
            loss.backward()
            opt.step()
            grads = [t.grad if t.grad is not None else t.detach() * 0 for t in targets]
        return (*outs, *grads)

    was, _EXPORTING[0] = _EXPORTING[0], True
    try:  # leaves opt.state as it was; draws in the graph (Note [host draws]: an ONNX model
        c = trace(body, args, {}, rng="counter")  # runs no host code)
    finally:
        _EXPORTING[0] = was
    if c.escaped:
        raise ExportError(
            "the traced step created tensors it keeps (an optimizer creating its "
            "state on its first step): take one optimizer step before exporting"
        )
    return _signature(c, args, arg_names, names, wrt)


def _signature(c, args, arg_names, names, wrt):
    """The export graph of a capture: its inputs named and ordered, unread parameters
    added, unnamed state turned into constants, outputs selected and named."""
    src = c.graph
    g = Graph(consts=list(src.consts), ops=src.ops, _next=src._next)
    arg_inputs = [i for i in src.inputs if i.kind == "arg"]
    in_names = []
    for (leaf, _), inp in zip(c.arg_wrappers, arg_inputs):  # leaves of ((*args,), {})
        g.inputs.append(inp)
        in_names.append(arg_names[leaf])
    by_tensor = {id(w.tensor): w for w in c.state}
    updated = {id(w.tensor): i for w, i in c.state_updates}
    fed = []
    for tid, (name, t, is_param) in names.items():
        w = by_tensor.get(tid)
        if w is None:
            if is_param:  # a parameter the step does not read is still an input
                fed.append((name, Input(g.new_value(_aval(t)), "state", name), None))
            continue
        if is_param or tid in updated:
            fed.append((name, Input(w.value, "state", name), updated.get(tid)))
    for w in c.state:
        if id(w.tensor) not in names or not (names[id(w.tensor)][2] or id(w.tensor) in updated):
            if id(w.tensor) in updated:
                raise ExportError(
                    f"the step writes a tensor that is neither a parameter, a "
                    f"buffer nor optimizer state ({w.name}, {w.aval})"
                )
            g.consts.append((w.value, np.asarray(w.tensor.detach().numpy())))
    for name, inp, _ in fed:
        g.inputs.append(inp)
        in_names.append(name)
    if any(kind == "item" for kind, _ in c.out_leaves):  # Note [traced items]
        raise ExportError(
            "the step returns a number read by .item(), and an ONNX model returns only "
            "tensors: return the tensor itself (loss, not loss.item())"
        )
    n_grads = len(wrt)
    value_outs = [o for kind, o in c.out_leaves if kind == "value"]
    n_outs = len(value_outs) - n_grads
    out_names = (
        ["loss"]
        if n_outs == 1 and src.outputs[value_outs[0]].value.aval.shape == ()
        else ["output" if n_outs == 1 else f"output{i}" for i in range(n_outs)]
    )
    for i, idx in enumerate(value_outs):
        g.outputs.append(src.outputs[idx])
        if i >= n_outs:
            out_names.append(f"grad.{wrt[i - n_outs][0]}")
    meta = {"gradients": {f"grad.{n}": n for n, _ in wrt}, "updates": {}}
    for name, _, idx in fed:
        if idx is not None:
            g.outputs.append(src.outputs[idx])
            out_names.append(f"updated.{name}")
            meta["updates"][f"updated.{name}"] = name
    return g, in_names, out_names, meta


def _aval(t):
    return Aval(tuple(t.shape), t.dtype)


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"a {x.dtype.name} tensor of shape {tuple(x.shape)}"
    return repr(x) if x is None else type(x).__name__


# --- dynamic dims -----------------------------------------------------------------------
def _dynamic(base, fn, args, arg_names, names, wrt, opt, dynamic_axes):
    """Re-trace with each dynamic dim changed and make what follows it symbolic
    (``staged.tracing.dynamic``). A dim of example size 1 is generalized from size 2 (code
    may skip work at 1, an expand to ``(1, C)``), and every dim is checked at size 1, where
    the model cannot branch as the code may: a warning says where it differs (Note [batch
    size 1] in ``staged/runtime/compiled.py``)."""
    axes = _normalize_axes(dynamic_axes, arg_names, args)
    sources, dims = {}, {}
    for (arg, axis), dim in axes.items():
        sources.setdefault(dim, (arg_names[arg], axis))
        dims.setdefault(dim, []).append((arg, axis))
    example = {}
    for dim, where in dims.items():
        sizes = {args[a].shape[ax] for a, ax in where}
        if len(sizes) != 1:
            raise ExportError(
                f"dynamic dim {dim!r} has different sizes in the example arguments: {sorted(sizes)}"
            )
        example[dim] = 2 if 1 in sizes else sizes.pop()

    def trace_at(sizes):
        grown = tuple(
            resize(
                x, {ax: sizes[d] for d, wh in dims.items() if d in sizes for a, ax in wh if a == i}
            )
            for i, x in enumerate(args)
        )
        return _trace(fn, grown, arg_names, names, wrt, opt)

    g0, in_names, out_names, meta = base if example == _sizes(args, dims) else trace_at(example)
    subst, consts = {}, {}
    for dim in dims:
        try:
            generalize(
                g0,
                example[dim],
                lambda n, d=dim: trace_at({**example, d: n})[0],
                dim,
                subst,
                consts,
            )
        except DynamicError as err:
            raise ExportError(f"dynamic dim {dim!r}: {err}; export it with static shapes") from None
    general = substitute(g0, subst, consts)
    for dim in dims:
        at_one = {**example, dim: 1}
        try:
            why = mismatch(general, trace_at(at_one)[0], at_one)
        except Exception as err:  # noqa: BLE001 (what the code raises at 1 is the report)
            why = f"the code raises {type(err).__name__} there: {err}"
        if why is not None:
            warnings.warn(
                f"staged.onnx.export: the code traced at {dim} = 1 is not the exported "
                f"graph at that size ({why}), so the model's results there may not be the "
                f"code's: feed it a {dim} of 2 or more, or export a model for size 1 without "
                f"{dim!r} in dynamic_axes",
                stacklevel=3,
            )
    return (general, in_names, out_names, meta), sources


def _sizes(args, dims) -> dict:
    return {d: args[where[0][0]].shape[where[0][1]] for d, where in dims.items()}


def _normalize_axes(dynamic_axes, arg_names, args) -> dict:
    out = {}
    for name, spec in dynamic_axes.items():
        if name not in arg_names:
            raise ExportError(
                f"dynamic_axes names {name!r}, which is not an input; inputs are {arg_names}"
            )
        i = arg_names.index(name)
        spec = (
            spec
            if isinstance(spec, dict)
            else {ax: "batch" if ax == 0 else f"{name}_dim{ax}" for ax in spec}
        )
        for ax, dim in spec.items():
            if not isinstance(args[i], Tensor) or not -args[i].ndim <= ax < args[i].ndim:
                raise ExportError(f"dynamic_axes: {name!r} has no axis {ax}")
            out[(i, ax % args[i].ndim)] = dim
    return out


# --- writing ----------------------------------------------------------------------------
def _write(g, path, opset, in_names, out_names, meta, doc, sources):
    import onnx

    path = os.fspath(path)
    big = sum(a.nbytes for _, a in g.consts) > EXTERNAL_ABOVE
    location = os.path.basename(path) + ".data" if big else None
    docs = {
        n: f"gradient of {out_names[0]} with respect to {p}" for n, p in meta["gradients"].items()
    }
    docs.update({n: f"the new value of {p} after the step" for n, p in meta["updates"].items()})
    built = to_onnx(
        g,
        opset=opset,
        input_names=in_names,
        output_names=out_names,
        sources=sources,
        batch_consts=g.sym_consts,
        external=location,
        doc=doc,
        output_docs=docs,
    )
    model, blobs = built if big else (built, [])
    model.producer_name, model.producer_version = "staged", __version__
    model.doc_string = doc
    onnx.helper.set_model_props(
        model,
        {
            "staged.gradients": json.dumps(meta["gradients"]),
            "staged.updates": json.dumps(meta["updates"]),
        },
    )
    if big:
        with open(os.path.join(os.path.dirname(path) or ".", location), "wb") as f:
            for offset, a in blobs:
                f.seek(offset)
                f.write(np.ascontiguousarray(a).data)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return model


_custom_symbolics: dict[tuple[str, int], Any] = {}  # kept for libraries; see below


def register_custom_op_symbolic(symbolic_name: str, symbolic_fn, opset_version: int) -> None:
    """Record a TorchScript-export symbolic function for custom operator ``symbolic_name``
    (torchvision registers its operators' at import). staged's exporter does not call
    them: a graph holding a custom operator is refused by ``export``, naming it."""
    if symbolic_name.count("::") != 1:
        raise ValueError(
            f"Failed to register operator {symbolic_name}. The symbolic name must match the "
            "format domain::name, and should start with a letter and contain only "
            "alphanumerical characters"
        )
    _custom_symbolics[(symbolic_name, opset_version)] = symbolic_fn


def unregister_custom_op_symbolic(symbolic_name: str, opset_version: int) -> None:
    _custom_symbolics.pop((symbolic_name, opset_version), None)
