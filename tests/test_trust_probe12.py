"""Checkpoints against torch 2.13 (the twelfth trust probe): nothing silently wrong,
nothing half-loaded. ``Module.state_dict``/``load_state_dict`` (strict and not, every bad
key reported, assign, prefixes through containers, non-persistent buffers, tied and view
parameters, dtype conversion, hooks and their order, ``_load_from_state_dict`` overrides
reading ``_version``, extra state, BatchNorm and InstanceNorm checkpoints from before
their current version, lazy modules), ``Optimizer.state_dict``/``load_state_dict`` (groups
mapped by order, state cast to the parameter's dtype, an old checkpoint's number ``step``,
a refused state dict changing nothing, the state dict hooks), schedulers, GradScaler, and
``staged.save``/``staged.load`` with torch's files both ways (shared storages, views,
every dtype, 0-d, empty and strided tensors, a tensor loaded with ``mmap`` saved again,
damaged files, ``map_location``)."""

from __future__ import annotations

import collections
import copy
import io
import pickle

import numpy as np
import pytest
import torch

import staged

LIBS = pytest.mark.parametrize("L", [torch, staged], ids=["torch", "staged"])


def _arr(t) -> np.ndarray:
    return np.asarray(t.detach().float().tolist() if t.dtype.is_floating_point else t.tolist())


def _both(fn):
    """``fn(torch)`` and ``fn(staged)``, each a result or ``(type, message)`` of its error,
    the library's name in the message made neutral."""
    out = []
    for L in (torch, staged):
        try:
            out.append(fn(L))
        except Exception as e:
            out.append((type(e).__name__, str(e).replace(L.__name__, "L")))
    return out


def _net(L):
    """Nested containers, a non-persistent buffer, None entries, a BatchNorm."""

    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = L.nn.Linear(2, 3)
            self.seq = L.nn.Sequential(L.nn.Linear(3, 3), L.nn.ReLU(), L.nn.BatchNorm1d(3))
            self.ml = L.nn.ModuleList([L.nn.Linear(1, 1), L.nn.Linear(1, 2)])
            self.md = L.nn.ModuleDict({"a": L.nn.Linear(1, 1)})
            self.register_buffer("scratch", L.zeros(2), persistent=False)
            self.register_buffer("kept", L.ones(2))
            self.register_parameter("nothing", None)
            self.register_buffer("no_buffer", None)

    return Net()


def _fill(L, m, offset=0.0):
    with L.no_grad():
        for i, (_, t) in enumerate(sorted(m.state_dict(keep_vars=True).items())):
            t.copy_(L.arange(t.numel()).reshape(t.shape).to(t.dtype) + i + offset)
    return m


# --- Module.state_dict / load_state_dict ---------------------------------------------------


def test_keys_and_metadata_through_containers_match_torch():
    got = _both(lambda L: (list(_net(L).state_dict()), dict(_net(L).state_dict()._metadata)))
    assert got[0] == got[1]
    assert got[1][1]["seq.2"] == {"version": 2}  # BatchNorm's _version, as torch's
    got = _both(lambda L: list(L.nn.Sequential(L.nn.Linear(1, 1)).state_dict(prefix="p.")))
    assert got[0] == got[1] == ["p.0.weight", "p.0.bias"]


def test_strict_false_returns_torch_s_missing_and_unexpected_keys():
    def load(L, strict):
        m = _net(L)
        sd = m.state_dict()
        sd.pop("lin.weight")
        sd["extra.x"], sd["seq.0.zz"] = L.ones(1), L.ones(1)
        r = m.load_state_dict(sd, strict=strict)
        return type(r).__name__, r.missing_keys, r.unexpected_keys, repr(r)

    loose = _both(lambda L: load(L, False))
    assert loose[0] == loose[1]
    assert loose[1][1:3] == (["lin.weight"], ["extra.x", "seq.0.zz"])
    strict = _both(lambda L: load(L, True))
    assert strict[0] == strict[1] and strict[1][0] == "RuntimeError"


