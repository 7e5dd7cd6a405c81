"""``staged.utils.tensorboard.SummaryWriter``: staged's tensors logged as torch's writer
logs torch's, read back from the event files it writes."""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

import staged

tb = pytest.importorskip("staged.utils.tensorboard", reason="tensorboardX is not installed")
from tensorboardX.proto.event_pb2 import Event  # noqa: E402
from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData  # noqa: E402


def _events(logdir) -> list:
    """(step, Summary.Value) of every summary in ``logdir``'s event files (TFRecords:
    length, its CRC, the record, its CRC)."""
    out = []
    for path in sorted(logdir.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i : i + 8])
            event = Event.FromString(data[i + 12 : i + 12 + n])
            out += [(event.step, v) for v in event.summary.value]
            i += 12 + n + 4
    return out


def _by_tag(logdir) -> dict:
    return {v.tag: (step, v) for step, v in _events(logdir)}


def test_scalars_of_tensors_requiring_grad_and_tensor_steps(tmp_path):
    x = staged.linspace(-1, 1, 7, requires_grad=True)
    loss = (x * x).sum()
    with tb.SummaryWriter(tmp_path) as w:
        w.add_scalar("loss", loss, staged.tensor(3))
        w.add_scalar("first", x[0], 4, new_style=True)
        w.add_scalar("double", x[1], 5, new_style=True, double_precision=True)
        w.add_scalars("run", {"a": staged.tensor(1.5), "b": 2.0}, 6)
    got = _by_tag(tmp_path)  # add_scalars writes a run per key: run_a, run_b
    step, v = got["loss"]
    assert step == 3 and v.simple_value == pytest.approx(float(loss.item()), rel=1e-7)
    step, v = got["first"]
    assert step == 4 and v.metadata.plugin_data.plugin_name == "scalars"
    assert list(v.tensor.float_val) == [-1.0] and v.tensor.dtype == 1  # DT_FLOAT
    step, v = got["double"]
    assert v.tensor.dtype == 2 and v.tensor.double_val[0] == x[1].item()  # float32 exactly
    runs = {k: _by_tag(tmp_path / f"run_{k}")["run"] for k in "ab"}
    assert {k: (s, v.simple_value) for k, (s, v) in runs.items()} == {"a": (6, 1.5), "b": (6, 2.0)}


def test_a_scalar_of_many_elements_is_refused_as_torchs(tmp_path):
    with tb.SummaryWriter(tmp_path) as w:
        with pytest.raises(AssertionError, match="one element"):
            w.add_scalar("v", staged.ones(3), 0, new_style=True)


def test_histograms_images_and_text(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.standard_normal(1000).astype(np.float32)
    img = rng.random((3, 4, 5)).astype(np.float32)
    with tb.SummaryWriter(tmp_path) as w:
        w.add_histogram("h", staged.tensor(values, requires_grad=True), 1)
        w.add_histogram("bf16", staged.tensor(values).to(staged.bfloat16), 1)
        w.add_image("img", staged.tensor(img), 2)
        w.add_images("imgs", staged.tensor(np.stack([img, img])), 2)
        w.add_text("t", "hello", 1)
    got = _by_tag(tmp_path)
    h = got["h"][1].histo
    assert h.num == 1000 and h.min == values.min() and h.max == values.max()
    assert h.sum == pytest.approx(float(values.astype(np.float64).sum()), abs=1e-3)
    assert sum(h.bucket) == 1000
    assert got["bf16"][1].histo.num == 1000
    im = got["img"][1].image
    assert (im.height, im.width, im.colorspace) == (4, 5, 3)
    assert got["imgs"][1].image.width == 10  # two images side by side
    assert got["t/text_summary"][1].tensor.string_val == [b"hello"]


def test_hparams_with_discrete_domains_in_the_named_run(tmp_path):
    with tb.SummaryWriter(tmp_path) as w:
        w.add_hparams(
            {"lr": 0.1, "opt": "adam", "width": staged.tensor(64)},
            {"hp/acc": staged.tensor(0.75)},
            hparam_domain_discrete={"opt": ["adam", "sgd"]},
            run_name="trial",
        )
        with pytest.raises(TypeError, match=r"hparam_domain_discrete\[lr\] should be a list"):
            w.add_hparams({"lr": 0.1}, {}, hparam_domain_discrete={"lr": ["fast"]})
    got = _by_tag(tmp_path / "trial")
    assert got["hp/acc"][1].simple_value == 0.75
    meta = got["_hparams_/experiment"][1].metadata.plugin_data
    exp = HParamsPluginData.FromString(meta.content).experiment
    infos = {i.name: i for i in exp.hparam_infos}
    assert [v.string_value for v in infos["opt"].domain_discrete.values] == ["adam", "sgd"]
    start = got["_hparams_/session_start_info"][1].metadata.plugin_data
    hp = HParamsPluginData.FromString(start.content).session_start_info.hparams
    assert (hp["lr"].number_value, hp["width"].number_value) == (0.1, 64.0)


def test_add_graph_says_what_draws_a_graph_instead(tmp_path):
    with tb.SummaryWriter(tmp_path) as w:
        with pytest.raises(NotImplementedError, match="staged.viz"):
            w.add_graph(staged.nn.Linear(2, 2), staged.ones(1, 2))


def test_a_program_importing_torchs_writer_runs_with_staged_standing_in(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.tensorboard import SummaryWriter\n"
        "w = SummaryWriter(log_dir='runs/exp')\n"
        "p = torch.nn.Parameter(torch.tensor(2.0))\n"
        "for step in range(3):\n"
        "    loss = (p - 1) ** 2\n"
        "    w.add_scalar('train/loss', loss, step)\n"
        "    with torch.no_grad():\n"
        "        p -= 0.5 * 2 * (p - 1)\n"
        "w.close()\n"
    )
    subprocess.run(
        [sys.executable, "-m", "staged.torch_compat", str(script)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    steps = [(s, v.simple_value) for s, v in _events(tmp_path / "runs" / "exp")]
    assert steps == [(0, 1.0), (1, 0.0), (2, 0.0)]
