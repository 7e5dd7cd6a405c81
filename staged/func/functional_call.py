"""``functional_call``: run a module with other tensors in place of its parameters and
buffers (torch.func.functional_call), the way per-example gradients and ensembles make a
module a function of its weights."""

from __future__ import annotations

from ..eager.interceptor import current_interceptor


def functional_call(
    module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False
):
    """``module(*args, **kwargs)`` with the tensors of ``parameter_and_buffer_dicts`` (a
    dict, or a tuple of dicts, of full names such as ``"0.weight"``) standing in for the
    module's own; they are put back afterwards. With ``tie_weights`` a tensor the module
    holds under several names takes the value given for any of them; ``strict`` requires
    a value for each and no other keys.

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
    tied = {id(v): values[full] for _, _, full, v in slots if full in values} if tie_weights else {}
    if strict:
        names = {full for _, _, full, _ in slots}
        errors = (
            [f"\tUnexpected key(s): {', '.join(repr(k) for k in values if k not in names)}."]
            if set(values) - names
            else []
        )
        missing = [full for _, _, full, v in slots if full not in values and id(v) not in tied]
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