def test_every_bad_shape_is_reported_and_no_bad_tensor_is_touched():
    """torch copies the good entries and raises listing every bad one; a bad one is never
    written, even in part."""

    def load(L):
        m = _fill(L, _net(L))
        before = {k: _arr(v) for k, v in m.state_dict().items()}
        sd = {k: v + 100 for k, v in m.state_dict().items()}
        sd["lin.weight"], sd["seq.2.running_mean"] = L.ones(4, 4), L.ones(5)
        sd["md.a.bias"] = L.ones(1, 1)
        with pytest.raises(RuntimeError) as e:
            m.load_state_dict(sd)
        after = {k: _arr(v) for k, v in m.state_dict().items()}
        changed = sorted(k for k in after if not np.array_equal(after[k], before[k]))
        return str(e.value).replace(L.__name__, "L"), changed

    ours, want = _both(load)[::-1]
    assert ours == want
    assert want[0].count("size mismatch") == 3
    assert "lin.weight" not in want[1] and "md.a.bias" not in want[1] and "lin.bias" in want[1]


@LIBS
def test_values_of_other_dtypes_layouts_and_scalars_are_converted_as_torch(L):
    m = L.nn.Linear(3, 2)
    w = (L.arange(6.0, dtype=L.float64).reshape(3, 2) / 3).t()  # float64 and transposed
    m.load_state_dict({"weight": w, "bias": L.tensor([True, False])})
    assert m.weight.dtype == L.float32 and type(m.weight) is L.nn.Parameter
    assert m.weight.requires_grad and m.weight.stride() == (3, 1)
    np.testing.assert_array_equal(_arr(m.weight), _arr(w.float()))
    assert m.bias.tolist() == [1.0, 0.0]
    bn = L.nn.BatchNorm1d(2)
    sd = bn.state_dict()
    sd["num_batches_tracked"] = L.tensor([7])  # a torch 0.3 checkpoint's 1-element scalar
    bn.load_state_dict(sd)
    assert bn.num_batches_tracked.shape == () and bn.num_batches_tracked.item() == 7


@LIBS
def test_assign_puts_the_checkpoint_tensors_in_place(L):
    m = L.nn.Linear(2, 2)
    m.weight.requires_grad_(False)
    sd = {"weight": L.ones(2, 2, dtype=L.float64), "bias": L.nn.Parameter(L.zeros(2))}
    m.load_state_dict(sd, assign=True)
    assert m.weight.dtype == L.float64 and type(m.weight) is L.nn.Parameter
    assert not m.weight.requires_grad and m.bias is sd["bias"] and m.bias.requires_grad
    bn = L.nn.BatchNorm1d(2)
    sd = {k: v.clone() for k, v in bn.state_dict().items()}
    bn.load_state_dict(sd, assign=True)
    assert bn.running_mean is sd["running_mean"] and "running_mean" in bn._buffers


