"""``kl_divergence(p, q)`` for two distributions of one family (torch's formulas)."""

from __future__ import annotations

from collections.abc import Callable

from ..eager.tensor import Tensor
from ..eager.ops.composite import softplus
from .bernoulli import Bernoulli
from .categorical import Categorical
from .normal import Normal


def _normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


def _categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill(q.probs == 0, float("inf"))
    t = t.masked_fill(p.probs == 0, 0)
    return t.sum(-1)


def _bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = t1.masked_fill(q.probs == 0, float("inf")).masked_fill(p.probs == 0, 0)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = t2.masked_fill(q.probs == 1, float("inf")).masked_fill(p.probs == 1, 0)
    return t1 + t2


_RULES: dict[tuple, Callable[..., Tensor]] = {
    (Normal, Normal): _normal,
    (Categorical, Categorical): _categorical,
    (Bernoulli, Bernoulli): _bernoulli,
}


def kl_divergence(p, q) -> Tensor:
    """KL(p || q); a pair of families without a formula raises NotImplementedError."""
    rule = _RULES.get((type(p), type(q)))
    if rule is None:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p = {type(p).__name__}, q = {type(q).__name__} "
            "(staged has Normal, Categorical and Bernoulli pairs)"
        )
    return rule(p, q)
