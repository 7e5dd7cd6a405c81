"""staged.save / staged.load against torch 2.13: each reads the other's checkpoints (the zip
format of torch.save), the weights-only allow-list refuses other globals, and damaged or
legacy files fail clearly."""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

import staged
from staged import nn, optim

DTYPES = [
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
    "complex128",
]
NOT_A_CHECKPOINT = "is not a checkpoint written by torch.save or staged.save"


def _values(t):
    """A tensor's values as NumPy (bfloat16 widened: NumPy's torch bridge has none)."""
    if isinstance(t, torch.Tensor):
        t = t.detach().resolve_conj().resolve_neg()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    a = t.detach().numpy()
    return a.astype(np.float32) if t.dtype == staged.bfloat16 else a


def assert_same(ours, theirs):
    """``ours`` (staged) is ``theirs`` (torch or staged) rebuilt: containers, types, values."""
    if isinstance(theirs, (torch.Tensor, staged.Tensor)):
        assert isinstance(ours, staged.Tensor), type(ours)
        assert isinstance(ours, nn.Parameter) == isinstance(
            theirs, (torch.nn.Parameter, nn.Parameter)
        )
        assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.requires_grad == theirs.requires_grad
        np.testing.assert_array_equal(_values(ours), _values(theirs))
    elif isinstance(theirs, (torch.dtype, staged.dtype)):
        assert str(ours).split(".")[1] == str(theirs).split(".")[1]
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            assert_same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        assert type(ours).__name__ == type(theirs).__name__  # Size for torch.Size
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert type(ours) is type(theirs) and ours == theirs


def _torch_sample(dtype, shape=(3, 4)):
    if dtype == "bool":
        return torch.rand(shape) > 0.5
    if dtype in ("int8", "int16", "int32", "int64", "uint8"):
        return torch.randint(0, 100, shape, dtype=getattr(torch, dtype))
    return torch.randn(shape, dtype=getattr(torch, dtype))


def _torch_checkpoint():
    base = torch.randn(4, 6)
    return {
        "dtypes": {d: _torch_sample(d) for d in DTYPES},
        "zero_dim": torch.tensor(2.5),
        "empty": torch.empty(0, 3, dtype=torch.int32),
        "transposed": torch.randn(3, 5).t(),
        "strided": torch.arange(20.0)[1::3],
        "expanded": torch.randn(3).expand(2, 3),
        "conj": torch.randn(3, dtype=torch.complex64).conj(),
        "base": base,
        "row": base[1],
        "column": base[:, 2],
        "param": torch.nn.Parameter(torch.randn(2, 2)),
        "frozen": torch.nn.Parameter(torch.randn(2), requires_grad=False),
        "leaf_grad": torch.randn(3, requires_grad=True),
        "nested": [1, 2.5, "s", None, True, (3, [4.0, {"k": torch.ones(2)}])],
        "od": collections.OrderedDict(b=1, a=torch.zeros(1)),
        "misc": (b"by\x00tes", 1 + 2j, {1, 2}, 2**70, torch.Size([2, 3]), torch.float16),
    }


def test_torch_checkpoint_loads_in_staged(tmp_path):
    ckpt = _torch_checkpoint()
    torch.save(ckpt, tmp_path / "t.pt")
    got = staged.load(tmp_path / "t.pt")
    assert_same(got, ckpt)
    # tensors that shared torch's storage are views of one array again
    got["base"][1, 2] = 100.0
    assert got["row"][2].item() == 100.0 and got["column"][1].item() == 100.0


def test_checkpoint_loads_without_torch(tmp_path):
    torch.save(
        {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2, dtype=torch.bfloat16)},
        tmp_path / "t.pt",
    )
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import staged\n"
        f"d = staged.load({str(tmp_path / 't.pt')!r})\n"
        "print(d['w'].tolist(), d['b'].dtype, d['b'].float().tolist())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert out.stdout.strip() == "[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] staged.bfloat16 [1.0, 1.0]"