@LIBS
def test_tied_weights_and_buffers_that_are_views(L):
    class Tied(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = L.nn.Linear(2, 2, bias=False)
            self.b = L.nn.Linear(2, 2, bias=False)
            self.b.weight = self.a.weight

    m = Tied()
    assert list(m.state_dict()) == ["a.weight", "b.weight"]
    m.load_state_dict({"a.weight": L.ones(2, 2), "b.weight": L.zeros(2, 2)})
    assert m.b.weight is m.a.weight and m.a.weight.tolist() == [[0.0, 0.0]] * 2  # last wins
    r = Tied().load_state_dict({"a.weight": L.ones(2, 2)}, strict=False)
    assert r.missing_keys == ["b.weight"]
    base = L.zeros(6)

    class Viewing(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("part", base[2:4])

    Viewing().load_state_dict({"part": L.full((2,), 3.0)})
    assert base.tolist() == [0.0, 0.0, 3.0, 3.0, 0.0, 0.0]


def test_hooks_run_in_torch_s_order_with_torch_s_arguments():
    def run(L):
        log = []
        outer = L.nn.Sequential(L.nn.Linear(1, 1), L.nn.Sequential(L.nn.Linear(1, 1)))
        for name, mod in outer.named_modules():
            mod.register_state_dict_pre_hook(
                lambda m, prefix, kv, n=name: log.append(("pre", n, prefix, kv))
            )
            mod._register_state_dict_hook(
                lambda m, sd, prefix, lm, n=name: log.append(("old", n, prefix, lm, len(sd)))
            )
            mod.register_state_dict_post_hook(
                lambda m, sd, prefix, lm, n=name: log.append(("post", n, prefix, len(sd)))
            )
            mod.register_load_state_dict_pre_hook(
                lambda m, sd, prefix, lm, strict, mk, uk, em, n=name: log.append(
                    ("lpre", n, prefix, dict(lm), strict, sorted(sd), list(mk), list(uk))
                )
            )
            mod._register_load_state_dict_pre_hook(
                lambda sd, prefix, lm, strict, *lists, n=name: log.append(("lpre_old", n))
            )
            mod.register_load_state_dict_post_hook(
                lambda m, ik, n=name: log.append(
                    ("lpost", n, list(ik.missing_keys), list(ik.unexpected_keys))
                )
            )
        sd = outer.state_dict(keep_vars=True)
        sd.pop("1.0.bias")
        sd["zz"] = L.ones(1)
        outer.load_state_dict(sd, strict=False)
        return log

    ours, want = _both(run)[::-1]
    assert ours == want and len(want) == 24


def test_a_post_hook_may_clear_the_keys_a_strict_load_checks():
    def run(L):
        m = L.nn.Linear(1, 1)
        m.register_load_state_dict_post_hook(
            lambda mod, ik: (ik.missing_keys.clear(), ik.unexpected_keys.clear()) and None
        )
        return repr(m.load_state_dict({"x": L.ones(1)}))

    assert _both(run)[0] == _both(run)[1] == "<All keys matched successfully>"


def test_load_from_state_dict_override_reads_the_saved_version():
    def run(L):
        class Renamed(L.nn.Linear):
            _version = 3

            def _load_from_state_dict(self, sd, prefix, lm, *rest):
                self.seen = (prefix, dict(lm))
                if lm.get("version", 0) < 3 and prefix + "W" in sd:
                    sd[prefix + "weight"] = sd.pop(prefix + "W")
                super()._load_from_state_dict(sd, prefix, lm, *rest)

        m = L.nn.Sequential(Renamed(1, 1))
        meta = dict(m.state_dict()._metadata)
        old = collections.OrderedDict([("0.W", L.full((1, 1), 9.0)), ("0.bias", L.ones(1))])
        old._metadata = {"0": {"version": 1}}
        r = repr(m.load_state_dict(old))
        return meta, m[0].seen, r, m[0].weight.tolist(), sorted(old)

    ours, want = _both(run)[::-1]
    assert ours == want and want[3] == [[9.0]] and want[4] == ["0.W", "0.bias"]


def test_extra_state_is_saved_loaded_and_reported_as_torch():
    def run(L):
        class Counter(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.count, self.lin = 0, L.nn.Linear(1, 1)

            def get_extra_state(self):
                return {"count": self.count}

            def set_extra_state(self, state):
                self.count = state["count"]

        m = L.nn.Sequential(Counter())
        m[0].count = 7
        sd = m.state_dict()
        buf = io.BytesIO()
        L.save(sd, buf)
        buf.seek(0)
        fresh = L.nn.Sequential(Counter())
        fresh.load_state_dict(L.load(buf))
        no_extra = {k: v for k, v in sd.items() if "extra" not in k}
        missing = L.nn.Sequential(Counter()).load_state_dict(no_extra, strict=False)
        extra = L.nn.Sequential(L.nn.Module()).load_state_dict({"0._extra_state": 1}, False)
        return list(sd), fresh[0].count, repr(missing), repr(extra)

    ours, want = _both(run)[::-1]
    assert ours == want and want[1] == 7


def test_a_batchnorm_checkpoint_from_before_version_2_keeps_the_batch_count():
    """Fault: staged's BatchNorm had ``_version`` 1 and required ``num_batches_tracked``;
    torch (version 2) fills it from the module for a checkpoint without metadata or of
    version 1, and still reports it missing for a version 2 one."""

    def run(L, version):
        bn = L.nn.BatchNorm1d(2)
        bn.num_batches_tracked.fill_(5)
        sd = collections.OrderedDict(weight=L.ones(2), bias=L.zeros(2))
        sd.update(running_mean=L.full((2,), 0.5), running_var=L.full((2,), 2.0))
        if version is not None:
            sd._metadata = {"": {"version": version}}
        r = bn.load_state_dict(sd, strict=False)
        return repr(r), bn.num_batches_tracked.item(), bn.running_var.tolist()

    for version in (None, 1, 2):
        ours, want = _both(lambda L: run(L, version))[::-1]
        assert ours == want, version
    assert _both(lambda L: run(L, None))[1][:2] == ("<All keys matched successfully>", 5)


def test_instancenorm_refuses_the_running_stats_of_a_pre_0_4_checkpoint():
    """Fault: staged ignored them under ``strict=False`` (and only listed them as
    unexpected under strict); torch refuses the load with its explanation."""

    def run(L):
        m = L.nn.InstanceNorm1d(2)
        m.load_state_dict({"running_mean": L.ones(2), "running_var": L.ones(2)}, strict=False)

    ours, want = _both(run)[::-1]
    assert ours == want and "Unexpected running stats buffer(s)" in want[1]
    ok = _both(lambda L: repr(L.nn.InstanceNorm1d(2).load_state_dict({})))
    assert ok[0] == ok[1] == "<All keys matched successfully>"


def test_a_lazy_module_takes_its_shapes_from_the_checkpoint():
    """Fault: staged raised (``Can't access the shape of an uninitialized parameter``)
    mid-load, after loading the modules before it; torch materializes the uninitialized
    entries in the checkpoint's shapes, and the module becomes its class at its first call."""

    def run(L):
        src = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.LazyLinear(4), L.nn.LazyBatchNorm1d())
        src(L.ones(2, 2))
        with L.no_grad():
            src[2].running_mean.fill_(0.25)
        m = L.nn.Sequential(L.nn.Linear(2, 3), L.nn.LazyLinear(4), L.nn.LazyBatchNorm1d())
        r = repr(m.load_state_dict(src.state_dict()))
        lazy = [type(c).__name__ for c in m]
        src.eval(), m.eval()
        x = L.arange(4.0).reshape(2, 2)
        return r, lazy, [type(c).__name__ for c in m], _arr(m(x) - src(x)).max()

    ours, want = _both(run)[::-1]
    assert ours == want and want[1][1:] == ["LazyLinear", "LazyBatchNorm1d"] and want[3] == 0


# --- Optimizer and scheduler state ---------------------------------------------------------


def _trained(L, name="Adam", dtype=None, **kw):
    ps = [L.nn.Parameter(L.ones(n, dtype=dtype) * (n + 1)) for n in (2, 3, 1)]
    opt = getattr(L.optim, name)([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.5}], lr=0.1, **kw)
    for _ in range(2):
        for p in ps:
            p.grad = L.ones_like(p) * p
        opt.step()
    return opt, ps


def _fresh(L, name="Adam", dtype=None, sizes=(2, 3, 1)):
    ps = [L.nn.Parameter(L.ones(n, dtype=dtype) * (n + 1)) for n in sizes]
    return getattr(L.optim, name)([{"params": ps[:2]}, {"params": ps[2:]}], lr=1.0), ps


def _continue(L, opt, ps, steps=2):
    for _ in range(steps):
        for p in ps:
            p.grad = L.ones_like(p) * p
        opt.step()
    return [p.tolist() for p in ps]


def test_optimizer_state_maps_by_order_casts_to_the_parameter_dtype_and_continues():
    def run(L, dtype):
        sd = copy.deepcopy(_trained(L)[0].state_dict())
        opt, ps = _fresh(L, dtype=dtype)
        opt.load_state_dict(sd)
        state = {k: str(v.dtype).split(".")[1] for k, v in opt.state[ps[0]].items()}
        shapes = [tuple(opt.state[p]["exp_avg"].shape) for p in ps]
        return state, shapes, [g["lr"] for g in opt.param_groups], _continue(L, opt, ps)

    for dtype in ("float64", "float32"):
        ours, want = _both(lambda L: run(L, getattr(L, dtype)))[::-1]
        assert ours[:3] == want[:3], dtype
        for got, expected in zip(ours[3], want[3]):
            np.testing.assert_allclose(got, expected, rtol=1e-6, err_msg=dtype)


def test_mismatched_groups_are_refused_as_torch():
    def run(L, sizes, groups):
        sd = _trained(L)[0].state_dict()
        ps = [L.nn.Parameter(L.ones(n)) for n in sizes]
        L.optim.Adam(groups(ps)).load_state_dict(sd)

    for sizes, groups in [
        ((2, 3, 1), lambda ps: [{"params": ps[:1]}, {"params": ps[1:]}]),
        ((2,), lambda ps: ps),
    ]:
        ours, want = _both(lambda L: run(L, sizes, groups))[::-1]
        assert ours == want and want[0] == "ValueError"


def test_a_number_step_from_an_old_checkpoint_becomes_a_tensor():
    """Fault: staged kept ``step`` (ASGD's ``eta``/``mu``, NAdam's ``mu_product``) a Python
    number and its next step raised ``'int' object has no attribute 'add_'``; torch's
    ``__setstate__`` makes them 0-d tensors."""

    def run(L, name):
        opt, _ = _trained(L, name)
        sd = copy.deepcopy(opt.state_dict())
        for s in sd["state"].values():
            for k in ("step", "eta", "mu", "mu_product"):
                if k in s:
                    s[k] = s[k].item() if k != "step" else int(s[k].item())
        opt, ps = _fresh(L, name)
        opt.load_state_dict(sd)
        kinds = {k: type(v).__name__ for k, v in opt.state[ps[0]].items()}
        return kinds, str(opt.state[ps[0]]["step"].dtype)[-7:], _continue(L, opt, ps)

    for name in ("Adam", "ASGD", "NAdam"):
        ours, want = _both(lambda L: run(L, name))[::-1]
        assert ours[0] == want[0] and ours[1] == want[1], name
        np.testing.assert_allclose(ours[2][0], want[2][0], rtol=1e-6, err_msg=name)


def test_a_refused_optimizer_state_dict_changes_nothing():
    """Fault: state for an index no group lists raised ``KeyError`` after the state of the
    parameters before it was loaded. torch keeps it under the bare index; staged refuses
    it before anything changes (its state is keyed by parameter)."""
    opt, ps = _trained(staged)
    before = {i: {k: v.tolist() for k, v in opt.state[p].items()} for i, p in enumerate(ps)}
    held = opt.state[ps[0]]["exp_avg"]
    sd = copy.deepcopy(_trained(staged, betas=(0.5, 0.5))[0].state_dict())
    sd["state"][7] = sd["state"].pop(2)
    with pytest.raises(ValueError, match=r"state for parameter\(s\) \[7\] that no parameter"):
        opt.load_state_dict(sd)
    after = {i: {k: v.tolist() for k, v in opt.state[p].items()} for i, p in enumerate(ps)}
    assert after == before and opt.state[ps[0]]["exp_avg"] is held
    assert opt.param_groups[0]["betas"] == (0.9, 0.999)
    topt, _ = _trained(torch)
    tsd = copy.deepcopy(topt.state_dict())
    tsd["state"][7] = tsd["state"].pop(2)
    topt.load_state_dict(tsd)
    assert 7 in topt.state_dict()["state"]  # torch's: kept under the index


def test_optimizer_state_dict_hooks_run_as_torch_s():
    """Fault: staged's optimizers had none of torch's four state dict hooks."""

    def run(L):
        log = []
        p = L.nn.Parameter(L.ones(2))
        opt = L.optim.SGD([p], lr=0.1, momentum=0.9)
        p.grad = L.ones(2)
        opt.step()
        opt.register_state_dict_pre_hook(lambda o: log.append(("pre", o is opt)))
        opt.register_state_dict_post_hook(lambda o, sd: log.append(("post", sorted(sd))))
        opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
        first = opt.register_state_dict_post_hook(
            lambda o, sd: log.append(("first", "extra" in sd)), prepend=True
        )
        sd = opt.state_dict()
        first.remove()
        opt.state_dict()

        def load_pre(o, sd):
            log.append(("load_pre", sorted(sd)))
            groups = [dict(g, lr=0.5) for g in sd["param_groups"]]
            return {"state": sd["state"], "param_groups": groups}

        opt.register_load_state_dict_pre_hook(load_pre)
        opt.register_load_state_dict_post_hook(
            lambda o: log.append(("load_post", o.param_groups[0]["lr"]))
        )
        opt.load_state_dict(sd)
        return log, sorted(sd)

    ours, want = _both(run)[::-1]
    assert ours == want and want[0][-1] == ("load_post", 0.5) and "extra" in want[1]


def test_a_refused_grad_scaler_state_dict_changes_nothing():
    """Fault: a state dict without ``backoff_factor`` raised after the scale and growth
    tracker were written (as torch's does); now nothing is written."""
    scaler = staged.amp.GradScaler("cpu", init_scale=8.0)
    with pytest.raises(KeyError, match="backoff_factor"):
        scaler.load_state_dict({"scale": 2.0, "_growth_tracker": 3, "growth_factor": 3.0})
    assert scaler.state_dict() == staged.amp.GradScaler("cpu", init_scale=8.0).state_dict()
    want = torch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=7).state_dict()
    scaler.load_state_dict(want)
    assert scaler.state_dict() == want


