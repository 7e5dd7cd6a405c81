"""``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``: its hooks, which raise
when used (``_refused``)."""

from ._refused import refused

allreduce_hook = refused("allreduce_hook")
fp16_compress_hook = refused("fp16_compress_hook")
bf16_compress_hook = refused("bf16_compress_hook")
fp16_compress_wrapper = refused("fp16_compress_wrapper")
bf16_compress_wrapper = refused("bf16_compress_wrapper")
