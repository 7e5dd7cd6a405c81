"""``torch.distributed.algorithms.join``: training on uneven inputs.

Note [join]: a rank that runs out of inputs leaves the ``with Join(...)`` block and, in
``__exit__``, *shadows* the collectives the others still make, so that none waits for it:
each iteration every rank all-reduces how many ranks have not joined (1 from a rank in
its step, from ``notify_join_context``, 0 from a joined one), then the joined ranks run
each joinable's ``JoinHook.main_hook`` (DDP's makes the all-reduces of a step with zero
gradients). When the count is 0 every rank has joined and each runs its ``post_hook``
(DDP's broadcasts the model of the last rank to join). With ``throw_on_early_termination``
a second all-reduce tells the ranks still stepping that one has run out, and every rank
raises. The collectives are the process group's own, on its MPI communicator, and the ones
that each rank makes alike are checked as any (Note [two communicators] in ``mpi.py``).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from typing import Any, NamedTuple

from ...eager.factories import ones, zeros
from .. import distributed_c10d as c10d

SKEW_WARNING = 1000  # iterations a joined rank shadows before it warns (torch's)


class JoinHook:
    """What a ``Joinable`` does once its rank has joined: ``main_hook()`` once per step the
    others still make (shadowing its collectives), ``post_hook(is_last_joiner)`` once every
    rank has joined."""

    def main_hook(self) -> None:
        """Shadow one training step's collectives of this joinable."""

    def post_hook(self, is_last_joiner: bool) -> None:
        """Run after every rank has joined; ``is_last_joiner``: this rank was among the last."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config() -> _JoinConfig:
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(ABC):
    """A class that takes part in ``Join``: it gives a ``join_hook``, its ``join_device`` and
    ``join_process_group``, and calls ``Join.notify_join_context(self)`` before the
    collectives of each step."""

    @abstractmethod
    def __init__(self) -> None:
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abstractmethod
    def join_hook(self, **kwargs) -> JoinHook:
        """This joinable's hook; ``kwargs``: those given to ``Join``, the same for all."""

    @property
    @abstractmethod
    def join_device(self) -> Any:
        """The device of the join's own collectives."""

    @property
    @abstractmethod
    def join_process_group(self) -> Any:
        """The process group of the join's own collectives."""


class Join:
    """Context manager for a training loop whose ranks may have different numbers of
    inputs: the ranks that finish shadow the others' collectives (Note [join]).

    Example:
        >>> with Join([model]):             # model: a DistributedDataParallel
        ...     for x, y in my_batches:     # as many as this rank has
        ...         loss_fn(model(x), y).backward()
    """

    def __init__(
        self,
        joinables: list[Joinable],
        enable: bool = True,
        throw_on_early_termination: bool = False,
        **kwargs,
    ):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = joinables
        self._join_hooks = [j.join_hook(**kwargs) for j in joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        for i, j in enumerate(joinables):
            j._join_config = _JoinConfig(enable, throw_on_early_termination, i == 0)
        groups = {id(j.join_process_group) for j in joinables}
        if len(groups) > 1:
            raise ValueError("Using join context manager with multiple process groups")
        self._process_group = joinables[0].join_process_group
        self._device = joinables[0].join_device
        self._rank = c10d.get_rank(self._process_group)

    def __enter__(self):
        pass

    def __exit__(self, type, value, traceback):
        """Shadow the others' steps until every rank has joined, then run the post-hooks."""
        if not self._enable or type:
            return  # an exception propagates as it is
        is_last_joiner = True
        i = 0
        while self._count(0):
            if i == SKEW_WARNING + 1:
                warnings.warn(
                    f"Detected uneven input skew of greater than {SKEW_WARNING}. This means "
                    f"that rank {self._rank} has at least {SKEW_WARNING} fewer inputs than "
                    "other currently-active ranks. This level of skew could lead to "
                    "performance degradation during training.",
                    stacklevel=2,
                )
            if self._throw_on_early_termination:
                self._count(1)  # tells the others to raise
                raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")
            for hook in self._join_hooks:
                hook.main_hook()
            is_last_joiner = False
            i += 1
        for hook in self._join_hooks:
            hook.post_hook(is_last_joiner)

    def _count(self, mine: int) -> int:
        """The sum over the ranks of ``mine`` (a float32 all-reduce, as torch's)."""
        t = (ones if mine else zeros)(1, device=self._device)
        c10d.all_reduce(t, group=self._process_group)
        return int(t.item())

    @staticmethod
    def notify_join_context(joinable: Joinable):
        """Tell the join that this rank has not joined (the first joinable of a ``Join``
        does; for the others this does nothing), before the step's own collectives. With
        ``throw_on_early_termination``, raise on every rank if one has run out of inputs.
        Returns the started all-reduce's ``Work`` (its ``result()``: the number of ranks
        not joined) for the first joinable, else None."""
        if not hasattr(joinable, "_join_config"):
            raise AssertionError(
                f"Check that the {type(joinable)} constructor calls the ``Joinable`` constructor"
            )
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        device, group = joinable.join_device, joinable.join_process_group
        work = c10d.all_reduce(ones(1, device=device), group=group, async_op=True)
        if config.throw_on_early_termination:
            flag = zeros(1, device=device)
            c10d.all_reduce(flag, group=group)
            if flag.item():
                work.wait()
                raise RuntimeError(
                    "Detected at least one rank that exhausted inputs. Throwing across all ranks."
                )
        return work