@pytest.mark.parametrize("kind", ["StepLR", "OneCycleLR", "SequentialLR"])
def test_scheduler_state_dict_resumes_torch_s_schedule(kind):
    def make(L, opt):
        S = L.optim.lr_scheduler
        return {
            "StepLR": lambda: S.StepLR(opt, 2, gamma=0.5),
            "OneCycleLR": lambda: S.OneCycleLR(opt, max_lr=1.0, total_steps=10),
            "SequentialLR": lambda: S.SequentialLR(
                opt, [S.LinearLR(opt, total_iters=2), S.ExponentialLR(opt, 0.9)], [2]
            ),
        }[kind]()

    def run(L):
        opt, _ = _trained(L)
        sched = make(L, opt)
        for _ in range(3):
            opt.step(), sched.step()
        sd = sched.state_dict()
        opt2, _ = _trained(L)
        sched2 = make(L, opt2)
        sched2.load_state_dict(sd)
        sched2.step()
        return sched2.last_epoch, [round(g["lr"], 9) for g in opt2.param_groups]

    ours, want = _both(run)[::-1]
    assert ours == want


# --- staged.save / staged.load ---------------------------------------------------------------


def _saved(L, obj, **kw) -> io.BytesIO:
    buf = io.BytesIO()
    L.save(obj, buf, **kw)
    buf.seek(0)
    return buf


