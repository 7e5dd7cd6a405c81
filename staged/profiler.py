"""``staged.profiler``, as ``torch.profiler``: ``profile``, ``record_function`` and the
event lists, from ``staged.autograd.profiler``. A profiled compiled call shows its phases
(argument transfer, enqueue, device execution, result transfer): Note [compiled calls] in
``staged/runtime/profiled.py``, docs/profiling.md.

Example:
    >>> with staged.profiler.profile() as prof:
    ...     loss = step(x, y)
    >>> print(prof.key_averages().table(sort_by="cpu_time_total"))
"""

from .autograd.profiler import EventList, FunctionEvent, FunctionEventAvg, profile, record_function

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "profile", "record_function"]
