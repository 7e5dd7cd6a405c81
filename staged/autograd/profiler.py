"""``staged.autograd.profiler``: the autograd profiler, as ``torch.autograd.profiler``."""
from ..eager.profiler import (EventList, FunctionEvent, FunctionEventAvg,  # noqa: F401
                              profile, record_function)
