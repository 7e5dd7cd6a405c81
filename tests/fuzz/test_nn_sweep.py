"""Every nn module over the product of its options, as PyTorch's ModuleInfo does: weight,
ignore_index, reduction, label_smoothing, probability targets, padding modes, bias=False,
train/eval, batch_first and 0-size batches, against torch 2.13 (torch's parameters copied
into staged; outputs, input and parameter gradients, buffers). tests/nn/test_layers.py
holds one hand-picked case per layer; this sweeps the option grid with its checker. Where
torch raises, staged must raise the same exception class."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import staged
from tests.nn.test_layers import check_layer

RNG = np.random.RandomState(1)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def grid(**options):
    """Every combination of ``options`` as dicts."""
    keys = list(options)
    return [dict(zip(keys, v)) for v in itertools.product(*options.values())]


def _probs(n, c, *rest):
    p = RNG.random_sample((n, c) + rest).astype(np.float32)
    return p / p.sum(1, keepdims=True)


def _targets(n, c, *rest, ignore=None):
    t = RNG.randint(0, c, (n,) + rest)
    if ignore is not None and t.size:
        t.flat[0] = ignore
    return t


def _loss_cases():
    cases = []
    for kw in grid(
        weight=(None, "w"),
        reduction=("mean", "sum", "none"),
        label_smoothing=(0.0, 0.2),
        target=("index", "ignore", "probs"),
        batch=(4, 0),
        extra=((), (3,)),
    ):
        n, extra = kw.pop("batch"), kw.pop("extra")
        target = kw.pop("target")
        if target == "probs":
            t = _probs(n, 5, *extra)
        else:
            t = _targets(n, 5, *extra, ignore=-1 if target == "ignore" else None)
            if target == "ignore":
                kw["ignore_index"] = -1
        cases.append(("CrossEntropyLoss", kw, [f32(n, 5, *extra), t]))
        if not kw["label_smoothing"] and target != "probs":
            nkw = {k: v for k, v in kw.items() if k != "label_smoothing"}
            cases.append(("NLLLoss", nkw, [np.log(_probs(n, 5, *extra)), t]))
    for r in ("mean", "sum", "none"):
        cases += [
            ("MSELoss", {"reduction": r}, [f32(3, 4), f32(3, 4)]),
            ("MSELoss", {"reduction": r}, [f32(0, 4), f32(0, 4)]),
        ]
    return cases


def _conv_cases():
    cases = []
    options = grid(
        bias=(True, False),
        padding_mode=("zeros",),
        padding=(0, 1, "same"),
        stride=(1, 2),
        groups=(1, 2),
    )
    options += grid(
        bias=(True,),
        padding_mode=("reflect", "replicate", "circular"),
        padding=(1,),
        stride=(1,),
        groups=(1,),
    )
    for kw in options:
        if kw["padding"] == "same" and kw["stride"] != 1:
            continue
        for batch in ((2,), (0,), ()):
            cases.append(
                (
                    "Conv2d",
                    dict(in_channels=4, out_channels=2, kernel_size=3, **kw),
                    [f32(*batch, 4, 6, 5)],
                )
            )
            cases.append(
                (
                    "Conv1d",
                    dict(in_channels=4, out_channels=2, kernel_size=3, **kw),
                    [f32(*batch, 4, 7)],
                )
            )
    return cases


def _pool_cases():
    cases = []
    for kw in grid(kernel_size=(2, 3), stride=(None, 2), padding=(0, 1), ceil_mode=(False, True)):
        for batch in ((2,), (0,)) if kw["padding"] else ((2,),):
            for name, shape in (
                ("MaxPool2d", (3, 7, 6)),
                ("MaxPool1d", (3, 7)),
                ("AvgPool2d", (3, 7, 6)),
                ("AvgPool1d", (3, 7)),
            ):
                extra = [dict(count_include_pad=False)] if name.startswith("Avg") else []
                for more in [{}] + extra:
                    cases.append((name, {**kw, **more}, [f32(*batch, *shape)]))
    return cases


def _norm_cases():
    cases = []
    for kw in grid(
        affine=(True, False),
        track_running_stats=(True, False),
        momentum=(0.1, None),
        mode=("train", "eval"),
    ):
        for name, shape in (
            ("BatchNorm1d", (6, 3)),
            ("BatchNorm1d", (4, 3, 5)),
            ("BatchNorm2d", (2, 3, 4, 4)),
            ("BatchNorm2d", (0, 3, 4, 4)),
        ):
            cases.append((name, dict(num_features=3, **kw), [f32(*shape)]))
    for kw in grid(elementwise_affine=(True, False), bias=(True, False)):
        for shape in ((4, 5), (0, 5), (2, 3, 5)):
            cases.append(("LayerNorm", dict(normalized_shape=5, **kw), [f32(*shape)]))
    return cases


def _misc_cases():
    cases = []
    for kw in grid(bias=(True, False)):
        for shape in ((4, 5), (5,), (0, 5), (2, 3, 5)):
            cases.append(("Linear", dict(in_features=5, out_features=3, **kw), [f32(*shape)]))
    for pad in (None, 0, -1):
        for idx in (np.array([[0, 2], [6, 2]]), np.zeros((0, 3), np.int64)):
            cases.append(
                ("Embedding", dict(num_embeddings=7, embedding_dim=3, padding_idx=pad), [idx])
            )
    for name, kw in (
        ("GELU", {}),
        ("GELU", {"approximate": "tanh"}),
        ("ReLU", {}),
        ("SiLU", {}),
        ("Sigmoid", {}),
        ("Tanh", {}),
        ("Identity", {}),
        ("Softmax", {"dim": 0}),
        ("Softmax", {"dim": -1}),
        ("LogSoftmax", {"dim": 1}),
        ("Flatten", {}),
        ("Flatten", {"start_dim": 0, "end_dim": -2}),
        ("Unflatten", {"dim": 1, "unflattened_size": (2, 2)}),
        ("Dropout", {"p": 0.0}),
        ("Dropout", {"p": 1.0}),
        ("Dropout", {"p": 0.5, "mode": "eval"}),
    ):
        for shape in ((3, 4), (0, 4)):
            cases.append((name, kw, [f32(*shape)]))
    for kw in (
        {"scale_factor": 2},
        {"size": (5, 3), "mode": "nearest-exact"},
        {"scale_factor": (1.5, 0.5), "mode": "bilinear"},
        {"size": 7, "mode": "bilinear", "align_corners": True},
        {"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True},
    ):
        for shape in ((2, 3, 4, 4), (0, 3, 4, 4)):
            cases.append(("Upsample", kw, [f32(*shape)]))
    for name in ("UpsamplingNearest2d", "UpsamplingBilinear2d"):
        cases.append((name, {"scale_factor": 2}, [f32(1, 2, 3, 4)]))
    for kw in grid(
        batch_first=(False, True),
        bias=(True, False),
        batch=(2, 0),
        need_weights=(True, False),
        average_attn_weights=(True, False),
    ):
        batch = kw.pop("batch")
        fwd = {k: kw.pop(k) for k in ("need_weights", "average_attn_weights")}
        shape = (batch, 5, 8) if kw["batch_first"] else (5, batch, 8)
        cases.append(
            ("MultiheadAttention", dict(embed_dim=8, num_heads=2, **kw), [f32(*shape)] * 3, fwd)
        )
    return cases


CASES = _loss_cases() + _conv_cases() + _pool_cases() + _norm_cases() + _misc_cases()


def _make(name, kw):
    kw = dict(kw)
    mode = kw.pop("mode", "train")

    def make(ns):
        args = {
            k: (ns.tensor(np.linspace(0.5, 1.5, 5, dtype=np.float32)) if v == "w" else v)
            for k, v in kw.items()
        }
        m = getattr(ns.nn, name)(**args)
        return m.eval() if mode == "eval" else m.train()

    return make


def _id(case):
    name, kw, arrays = case[:3]
    opts = ",".join(f"{k}={v}" for k, v in kw.items())
    return f"{name}({opts})-" + "x".join(str(a.shape) for a in arrays).replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_module_option_matches_torch(case):
    name, kw, arrays, *fwd = case
    fwd = fwd[0] if fwd else {}
    make = _make(name, kw)
    try:
        make(torch)(*[torch.tensor(a) for a in arrays], **fwd)
    except Exception as err:  # noqa: BLE001  (torch refuses the case: staged must too)
        with pytest.raises(type(err)):
            make(staged)(*[staged.tensor(a) for a in arrays], **fwd)
        return
    check_layer(make, arrays, fwd)
