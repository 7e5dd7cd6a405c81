"""``staged.distributed``: ``torch.distributed``'s process group and collectives, over MPI.

Start the ranks with ``python -m staged.distributed.run --nproc-per-node N script.py``
(torchrun's flags, on ``mpiexec``) or ``mpiexec -n N python script.py``; each calls
``init_process_group()``. Needs ``pip install staged[distributed]`` (mpich, mpi4py).

Example:
    >>> dist.init_process_group("gloo")
    >>> t = staged.ones(3) * dist.get_rank()
    >>> dist.all_reduce(t)          # in place: the sum over the ranks
"""

from . import algorithms, nn  # noqa: F401
from .distributed_c10d import (
    BACKENDS,
    Backend,
    GroupMember,
    ProcessGroup,
    ReduceOp,
    Work,
    all_gather,  # noqa: F401
    all_gather_object,
    all_gather_into_tensor,
    all_reduce,
    barrier,
    broadcast,
    broadcast_object_list,
    default_pg_timeout,
    destroy_process_group,
    gather_object,
    get_backend,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    reduce_scatter_tensor,
    scatter_object_list,
)