def _staged_model():
    return nn.Sequential(
        nn.Conv2d(2, 3, 3),
        nn.BatchNorm2d(3),
        nn.Flatten(),
        nn.Linear(3 * 2 * 2, 4),
        nn.LayerNorm(4),
        nn.Embedding(5, 4),
    )


def _torch_model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3),
        torch.nn.BatchNorm2d(3),
        torch.nn.Flatten(),
        torch.nn.Linear(3 * 2 * 2, 4),
        torch.nn.LayerNorm(4),
        torch.nn.Embedding(5, 4),
    )


def test_staged_state_dict_loads_in_torch(tmp_path):
    model = _staged_model()
    model[:5](staged.randn(2, 2, 4, 4))  # training mode: BatchNorm's running stats move
    sd = model.state_dict()
    staged.save(sd, tmp_path / "s.pt")
    got = torch.load(tmp_path / "s.pt", weights_only=True)
    assert list(got) == list(sd) and type(got) is collections.OrderedDict
    for k, v in sd.items():
        assert str(got[k].dtype) == f"torch.{v.dtype.name}" and got[k].shape == v.shape
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    twin = _torch_model()
    twin.load_state_dict(got)  # strict: every key and shape
    x = np.random.randn(2, 2, 4, 4).astype(np.float32)
    np.testing.assert_allclose(
        twin[:5].eval()(torch.from_numpy(x)).detach().numpy(),
        model[:5].eval()(staged.tensor(x)).detach().numpy(),
        rtol=1e-5,
        atol=1e-6,
    )


def test_torch_state_dict_loads_into_staged_model(tmp_path):
    twin = _torch_model()
    torch.save(twin.state_dict(), tmp_path / "t.pt")
    model = _staged_model()
    model.load_state_dict(staged.load(tmp_path / "t.pt"))
    for k, v in twin.state_dict().items():
        np.testing.assert_array_equal(model.state_dict()[k].numpy(), v.numpy())


def _staged_object():
    base = staged.arange(12.0).reshape(3, 4)
    return {
        "dtypes": {
            d: staged.tensor(_values(_torch_sample(d))).to(getattr(staged, d)) for d in DTYPES
        },
        "zero_dim": staged.tensor(3),
        "empty": staged.zeros(0, 2),
        "base": base,
        "row": base[1],
        "transposed": base.t(),
        "expanded": base[0].expand(2, 4),
        "param": nn.Parameter(staged.randn(2)),
        "frozen": nn.Parameter(staged.randn(2), requires_grad=False),
        "grad": staged.randn(2, requires_grad=True),
        "nested": [1, 2.5, "s", None, (True, [b"b", 1j, {3}])],
        "od": collections.OrderedDict(z=staged.ones(1)),
        "meta": (staged.Size([2, 3]), staged.float16, staged.bool),
    }


def test_round_trip_in_staged(tmp_path):
    obj = _staged_object()
    staged.save(obj, tmp_path / "s.pt")
    got = staged.load(tmp_path / "s.pt")
    assert_same(got, obj)
    assert got["meta"][1] is staged.float16 and got["meta"][2] is staged.bool
    got["base"][1, 1] = -1.0  # the views share the loaded base's memory
    assert got["row"][1].item() == -1.0 and got["transposed"][1, 1].item() == -1.0


def test_staged_checkpoint_loads_in_torch(tmp_path):
    obj = _staged_object()
    staged.save(obj, tmp_path / "s.pt")
    got = torch.load(tmp_path / "s.pt", weights_only=True)
    assert_same(staged.load(tmp_path / "s.pt"), obj)
    assert isinstance(got["param"], torch.nn.Parameter) and got["param"].requires_grad
    assert got["meta"] == (torch.Size([2, 3]), torch.float16, torch.bool)
    for d in DTYPES:
        assert got["dtypes"][d].dtype == getattr(torch, d)
        np.testing.assert_array_equal(_values(got["dtypes"][d]), _values(obj["dtypes"][d]))
    # one storage for the base and its views, as torch.save would write
    assert got["row"].untyped_storage().data_ptr() == got["base"].untyped_storage().data_ptr()
    assert got["transposed"].stride() == (1, 4) and got["expanded"].stride() == (0, 1)
    np.testing.assert_array_equal(got["transposed"].numpy(), obj["transposed"].numpy())


