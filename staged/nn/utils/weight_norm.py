"""Weight normalisation, https://arxiv.org/abs/1602.07868: ``w = g * v / ||v||``. The
hook-based form of ``torch.nn.utils.weight_norm`` (parameters ``weight_g`` and ``weight_v``,
``weight`` recomputed before every forward), and ATen's ``norm_except_dim`` and
``_weight_norm`` that it and ``parametrizations.weight_norm`` compute with."""

from __future__ import annotations

import warnings

from ...eager import ops
from ..parameter import Parameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of ``v`` over every dim but ``dim``, that dim kept and the others
    of size 1; over all of ``v`` (0-d) for ``dim=-1``, as ATen's."""
    if dim == -1:
        return ops.norm(v, pow)
    if dim != 0:
        return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)
    n = v.shape[0]
    return ops.norm(v.reshape(n, -1), pow, 1).reshape((n,) + (1,) * (v.ndim - 1))


def _weight_norm(v, g, dim=0):
    """ATen's ``_weight_norm``: ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that sets ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    name: str
    dim: int

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name: str, dim: int | None) -> WeightNorm:
        warnings.warn(
            "`torch.nn.utils.weight_norm` is deprecated in favor of "
            "`torch.nn.utils.parametrizations.weight_norm`.",
            FutureWarning,
            stacklevel=3,
        )
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}"
                )
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replace the parameter ``name`` by ``name_g`` (its norm over all dims but ``dim``;
    over all for ``dim=None``) and ``name_v`` (its direction), recombined before every
    forward. Deprecated in torch for ``parametrizations.weight_norm``."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Make ``name`` a plain parameter again, holding the current normalised weight."""
    return remove_hook(module, WeightNorm, name, "weight_norm")


def remove_hook(module, kind, name, what):
    """Remove the ``kind`` forward pre-hook (``WeightNorm``, ``SpectralNorm``) that
    reparametrizes ``name``, making it a plain parameter again."""
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")
