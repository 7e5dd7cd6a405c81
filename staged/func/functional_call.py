"""``functional_call``: run a module with other tensors in place of its parameters and
buffers (torch.func.functional_call), the way per-example gradients and ensembles make a
module a function of its weights."""

from __future__ import annotations

from ..eager.interceptor import current_interceptor
from ..eager.ops.shape import stack


def functional_call(
    module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False
):
    """``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (a
    dict, or a tuple of dicts, of full names such as ``"0.weight"``) standing in for the
    module's own; they are put back afterwards. With ``tie_weights`` a tensor the module
    holds under several names takes the value given for any of them (different values for
    two of them raise ``ValueError``); ``strict`` requires a value for each and no other
    keys.

    Example:
        >>> params = {k: v.detach() for k, v in model.named_parameters()}
        >>> out = functional_call(model, params, (x,))
    """
    dicts = parameter_and_buffer_dicts
    dicts = tuple(dicts) if isinstance(dicts, (tuple, list)) else (dicts,)
    values = {}
    repeated = []
    for d in dicts:
        for k, v in d.items():
            if k in values:
                repeated.append(k)
            values[k] = v
    if repeated:
        raise ValueError(
            f"{sorted(set(repeated))} appeared in multiple dictionaries; "
            "behavior of functional call is ambiguous"
        )
    slots = [
        (getattr(m, kind), name, f"{prefix}.{name}" if prefix else name, v)
        for prefix, m in module.named_modules(remove_duplicate=False)
        for kind in ("_parameters", "_buffers")
        for name, v in getattr(m, kind).items()
        if v is not None
    ]
    tied = {}
    if tie_weights:
        aliases: dict[int, list[str]] = {}  # a tensor's names
        for _, _, full, v in slots:
            aliases.setdefault(id(v), []).append(full)
        for _, _, full, v in slots:
            if len({id(values[k]) for k in aliases[id(v)] if k in values}) > 1:
                raise ValueError(
                    f"functional_call got multiple values for keys {sorted(aliases[id(v)])}, "
                    "which are tied. Consider using tie_weights=False"
                )
            if full in values:
                tied[id(v)] = values[full]
    if strict:
        names = {full for _, _, full, _ in slots}
        errors = (
            [f"\tUnexpected key(s): {', '.join(map(repr, sorted(set(values) - names)))}."]
            if set(values) - names
            else []
        )
        missing = sorted(
            {full for _, _, full, v in slots if full not in values and id(v) not in tied}
        )  # both lists sorted, as torch's
        if missing:
            errors.append(f"\tMissing key(s): {', '.join(repr(k) for k in missing)}.")
        if errors:
            raise RuntimeError(
                f"Error(s) in reparametrizing for {type(module).__name__}:\n" + "\n".join(errors)
            )
    icpt = current_interceptor()
    if icpt is not None:  # a compiled step's guards see the module's own tensors, which
        for m in module.modules():  # the swap below only lends: guarded before it
            m._guard(icpt)
    swapped = []
    try:
        for d, name, full, v in slots:
            new = values[full] if full in values else tied.get(id(v))
            if new is not None:
                swapped.append((d, name, v))
                d[name] = new
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for d, name, v in reversed(swapped):
            d[name] = v


def stack_module_state(models) -> tuple[dict, dict]:
    """``(params, buffers)``: each parameter and buffer of ``models`` (Modules of one class,
    all training or all in eval) stacked along a new first dim, by full name, for
    ``vmap`` over an ensemble (torch.func.stack_module_state). Stacked parameters are new
    leaves (requiring grad where every model's does), ready for an optimizer.

    Example:
        >>> params, buffers = stack_module_state([nn.Linear(3, 3) for _ in range(5)])
        >>> params["weight"].shape
        staged.Size([5, 3, 3])
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(named) -> dict:
        each = [dict(named(m)) for m in models]
        out = {}
        for k in each[0]:
            ts = [d[k] for d in each]
            grads = {t.requires_grad for t in ts}
            if len(grads) > 1:
                raise RuntimeError(f"Expected {k} from each model to have the same .requires_grad")
            out[k] = stack(ts).detach().requires_grad_() if True in grads else stack(ts)
        return out

    return stacked(lambda m: m.named_parameters()), stacked(lambda m: m.named_buffers())
