"""``torch.func.replace_all_batch_norm_modules_``: batch norm without running statistics,
so that ``vmap`` over a model's copies does not write one buffer from every copy."""

from __future__ import annotations


def _without_running_stats(module) -> None:
    # a _BatchNorm by its class's name: staged.nn imports staged.func (functional_call),
    # so func does not import nn (BatchNorm1d-3d, SyncBatchNorm; not InstanceNorm)
    batch_norm = any(c.__name__ == "_BatchNorm" for c in type(module).__mro__)
    if batch_norm and module.track_running_stats:
        module.running_mean = None
        module.running_var = None
        module.num_batches_tracked = None
        module.track_running_stats = False


def replace_all_batch_norm_modules_(root):
    """Every BatchNorm in ``root`` (``root`` too) normalises by its batch's statistics and
    keeps none (``running_mean``/``running_var`` None); returns ``root``, as torch's."""
    for module in root.modules():  # root first
        _without_running_stats(module)
    return root