def test_layout_is_torchs_and_mmap_loads(tmp_path, monkeypatch):
    """Storages 64-byte aligned, each followed by a data descriptor unless empty, as torch's
    writer lays them out: torch's offsets computed from that layout find them."""
    path = tmp_path / "s.pt"
    obj = {"a": staged.randn(5), "empty": staged.zeros(0), "b": staged.arange(7)}
    staged.save(obj, path)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            n, m = struct.unpack("<HH", raw[info.header_offset + 26 : info.header_offset + 30])
            assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
    monkeypatch.setenv("TORCH_SERIALIZATION_DEBUG", "1")  # torch checks its computed offsets
    import torch.utils.serialization  # (imported by torch only on some paths)

    with torch.utils.serialization.config.patch({"load.calculate_storage_offsets": True}):
        assert_same(staged.load(path), torch.load(path, mmap=True, weights_only=True))
    mapped = staged.load(path, mmap=True)
    assert_same(mapped, obj)
    mapped["a"][0] = 123.0  # copy-on-write: the file is unchanged
    assert path.read_bytes() == raw
    with pytest.raises(ValueError, match="file path in order to use the mmap"):
        staged.load(io.BytesIO(raw), mmap=True)


def test_zip64_fields(tmp_path, monkeypatch):
    """The zip64 forms a checkpoint past 4 GiB takes, forced at 100 bytes: zipfile, torch's
    reader and staged's read them."""
    monkeypatch.setattr(staged.serialization, "_ZIP64_AT", 100)
    obj = {"a": staged.randn(50), "empty": staged.zeros(0), "b": staged.arange(3)}
    staged.save(obj, tmp_path / "z.pt")
    assert zipfile.ZipFile(tmp_path / "z.pt").testzip() is None
    assert_same(staged.load(tmp_path / "z.pt"), obj)
    assert_same(staged.load(tmp_path / "z.pt"), torch.load(tmp_path / "z.pt", weights_only=True))