def _read(L, buf):
    buf.seek(0)
    return L.load(buf, weights_only=True)


@pytest.mark.parametrize("writer", [torch, staged], ids=["torch-wrote", "staged-wrote"])
def test_views_of_one_storage_stay_one_storage(writer):
    base = writer.arange(10.0)
    obj = {"all": base, "mid": base[2:5], "t": base.view(2, 5).t(), "even": base[::2]}
    for reader in (torch, staged):
        out = _read(reader, _saved(writer, obj))
        out["all"][3] = 100.0
        assert out["mid"].tolist() == [2.0, 100.0, 4.0], reader.__name__
        assert out["t"].tolist()[3] == [100.0, 8.0] and out["even"].tolist()[:2] == [0.0, 2.0]
        assert out["t"].stride() == (1, 5) and out["even"].stride() == (2,)
    same = _read(staged, _saved(writer, [base, base]))
    assert same[0] is same[1]


@pytest.mark.parametrize(
    "dtype",
    ["bfloat16", "float16", "float64", "complex64", "complex128", "bool", "int8", "int64"],
)
@pytest.mark.parametrize("writer", [torch, staged], ids=["torch-wrote", "staged-wrote"])
def test_every_dtype_0d_empty_and_strided_tensors_cross_both_ways(dtype, writer):
    x = (writer.arange(6).reshape(2, 3) * 1.5).to(getattr(writer, dtype))
    if x.is_complex():
        x = x + 1j * x
    grad = x.is_floating_point() or x.is_complex()
    obj = {"x": x, "scalar": x[1, 2], "empty": x[:0], "t": x.t()}
    obj["p"] = writer.nn.Parameter(x, requires_grad=grad)
    for reader in (torch, staged):
        out = _read(reader, _saved(writer, obj))
        assert str(out["x"].dtype).split(".")[1] == dtype
        assert out["scalar"].shape == () and tuple(out["empty"].shape) == (0, 3)
        assert type(out["p"]) is reader.nn.Parameter and out["p"].requires_grad == grad
        want = _arr(x.t()) if not x.is_complex() else np.asarray(x.t().tolist())
        got = _arr(out["t"]) if not x.is_complex() else np.asarray(out["t"].tolist())
        np.testing.assert_array_equal(got, want)


