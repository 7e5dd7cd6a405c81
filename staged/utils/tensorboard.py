"""``staged.utils.tensorboard``: torch's ``SummaryWriter``, writing TensorBoard's event files
by tensorboardX (the library torch's writer grew from), staged's tensors logged as the
NumPy arrays they hold. As torch's needs the ``tensorboard`` package, this needs
``tensorboardX`` (``pip install tensorboardX``, or ``pip install 'staged[tensorboard]'``)."""

from __future__ import annotations

import functools
import os
import time

import numpy as np

try:
    import tensorboardX
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData
    from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata
    from tensorboardX.proto.tensor_pb2 import TensorProto
    from tensorboardX.summary import hparams, scalar
except ImportError as err:
    raise ImportError(
        "staged.utils.tensorboard writes TensorBoard's event files with the tensorboardX "
        "package, which is not installed: pip install tensorboardX "
        "(or pip install 'staged[tensorboard]')"
    ) from err

from .. import dtypes as dt
from ..eager.tensor import Tensor

__all__ = ["SummaryWriter"]


def _numpy(x):
    """``x`` with its staged tensors (also in lists, tuples and dicts) as NumPy arrays,
    detached, as torch's writer takes ``x.detach().cpu().numpy()`` (bfloat16 as float32,
    which NumPy's histograms and images cannot read)."""
    if isinstance(x, Tensor):
        a = x.detach().numpy()
        return a.astype(np.float32) if x.dtype == dt.bfloat16 else a
    if type(x) in (list, tuple):
        return type(x)(map(_numpy, x))
    if type(x) is dict:
        return {k: _numpy(v) for k, v in x.items()}
    return x


def _taking_tensors(method):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return method(self, *map(_numpy, args), **{k: _numpy(v) for k, v in kwargs.items()})

    return call


def _item(v):
    """A one-element array (a logged tensor) as the Python number it holds."""
    return v.item() if isinstance(v, np.ndarray) and v.size == 1 else v


class SummaryWriter(tensorboardX.SummaryWriter):
    """torch's ``SummaryWriter(log_dir=None, comment='', purge_step=None, max_queue=10,
    flush_secs=120, filename_suffix='')``: every ``add_*`` method takes staged tensors
    where torch's takes torch's; ``add_graph`` (a TorchScript trace in torch) is refused."""

    def __init__(
        self,
        log_dir=None,
        comment="",
        purge_step=None,
        max_queue=10,
        flush_secs=120,
        filename_suffix="",
    ):
        super().__init__(
            log_dir,
            comment=comment,
            purge_step=purge_step,
            max_queue=max_queue,
            flush_secs=flush_secs,
            filename_suffix=filename_suffix,
        )

    def add_scalar(
        self,
        tag,
        scalar_value,
        global_step=None,
        walltime=None,
        new_style=False,
        double_precision=False,
    ):
        """torch's: a ``simple_value``, or with ``new_style`` a one-value tensor of the
        scalars plugin (float64 with ``double_precision``)."""
        scalar_value, global_step = _numpy(scalar_value), _numpy(global_step)
        if not new_style:
            return super().add_scalar(tag, scalar_value, global_step, walltime)
        value = np.asarray(scalar_value).squeeze()
        if value.ndim != 0:
            raise AssertionError(
                f"Tensor should contain one element (0 dimensions). Was given size: "
                f"{value.size} and {value.ndim} dimensions."
            )
        proto = (
            TensorProto(double_val=[float(value)], dtype="DT_DOUBLE")
            if double_precision
            else TensorProto(float_val=[float(value)], dtype="DT_FLOAT")
        )
        meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
        summary = Summary(value=[Summary.Value(tag=tag, tensor=proto, metadata=meta)])
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """torch's: each value in the run ``<main_tag>_<key>`` under this writer's directory
        (``/`` in ``main_tag`` as ``_``), tagged ``main_tag``, all at one wall time."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()  # (re)opening the writers
        for tag, value in tag_scalar_dict.items():
            path = f"{logdir}/{main_tag.replace('/', '_')}_{tag}"
            if path not in self.all_writers:
                self.all_writers[path] = tensorboardX.FileWriter(
                    path, self._max_queue, self._flush_secs, self._filename_suffix
                )
            summary = scalar(main_tag, _numpy(value))
            self.all_writers[path].add_summary(summary, _numpy(global_step), walltime)

    def add_hparams(
        self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None, global_step=None
    ):
        """torch's: the hyperparameters, their discrete domains and the metrics, in the
        run ``run_name`` (the time by default) under this writer's directory."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        hparam_dict = {k: _item(v) for k, v in _numpy(hparam_dict).items()}
        metric_dict = {k: _item(v) for k, v in _numpy(metric_dict).items()}
        domains = hparam_domain_discrete or {}
        if not isinstance(domains, dict):
            raise TypeError(
                "parameter: hparam_domain_discrete should be a dictionary, nothing logged."
            )
        for k, v in domains.items():
            if (
                k not in hparam_dict
                or not isinstance(v, list)
                or not all(isinstance(d, type(hparam_dict[k])) for d in v)
            ):
                raise TypeError(
                    f"parameter: hparam_domain_discrete[{k}] should be a list of same type "
                    f"as hparam_dict[{k}]."
                )
        exp, ssi, sei = hparams(hparam_dict, metric_dict)
        if domains:
            _add_domains(exp, domains)
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w:
            for summary in (exp, ssi, sei):
                w.file_writer.add_summary(summary, global_step)
            for k, v in metric_dict.items():
                w.add_scalar(k, v, global_step)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError(
            "SummaryWriter.add_graph draws a TorchScript trace, which staged does not make: "
            "staged.viz draws the captured graph of a step (README: 'Pictures of the graph')"
        )


def _add_domains(exp, domains) -> None:
    """Set each hyperparameter's discrete domain in ``exp``, the experiment summary."""
    meta = exp.value[0].metadata.plugin_data
    data = HParamsPluginData.FromString(meta.content)
    for info in data.experiment.hparam_infos:
        for d in domains.get(info.name, ()):
            value = info.domain_discrete.values.add()
            if isinstance(d, str):
                value.string_value = d
            elif isinstance(d, bool):
                value.bool_value = d
            else:
                value.number_value = d
    meta.content = data.SerializeToString()


for _name in dir(tensorboardX.SummaryWriter):
    if _name.startswith("add_") and _name not in vars(SummaryWriter):
        setattr(SummaryWriter, _name, _taking_tensors(getattr(tensorboardX.SummaryWriter, _name)))
del _name