def test_adam_state_dict_round_trip(tmp_path):
    def setup():
        staged.manual_seed(1)
        model = nn.Linear(3, 2)
        return model, optim.Adam(model.parameters(), lr=0.1)

    def step(model, opt):
        opt.zero_grad()
        model(staged.ones(4, 3)).pow(2).sum().backward()
        opt.step()

    model, opt = setup()
    step(model, opt)
    staged.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "c.pt")
    step(model, opt)

    resumed, resumed_opt = setup()
    ckpt = staged.load(tmp_path / "c.pt")
    resumed.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["optim"])
    step(resumed, resumed_opt)
    for a, b in zip(resumed.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    theirs = torch.load(tmp_path / "c.pt", weights_only=True)["optim"]
    assert theirs["param_groups"][0]["betas"] == (0.9, 0.999)
    assert theirs["state"][0]["step"].dtype == torch.float32
    assert_same(ckpt["optim"], staged.load(tmp_path / "c.pt")["optim"])


def test_torch_adam_state_loads_into_staged(tmp_path):
    twin = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(twin.parameters(), lr=0.1)
    twin(torch.ones(4, 3)).pow(2).sum().backward()
    topt.step()
    torch.save(topt.state_dict(), tmp_path / "t.pt")
    opt = optim.Adam(nn.Linear(3, 2).parameters(), lr=0.1)
    opt.load_state_dict(staged.load(tmp_path / "t.pt"))
    for k in ("exp_avg", "exp_avg_sq", "step"):
        np.testing.assert_array_equal(
            opt.state_dict()["state"][0][k].numpy(), topt.state_dict()["state"][0][k].numpy()
        )


def test_file_like_objects():
    obj = {"w": staged.randn(3), "n": [1, "x"]}
    buf = io.BytesIO()
    staged.save(obj, buf)
    assert zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()[0] == "archive/data.pkl"
    buf.seek(0)
    assert_same(staged.load(buf), obj)
    buf.seek(0)
    assert_same(staged.load(io.BytesIO(buf.getvalue())), obj)
    buf.seek(0)
    np.testing.assert_array_equal(torch.load(buf, weights_only=True)["w"].numpy(), obj["w"].numpy())
    theirs = io.BytesIO()
    torch.save({"t": torch.arange(3)}, theirs)
    theirs.seek(0)
    assert staged.load(theirs)["t"].tolist() == [0, 1, 2]


class _Stream(io.RawIOBase):
    """A readable stream that cannot seek (a pipe, a socket)."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, b):
        return self._data.readinto(b)


def test_unseekable_stream():
    buf = io.BytesIO()
    staged.save([staged.ones(2)], buf)
    assert staged.load(_Stream(buf.getvalue()))[0].tolist() == [1.0, 1.0]


@pytest.mark.parametrize(
    "map_location",
    [
        "cpu",
        {"cpu": "cpu"},
        torch.device("cpu"),
        lambda storage, loc: storage,
        lambda storage, loc: storage.cpu(),
        lambda storage, loc: None,
    ],
    ids=["str", "dict", "device", "identity", "cpu", "none"],
)
def test_map_location(tmp_path, map_location):
    torch.save({"w": torch.arange(4.0)}, tmp_path / "t.pt")
    assert staged.load(tmp_path / "t.pt", map_location=map_location)["w"].tolist() == [
        0.0,
        1.0,
        2.0,
        3.0,
    ]


def test_map_location_callable_sees_each_storage(tmp_path):
    base = torch.arange(6, dtype=torch.int16)
    torch.save([base, base[2:], torch.ones(1)], tmp_path / "t.pt")
    seen = []
    staged.load(
        tmp_path / "t.pt", map_location=lambda s, loc: seen.append((s.dtype, tuple(s.shape), loc))
    )
    assert seen == [(staged.uint8, (12,), "cpu"), (staged.uint8, (4,), "cpu")]


def test_map_location_errors(tmp_path):
    staged.save(staged.ones(2), tmp_path / "s.pt")
    with pytest.raises(TypeError, match="must return the storage it is given"):
        staged.load(tmp_path / "s.pt", map_location=lambda s, loc: staged.zeros(8))
    with pytest.raises(TypeError, match="map_location must be None, a string"):
        staged.load(tmp_path / "s.pt", map_location=3)


class _Exploit:
    """Pickles as a call of os.system."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _zip_with_pickle(path, data):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x/data.pkl", data)
        zf.writestr("x/version", "3\n")