def test_nested_containers_and_state_dict_metadata_cross_both_ways():
    for writer in (torch, staged):
        obj = {
            "l": [writer.ones(2), (writer.zeros(1), {"k": writer.tensor(3)})],
            "s": "x",
            "n": None,
            "f": 2.5,
            "b": b"by",
            "sd": writer.nn.BatchNorm1d(2).state_dict(),
        }
        for reader in (torch, staged):
            out = _read(reader, _saved(writer, obj))
            assert out["l"][1][1]["k"].item() == 3 and out["b"] == b"by" and out["n"] is None
            assert dict(out["sd"]._metadata) == {"": {"version": 2}}
            assert repr(reader.nn.BatchNorm1d(2).load_state_dict(out["sd"])).startswith("<All")


def test_a_tensor_loaded_with_mmap_saves_again_as_its_own_storage(tmp_path):
    """Fault: a uint8 tensor loaded with ``mmap=True`` viewed the map of the whole file,
    so saving it again wrote the whole checkpoint as its storage (torch: its own)."""
    path = tmp_path / "ckpt.pt"
    staged.save({"big": staged.arange(20000.0), "small": staged.tensor([1, 2, 3]).byte()}, path)
    for L in (torch, staged):
        loaded = L.load(path, mmap=True, weights_only=True)
        again = _read(torch, _saved(L, loaded["small"]))
        assert again.tolist() == [1, 2, 3] and again.untyped_storage().nbytes() == 3
        loaded["big"][0] = 7.0  # copy-on-write: the file keeps its values
    assert staged.load(path)["big"][:2].tolist() == [0.0, 1.0]


