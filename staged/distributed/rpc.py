"""``torch.distributed.rpc`` as a torch built without its RPC framework has it: only
``is_available()``, False. staged scales out over MPI (``staged.distributed``); it has no
remote procedure calls."""


def is_available() -> bool:
    """False: staged has no RPC framework (torch builds without one say the same)."""
    return False
