"""What torch's DDP communication hooks are here: names that raise when used, saying why.
staged's ``DistributedDataParallel`` averages each gradient bucket over MPI and takes no
``register_comm_hook``; libraries import the hooks to map a user's choice (accelerate
builds its table of them on every ``prepare``)."""

from __future__ import annotations

MESSAGE = (
    "staged's DistributedDataParallel has no communication hooks (register_comm_hook): it "
    "averages every gradient bucket over MPI each step, uncompressed"
)


def refused(name: str):
    """A stand-in for torch's hook or state ``name`` that raises NotImplementedError."""

    def hook(*args, **kwargs):
        raise NotImplementedError(f"{name}: {MESSAGE}")

    hook.__name__ = hook.__qualname__ = name
    return hook
