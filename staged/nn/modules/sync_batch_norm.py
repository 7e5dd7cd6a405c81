"""SyncBatchNorm: batch normalisation whose training statistics are those of the global
batch, every rank's rows (``staged.distributed``, over MPI)."""

from __future__ import annotations

import math

from ... import dtypes as dt
from ...distributed import distributed_c10d as c10d
from ...distributed.nn import functional as dfn
from ...eager.factories import tensor
from ...eager.grad_mode import no_grad
from ...eager.interceptor import current_interceptor
from .normalization import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    """``torch.nn.SyncBatchNorm``: in training, on more than one rank, each channel is
    normalised by the mean and variance of the whole global batch (two all-reduces
    forward, two backward: the gradient is that of the sum of every rank's loss, as
    torch's), and the running statistics are updated from them alike on every rank; in
    eval, on one rank or before ``init_process_group``, it is ``BatchNorm``. Inputs are
    ``(N, C, *)``; ranks may hold different batch sizes. staged has one process group,
    the world: ``process_group`` is kept for torch's signature."""

    def __init__(
        self,
        num_features,
        eps=1e-5,
        momentum=0.1,
        affine=True,
        track_running_stats=True,
        process_group=None,
        device=None,
        dtype=None,
        *,
        bias=True,
    ):
        super().__init__(
            num_features,
            eps,
            momentum,
            affine,
            track_running_stats,
            device=device,
            dtype=dtype,
            bias=bias,
        )
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")

    def forward(self, input):
        if not (self.training and c10d.is_initialized() and c10d.get_world_size() > 1):
            return super().forward(input)
        self._check_input_dim(input)
        factor = self._update_factor()
        x = input.float() if input.dtype in (dt.float16, dt.bfloat16) else input
        dims = (0, *range(2, x.ndim))
        per_channel = (1, -1) + (1,) * (x.ndim - 2)
        count = dfn.all_reduce(tensor(math.prod(x.shape) // x.shape[1]))
        if current_interceptor() is None and int(count) <= 1:  # under capture: not read
            raise ValueError(
                f"Expected more than 1 value per channel when training, got input size {int(count)}"
            )
        n = count.to(x.dtype)
        mean = dfn.all_reduce(x.sum(dims)) / n
        centred = x - mean.reshape(per_channel)
        squares = dfn.all_reduce((centred * centred).sum(dims))
        y = centred * (squares / n + self.eps).rsqrt().reshape(per_channel)
        if self.weight is not None:
            y = y * self.weight.reshape(per_channel)
        if self.bias is not None:
            y = y + self.bias.reshape(per_channel)
        if self.track_running_stats:
            with no_grad():
                rm, rv = self.running_mean, self.running_var
                rm.copy_(rm * (1 - factor) + mean.to(rm.dtype) * factor)
                rv.copy_(rv * (1 - factor) + (squares / (n - 1)).to(rv.dtype) * factor)
        return y.to(input.dtype)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with each ``BatchNorm*d`` in it replaced by a SyncBatchNorm holding
        the same parameters and buffers (a new module where ``module`` is one)."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
                bias=module.bias is not None,
            )
            if module.affine:
                with no_grad():
                    out.weight, out.bias = module.weight, module.bias
            out.running_mean, out.running_var = module.running_mean, module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
            if hasattr(module, "qconfig"):
                out.qconfig = module.qconfig
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        del module
        return out
