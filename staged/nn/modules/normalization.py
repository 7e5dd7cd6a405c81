"""BatchNorm1d/2d/3d (and their lazy forms), LayerNorm, GroupNorm, RMSNorm,
LocalResponseNorm, CrossMapLRN2d: PyTorch's buffers, defaults and checks."""

from __future__ import annotations

from ... import dtypes as dt
from ...eager.factories import empty, ones, tensor, zeros
from ...eager.grad_mode import no_grad
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter


class _NormBase(Module):
    """Batch and instance norm's parameters, running statistics and their loading, as
    torch's ``_NormBase`` (``_BatchNorm`` and ``_InstanceNorm`` derive from it, one not
    from the other: ``isinstance(m, _BatchNorm)`` picks batch norms only)."""

    _version = 2  # torch's: num_batches_tracked came in version 2

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.bias_enabled = affine and bias
        self.register_parameter(
            "weight", Parameter(empty(num_features, device=device, dtype=dtype)) if affine else None
        )
        self.register_parameter(
            "bias",
            Parameter(empty(num_features, device=device, dtype=dtype))
            if self.bias_enabled
            else None,
        )
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def __setstate__(self, state):  # torch's pickles have no bias_enabled (Note [safe globals])
        super().__setstate__(state)
        self.__dict__.setdefault("bias_enabled", self._parameters.get("bias") is not None)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args) -> None:
        """A checkpoint older than version 2 (or without metadata) may lack
        ``num_batches_tracked``: the current count stays, as in torch."""
        version = local_metadata.get("version")
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            count = self.num_batches_tracked
            usable = count is not None and not count.is_meta
            state_dict[key] = count if usable else tensor(0, dtype=dt.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
        if self.bias_enabled:
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def _update_factor(self):
        """The running statistics' update factor for this call, counted in training."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a float64 0-d tensor: no .item(), so it compiles
                factor = 1.0 / self.num_batches_tracked.double()
        return factor

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias_enabled}, "
            f"track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    def forward(self, input):
        """Batch statistics in training mode (updating the running ones), the running
        statistics in eval mode; ``momentum=None`` averages cumulatively, by ``1 / count``
        (a float64 0-d tensor: the float32 arithmetic of torch's Python float)."""
        self._check_input_dim(input)
        factor = self._update_factor()
        use_batch_stats = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if track else None,
            self.running_var if track else None,
            self.weight,
            self.bias,
            use_batch_stats,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over ``(N, C)`` or ``(N, C, L)``."""

    def _check_input_dim(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over ``(N, C, H, W)``, per channel."""

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over ``(N, C, D, H, W)``, per channel."""

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"expected 5D input (got {input.ndim}D input)")


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """A batch (or instance) norm whose ``num_features`` is the first input's dim 1: its
    parameters and running statistics are materialized and initialised then."""

    def __init__(
        self,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine, self.track_running_stats = affine, track_running_stats
        self.bias_enabled = affine and bias
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=dt.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        shape = (self.num_features,)
        if self.affine:
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize(shape)
        if self.track_running_stats:
            self.running_mean.materialize(shape)
            self.running_var.materialize(shape)
        self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """``BatchNorm1d`` whose ``num_features`` is the first input's; it becomes one."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """``BatchNorm2d`` whose ``num_features`` is the first input's; it becomes one."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """``BatchNorm3d`` whose ``num_features`` is the first input's; it becomes one."""

    cls_to_become = BatchNorm3d


class LocalResponseNorm(Module):
    """``x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta``."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """torch's legacy cross-channel LRN of ``(N, C, H, W)``, with its forward window and its
    own backward formula (both kept as torch has them, quirks included)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        return F._CrossMapLRN2dFunction.apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims; affine weight 1, bias 0."""

    def __init__(
        self,
        normalized_shape,
        eps=1e-5,
        elementwise_affine=True,
        bias=True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.normalized_shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.bias_enabled = elementwise_affine and bias
        shape = self.normalized_shape
        self.register_parameter(
            "weight",
            Parameter(ones(*shape, device=device, dtype=dtype)) if elementwise_affine else None,
        )
        self.register_parameter(
            "bias",
            Parameter(zeros(*shape, device=device, dtype=dtype)) if self.bias_enabled else None,
        )

    def __setstate__(self, state):  # torch's pickles have no bias_enabled (Note [safe globals])
        super().__setstate__(state)
        self.__dict__.setdefault("bias_enabled", self._parameters.get("bias") is not None)

    def reset_parameters(self):
        """Weight 1 and bias 0 again (a model built empty, or re-initialised)."""
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias_enabled}"
        )


class GroupNorm(Module):
    """Normalise ``(N, C, *)`` over groups of ``C / num_groups`` channels; per-channel
    affine weight 1, bias 0."""

    def __init__(
        self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True
    ):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups,
            num_channels,
            eps,
            affine,
        )
        self.register_parameter(
            "weight",
            Parameter(empty(num_channels, device=device, dtype=dtype)) if affine else None,
        )
        self.register_parameter(
            "bias",
            Parameter(empty(num_channels, device=device, dtype=dtype)) if affine and bias else None,
        )
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dims, weight 1;
    ``eps=None`` is the input dtype's machine epsilon."""

    def __init__(
        self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None
    ):
        super().__init__()
        self.normalized_shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.register_parameter(
            "weight",
            Parameter(empty(*self.normalized_shape, device=device, dtype=dtype))
            if elementwise_affine
            else None,
        )
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
