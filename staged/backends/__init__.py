"""``staged.backends``: torch.backends' switches that scripts set (``cudnn.benchmark``,
``cuda.matmul.allow_tf32``) and query (``mps.is_available()``); they change nothing in a
build whose eager tensors live in host memory (Note [devices] in staged/eager/devices.py)."""

from . import cpu, cuda, cudnn, mkldnn, mps, openmp  # noqa: F401
