"""Run by test_distributed.py under mpiexec: rank 1 raises (``raise``) or leaves without a
word (``leave``) while the others wait in an all_reduce."""

import sys
from datetime import timedelta

import staged
import staged.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo", timeout=timedelta(seconds=2 if mode == "leave" else 60))
if dist.get_rank() == 1:
    if mode == "raise":
        raise ValueError("boom")
    sys.exit(0)
dist.all_reduce(staged.ones(3))
