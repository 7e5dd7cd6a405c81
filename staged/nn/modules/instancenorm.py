"""InstanceNorm1d/2d/3d (torch's ``torch.nn.modules.instancenorm``): batch norm's
parameters and buffers, with torch's defaults (no affine, no running statistics); their
lazy forms (affine and running statistics by default, as torch's)."""

from __future__ import annotations

import warnings

from .. import functional as F
from .normalization import _LazyNormBase, _NormBase


class _InstanceNorm(_NormBase):
    _n = 0

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=False,
        track_running_stats=False,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
    ) -> None:
        """A checkpoint without metadata (before torch 0.4.0) holding running statistics
        for a module that keeps none is refused with torch's message, not loaded."""
        names = [prefix + n for n in ("running_mean", "running_var") if prefix + n in state_dict]
        if local_metadata.get("version") is None and not self.track_running_stats and names:
            klass = type(self).__name__
            errors.append(
                "Unexpected running stats buffer(s) {} for {k} with track_running_stats=False. "
                "If state_dict is a checkpoint saved before 0.4.0, this may be expected because "
                "{k} does not track running stats by default since 0.4.0. Please remove these "
                "keys from state_dict. If the running stats are actually needed, instead set "
                "track_running_stats=True in {k} to enable them. See the documentation of {k} "
                "for details.".format(" and ".join(f'"{n}"' for n in names), k=klass)
            )
            for name in names:
                state_dict.pop(name)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
        )

    def forward(self, input):
        """Each instance's own statistics in training or without running ones; the running
        ones (updated by training) in eval mode. An unbatched input is one instance."""
        if input.ndim not in (self._n + 1, self._n + 2):
            raise ValueError(
                f"expected {self._n + 1}D or {self._n + 2}D input (got {input.ndim}D input)"
            )
        feature_dim = input.ndim - self._n - 1
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can "
                "silence this warning by not passing in num_features, which is not used "
                "because affine=False",
                stacklevel=2,
            )
        unbatched = input.ndim == self._n + 1
        y = F.instance_norm(
            input.unsqueeze(0) if unbatched else input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            0.0 if self.momentum is None else self.momentum,
            self.eps,
        )
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation over ``(N, C, L)`` or ``(C, L)``."""

    _n = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation over ``(N, C, H, W)`` or ``(C, H, W)``, as used in style
    transfer."""

    _n = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation over ``(N, C, D, H, W)`` or ``(C, D, H, W)``."""

    _n = 3


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    """``InstanceNorm1d`` whose ``num_features`` is the first input's dim 1 (as torch's,
    also for an unbatched input); it becomes one."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    """``InstanceNorm2d`` whose ``num_features`` is the first input's dim 1."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    """``InstanceNorm3d`` whose ``num_features`` is the first input's dim 1."""

    cls_to_become = InstanceNorm3d
