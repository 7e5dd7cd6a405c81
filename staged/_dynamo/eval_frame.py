"""``torch._dynamo.eval_frame``: ``OptimizedModule``, the class of ``torch.compile(model)``
(accelerate and transformers' Trainer check ``isinstance(model, OptimizedModule)`` to
unwrap a compiled model)."""

from ..nn.optimized import OptimizedModule  # noqa: F401