def test_damaged_files_fail_clearly_and_legacy_files_are_refused():
    good = _saved(staged, {"w": staged.ones(1000)}).getvalue()
    for cut in (10, 100, len(good) // 2, len(good) - 1):
        with pytest.raises(RuntimeError, match="is not a checkpoint written by torch.save"):
            staged.load(io.BytesIO(good[:cut]))
    bad = bytearray(good)
    bad[len(good) // 2] ^= 0xFF  # in the storage's bytes: the zip's CRC catches it
    with pytest.raises(RuntimeError, match="is not a checkpoint written by torch.save"):
        staged.load(io.BytesIO(bytes(bad)))
    legacy = _saved(torch, {"w": torch.ones(2)}, _use_new_zipfile_serialization=False)
    with pytest.raises(RuntimeError, match="legacy \\(non-zip\\) format"):
        staged.load(legacy)
    with pytest.raises(
        pickle.UnpicklingError, match="dtype torch.float8_e8m0fnu, and staged has no such dtype"
    ):
        staged.load(_saved(torch, torch.zeros(2, dtype=torch.float8_e8m0fnu)))  # staged lacks it


@pytest.mark.parametrize(
    "map_location",
    ["cpu", staged.device("cpu"), torch.device("cpu"), {"cuda:0": "cpu"}, lambda s, loc: s, None],
)
def test_map_location_forms(map_location):
    out = staged.load(_saved(torch, {"w": torch.arange(3.0)}), map_location=map_location)
    assert out["w"].tolist() == [0.0, 1.0, 2.0]


def test_a_bad_map_location_is_refused():
    with pytest.raises(TypeError, match="map_location must be"):
        staged.load(_saved(staged, staged.ones(1)), map_location=3)
