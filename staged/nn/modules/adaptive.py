"""AdaptiveLogSoftmaxWithLoss (torch's ``torch.nn.modules.adaptive``): Grave et al.'s
adaptive softmax, a head over the frequent classes plus one cluster token per tail."""

from __future__ import annotations

from collections import namedtuple

from ...eager import ops
from ...eager.checks import check_range
from .. import functional as F
from ..module import Module
from .container import ModuleList, Sequential
from .linear import Linear

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Log-probabilities of class targets through a head (``cutoffs[0]`` frequent classes
    and one entry per cluster) and per-cluster tails of projections shrunk by
    ``div_value``. Each tail is computed for every row and its log-probabilities are picked
    where a row's target falls in it (torch computes them on those rows only: the same
    values and gradients, without data-dependent shapes, so the module compiles)."""

    def __init__(
        self,
        in_features,
        n_classes,
        cutoffs,
        div_value=4.0,
        head_bias=False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        kw = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **kw)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hsz, bias=False, **kw), Linear(hsz, osz, bias=False, **kw)
                )
            )

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        """``(output, loss)``: each row's log-probability of its target, and their negated
        mean."""
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError(
                    "Input and target should have the same size in the batch dimension."
                )
            if input_.ndim != 2:
                raise RuntimeError(
                    "1D target tensor expects 2D input tensors, but found inputs with size "
                    f"{input_.size()}"
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(
                    "0D target tensor expects 1D input tensors, but found inputs with size "
                    f"{input_.size()}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        if F._has_data(target) and target.numel():
            lo, hi = int(target.min()), int(target.max())
            if lo < 0 or hi >= self.n_classes:
                raise RuntimeError(
                    f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                    f"[{lo}, {hi}] were found. "
                )
        check_range(target, 0, self.n_classes, RuntimeError, "Target value {} is out of range")
        output = None
        gather_inds = target
        for i in range(1, self.n_clusters + 1):
            low, high = self.cutoffs[i - 1], self.cutoffs[i]
            in_cluster = (target >= low) & (target < high)
            cluster_logprob = F.log_softmax(self.tail[i - 1](input), dim=1)
            relative = ops.where(in_cluster, target - low, 0).unsqueeze(1)
            local = ops.where(in_cluster, cluster_logprob.gather(1, relative).squeeze(1), 0.0)
            output = local if output is None else output + local
            gather_inds = ops.where(in_cluster, self.shortlist_size + i - 1, gather_inds)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ops.cat(parts, 1)

    def log_prob(self, input):
        """The log-probabilities of all ``n_classes`` classes, ``(N, n_classes)``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each row (the head's where it names a frequent class,
        else the full distribution's)."""
        head_output = self.head(input)
        output = head_output.argmax(1)
        full = self._get_full_log_prob(input, head_output).argmax(1)
        return ops.where(output >= self.shortlist_size, full, output)