def test_malicious_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    _zip_with_pickle(tmp_path / "evil.pt", pickle.dumps({"w": _Exploit(marker)}, protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"unsupported global (posix|nt)\.system"):
        staged.load(tmp_path / "evil.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL (posix|nt)\.system"):
        torch.load(tmp_path / "evil.pt", weights_only=True)  # torch refuses it as well
    assert not marker.exists()


def test_weights_only_false_allows_trusted_globals(tmp_path):
    staged.save(
        {"frac": __import__("fractions").Fraction(1, 3), "w": staged.ones(1)}, tmp_path / "s.pt"
    )
    with pytest.raises(pickle.UnpicklingError, match="fractions.Fraction"):
        staged.load(tmp_path / "s.pt")
    got = staged.load(tmp_path / "s.pt", weights_only=False)
    assert str(got["frac"]) == "1/3" and got["w"].tolist() == [1.0]
    torch.save({"m": torch.nn.LinearCrossEntropyLoss(2, 3)}, tmp_path / "t.pt")  # staged lacks
    with pytest.raises(
        pickle.UnpicklingError,
        match="torch.nn.modules.loss.LinearCrossEntropyLoss: staged has no "
        "staged.nn.modules.loss.LinearCrossEntropyLoss",
    ):
        staged.load(tmp_path / "t.pt", weights_only=False)
    for layer, kind in (
        (torch.nn.Bilinear(2, 2, 2), "Bilinear"),
        (torch.nn.SyncBatchNorm(2), "SyncBatchNorm"),
    ):
        torch.save({"m": layer}, tmp_path / "b.pt")  # ones it has
        loaded = staged.load(tmp_path / "b.pt", weights_only=False)["m"]
        assert isinstance(loaded, getattr(staged.nn, kind)) and loaded.weight.shape[0] == 2


def test_damaged_files_fail_clearly(tmp_path):
    staged.save({"w": staged.randn(100)}, tmp_path / "s.pt")
    raw = (tmp_path / "s.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "text.pt").write_text("just some text\n")
    flipped = bytearray(raw)
    flipped[raw.index(b"s/data/0") + 200] ^= 0xFF  # inside the storage's bytes
    (tmp_path / "flipped.pt").write_bytes(bytes(flipped))
    _zip_with_pickle(tmp_path / "bad_pickle.pt", b"\x80\x02}q\x00(X")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as zf:
        zf.writestr("notes/readme.txt", "hello")
    for name, reason in [
        ("cut.pt", "File is not a zip file"),
        ("text.pt", "not a zip archive"),
        ("flipped.pt", "Bad CRC-32"),
        ("bad_pickle.pt", "truncated"),
        ("other.zip", "no data.pkl"),
    ]:
        with pytest.raises(RuntimeError, match=f"{NOT_A_CHECKPOINT}: .*{reason}"):
            staged.load(tmp_path / name)


def test_out_of_bounds_view_is_refused(tmp_path):
    staged.save(staged.arange(4.0), tmp_path / "s.pt")
    with zipfile.ZipFile(tmp_path / "s.pt") as zf:
        data = zf.read("s/data.pkl")
    size = b"K\x04\x85"  # the size (4,) as protocol 2 writes it
    assert size in data
    _zip_with_pickle(tmp_path / "big.pt", data.replace(size, b"K\x09\x85", 1))
    with zipfile.ZipFile(tmp_path / "big.pt", "a") as zf:
        zf.writestr("x/data/0", np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(RuntimeError, match="runs past its storage of 4 elements"):
        staged.load(tmp_path / "big.pt")


def test_legacy_format_is_refused(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "old.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(
        RuntimeError, match="legacy .non-zip. format.*re-save it with a current torch"
    ):
        staged.load(tmp_path / "old.pt")


def test_big_endian_checkpoint(tmp_path):
    """A checkpoint written on a big-endian machine: its storages are byte-swapped."""
    torch.save(
        {"f": torch.arange(3.0), "c": torch.tensor([1 + 2j]), "i": torch.arange(2)},
        tmp_path / "t.pt",
    )
    with (
        zipfile.ZipFile(tmp_path / "t.pt") as src,
        zipfile.ZipFile(tmp_path / "big.pt", "w") as dst,
    ):
        kinds = {"0": np.float32, "1": np.complex64, "2": np.int64}
        for info in src.infolist():
            data = src.read(info)
            key = info.filename.rpartition("/data/")[2]
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename and key in kinds:
                data = np.frombuffer(data, kinds[key]).byteswap().tobytes()
            dst.writestr(info.filename, data)
    got = staged.load(tmp_path / "big.pt")
    assert got["f"].tolist() == [0.0, 1.0, 2.0] and got["c"].tolist() == [1 + 2j]
    assert got["i"].tolist() == [0, 1]
