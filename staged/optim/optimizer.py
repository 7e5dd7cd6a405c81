"""Optimizer base: param groups, per-parameter state, zero_grad, state_dict.

Updates run under ``no_grad`` with in-place tensor ops, so the same ``step()`` works
eagerly and under ``staged.compile`` (where it is functionalized into the graph).

Note [hyper-parameters]: ``_update`` reads a group's hyper-parameters through a
``Hyper`` view. ``h.number(name)`` is the Python number eagerly; under capture it is a
0-d tensor of the parameters' dtype that is a live input of the graph (Note [live
inputs] in ``staged/tracing/capture.py``), so changing ``param_groups[i]["lr"]`` by hand
or by a scheduler takes effect at the next compiled call without a re-trace. Numbers
torch computes in Python from several hyper-parameters (``1 - beta1``, ``1 - lr * wd``)
are live inputs of their own, so they round as eagerly. ``h.flag(name)`` is a branch of
the update (``if weight_decay:``, ``nesterov``): a compiled step re-traces when it flips.
"""
from __future__ import annotations

import copy

from ..eager.interceptor import current_interceptor
from ..eager.factories import tensor
from ..eager.ops._operands import scalar_tensor
from ..eager.grad_mode import enable_grad, no_grad
from ..eager.tensor import Tensor


class Optimizer:
    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}
        self._live: dict = {}  # (group index, name, dtype) -> its live input (Note [hyper-...])
        self.param_groups: list = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group: dict) -> None:
        group = dict(group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        icpt = current_interceptor()  # under capture: it restores what the step writes
        if icpt is not None:
            icpt.preserve(self.state)
        with no_grad():
            for i, group in enumerate(self.param_groups):
                views = {}
                for p in group["params"]:
                    if p.grad is not None:
                        dtype = p.dtype.to_real()
                        h = views.get(dtype) or views.setdefault(
                            dtype, Hyper(self, i, dtype, icpt))
                        state = self.state.setdefault(p, {})
                        if icpt is not None:
                            icpt.preserve(state)
                        self._update(p, p.grad, state, h)
        return loss

    def _update(self, p, grad, state, h: "Hyper"):
        raise NotImplementedError

    def state_dict(self) -> dict:
        """``{"state": {index: {name: value}}, "param_groups": [{..., "params": [index]}]}``
        as in PyTorch: parameters are numbered across groups in order; state tensors are
        the optimizer's own (not copies)."""
        index, groups = {}, []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": [index[id(p)] for p in g["params"]]})
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Load what ``state_dict()`` (here or in PyTorch) returned; tensors may be NumPy
        arrays. Values are copied into existing state tensors of the same shape, so a
        compiled step that holds them stays valid."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(own["params"])
               for g, own in zip(groups, self.param_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        params = {i: p for g, own in zip(groups, self.param_groups)
                  for i, p in zip(g["params"], own["params"])}
        for i, saved in state_dict["state"].items():
            p = params[int(i)]
            own = self.state.setdefault(p, {})
            for k, v in saved.items():
                own[k] = _load_value(own.get(k), v, None if k == "step" else p.dtype)
        for g, own in zip(groups, self.param_groups):
            own.update({k: copy.deepcopy(v) for k, v in g.items() if k != "params"})

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params")
        return "\n".join(lines) + "\n)"


class Hyper:
    """Param group ``index``'s hyper-parameters as the update of its ``dtype`` parameters
    reads them (Note [hyper-parameters])."""

    __slots__ = ("opt", "index", "group", "dtype", "icpt")

    def __init__(self, opt: Optimizer, index: int, dtype, icpt):
        self.opt, self.index, self.dtype, self.icpt = opt, index, dtype, icpt
        self.group = opt.param_groups[index]

    def number(self, name: str, get=None):
        """``get(group)`` (default: ``group[name]``): a Python number eagerly; under
        capture a 0-d tensor the compiled step reads anew at every call."""
        get = get or (lambda g: g[name])
        if self.icpt is None:
            return get(self.group)
        opt, i = self.opt, self.index
        key = (i, name, self.dtype)
        t = opt._live.get(key)
        if t is None:
            t = opt._live[key] = scalar_tensor(get(self.group), self.dtype)
        self.icpt.live(t, lambda: get(opt.param_groups[i]),
                       f"{type(opt).__name__}.param_groups[{i}].{name}")
        return t

    def flag(self, name: str) -> bool:
        """``bool(group[name])``, a branch of the update: under capture the trace is reused
        only while it stays the same."""
        if self.icpt is not None:
            opt, i = self.opt, self.index
            self.icpt.guard(lambda: opt.param_groups[i][name],
                            f"{type(opt).__name__}.param_groups[{i}]['{name}']",
                            key=(id(opt), i, name), same=lambda a, b: bool(a) == bool(b))
        return bool(self.group[name])


def _load_value(current, value, dtype):
    """``value`` as a tensor (cast to ``dtype`` unless None), copied into ``current`` when
    that is a tensor of the same shape."""
    if not isinstance(value, Tensor) and not hasattr(value, "shape"):
        return value  # a Python number
    value = value.detach() if isinstance(value, Tensor) else tensor(value)
    if isinstance(current, Tensor):
        dtype = current.dtype
    value = value.to(dtype) if dtype is not None else value
    if isinstance(current, Tensor) and tuple(current.shape) == tuple(value.shape):
        with no_grad():
            current.copy_(value)
        return current
    return value.clone()
