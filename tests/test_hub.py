"""staged.hub against torch.hub: the same cache directories, weights downloaded once (file://
URLs stand in for the network), hash checks, torch's legacy zips, and hubconf entry points
from a local directory or a GitHub repository (GitHub's replies served by a fake opener)."""

import email.message
import hashlib
import io
import json
import os
import urllib.error
import urllib.response
import zipfile

import numpy as np
import pytest
import torch

import staged
import staged.hub as hub


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh TORCH_HOME for staged's hub and torch's."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    return tmp_path / "home"


def _torch_weights(path):
    """A state dict saved by torch at ``path``, named ``<stem>-<sha256 prefix>.pth``."""
    state = {"weight": torch.arange(6.0).reshape(2, 3), "bias": torch.tensor([0.5, -1.0])}
    torch.save(state, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    named = path.with_name(f"{path.stem}-{digest[:8]}.pth")
    path.rename(named)
    return state, named


def test_the_hub_directory_is_torchs(home, tmp_path):
    assert hub.get_dir() == torch.hub.get_dir() == str(home / "hub")
    hub.set_dir(str(tmp_path / "elsewhere"))
    assert hub.get_dir() == str(tmp_path / "elsewhere")
    assert staged.hub is hub  # torch.hub is an attribute after import torch


def test_weights_download_once_into_the_cache_and_check_their_hash(home, tmp_path, capsys):
    state, source = _torch_weights(tmp_path / "weights.pth")
    loaded = hub.load_state_dict_from_url(source.as_uri(), check_hash=True, progress=False)
    assert sorted(loaded) == ["bias", "weight"]
    for k, v in state.items():
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    cached = home / "hub" / "checkpoints" / source.name
    assert cached.read_bytes() == source.read_bytes()
    assert f'Downloading: "{source.as_uri()}"' in capsys.readouterr().out
    source.unlink()  # read from the cache now: no download
    again = hub.load_state_dict_from_url(source.as_uri(), check_hash=True)
    np.testing.assert_array_equal(again["weight"].numpy(), state["weight"].numpy())
    assert capsys.readouterr().out == ""


def test_a_wrong_hash_raises_and_leaves_nothing(home, tmp_path):
    _, source = _torch_weights(tmp_path / "weights.pth")
    wrong = source.with_name("weights-00000000.pth")
    source.rename(wrong)
    models = tmp_path / "models"
    with pytest.raises(RuntimeError, match='invalid hash value \\(expected "00000000"'):
        hub.load_state_dict_from_url(wrong.as_uri(), model_dir=str(models), check_hash=True)
    assert os.listdir(models) == []


def test_torchs_cache_serves_staged_and_staged_downloads_serve_torch(home, tmp_path):
    state, source = _torch_weights(tmp_path / "weights.pth")
    torch.hub.load_state_dict_from_url(source.as_uri(), progress=False)
    url = f"https://example.invalid/models/{source.name}"  # never fetched: torch cached it
    loaded = hub.load_state_dict_from_url(url, map_location="cpu")
    np.testing.assert_array_equal(loaded["bias"].numpy(), state["bias"].numpy())
    other = tmp_path / "other.pth"
    staged.save({"w": staged.ones(3)}, other)
    hub.load_state_dict_from_url(other.as_uri(), file_name="renamed.pth", progress=False)
    from_torch = torch.hub.load_state_dict_from_url("https://example.invalid/renamed.pth")
    np.testing.assert_array_equal(from_torch["w"].numpy(), np.ones(3, np.float32))


def test_a_legacy_zip_of_one_file_is_extracted_and_read(home, tmp_path):
    inner = tmp_path / "inner.pth"
    torch.save({"w": torch.tensor([1.0, 2.0])}, inner)
    archive = tmp_path / "legacy.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(inner, "model.pth")
    with pytest.warns(FutureWarning, match="old format < 1.6"):
        loaded = hub.load_state_dict_from_url(archive.as_uri(), progress=False)
    np.testing.assert_array_equal(loaded["w"].numpy(), [1.0, 2.0])
    assert (home / "hub" / "checkpoints" / "model.pth").exists()


HUBCONF = '''
"""A repository's hub entry points."""
import torch  # staged, through staged.as_torch() or the module below

dependencies = ["numpy"]


def tiny(n=2, bias=True):
    """A Linear of n inputs."""
    return torch.nn.Linear(n, 1, bias=bias)


def _private():
    pass
'''


def _repo(directory, dependencies=None):
    directory.mkdir(parents=True)
    text = HUBCONF.replace("import torch", "import staged as torch")
    if dependencies is not None:
        text = text.replace('["numpy"]', repr(dependencies))
    (directory / "hubconf.py").write_text(text)
    return directory


def test_a_local_hubconf_gives_its_entry_points(tmp_path):
    repo = _repo(tmp_path / "repo")
    model = hub.load(str(repo), "tiny", 3, source="local", bias=False)
    assert isinstance(model, staged.nn.Linear) and model.weight.shape == (1, 3)
    assert model.bias is None and str(repo) not in __import__("sys").path
    with pytest.raises(RuntimeError, match="Cannot find callable missing in hubconf"):
        hub.load(str(repo), "missing", source="local")
    with pytest.raises(ValueError, match='Unknown source: "svn"'):
        hub.load(str(repo), "tiny", source="svn")
    broken = _repo(tmp_path / "broken", dependencies=["numpy", "no_such_package_xyz"])
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_package_xyz"):
        hub.load(str(broken), "tiny", source="local")


def _reply(url, body: bytes):
    return urllib.response.addinfourl(io.BytesIO(body), email.message.Message(), url, 200)


class FakeGitHub:
    """GitHub's replies for owner/net: no ``main`` branch (``master`` is the default), the
    branches and tags API, and the zip of the repository at ``master``."""

    def __init__(self, tmp_path):
        src = _repo(tmp_path / "src" / "owner-net-abc123")
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as z:
            z.writestr("owner-net-abc123/", "")
            z.write(src / "hubconf.py", "owner-net-abc123/hubconf.py")
        self.zip, self.urls = buffer.getvalue(), []

    def __call__(self, request):
        url = getattr(request, "full_url", request)
        self.urls.append(url)
        if url.endswith("/tree/main/"):
            raise urllib.error.HTTPError(url, 404, "Not Found", email.message.Message(), None)
        if "/branches?" in url:
            page = (
                [{"name": "master", "commit": {"sha": "abc123"}}] if url.endswith("&page=1") else []
            )
            return _reply(url, json.dumps(page).encode())
        if "/tags?" in url:
            return _reply(url, b"[]")
        if url == "https://github.com/owner/net/zipball/master":
            return _reply(url, self.zip)
        raise AssertionError(f"unexpected request {url}")


def test_a_github_repository_is_downloaded_once_and_trusted_as_torch_records(
    home, tmp_path, monkeypatch, capsys
):
    github = FakeGitHub(tmp_path)
    monkeypatch.setattr(hub, "urlopen", github)
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail(prompt))
    assert hub.list("owner/net", trust_repo=True) == ["tiny"]
    repo = home / "hub" / "owner_net_master"
    assert (repo / "hubconf.py").exists() and not (home / "hub" / "master.zip").exists()
    assert (home / "hub" / "trusted_list").read_text() == "owner_net\n"
    assert "zipball/master" in github.urls[-1]
    github.urls.clear()
    assert hub.help("owner/net:master", "tiny") == "A Linear of n inputs."
    model = hub.load("owner/net:master", "tiny", n=4)
    assert model.weight.shape == (1, 4) and github.urls == []  # the cache, no request
    assert "Using cache found in" in capsys.readouterr().err
    with pytest.raises(ValueError, match="Cannot find nope in https://github.com/owner/net"):
        hub.load("owner/net:nope", "tiny", trust_repo=True)
    for bad in ("owner", "owner/net/extra:main", "/net"):
        with pytest.raises(ValueError, match=f'Invalid GitHub repository "{bad}": expected'):
            hub.load(bad, "tiny")


def test_an_untrusted_repository_asks_first(home, tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "urlopen", FakeGitHub(tmp_path))
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(Exception, match="Untrusted repository"):
        hub.load("owner/net:master", "tiny")
    monkeypatch.setattr("builtins.input", lambda prompt: "maybe")
    with pytest.raises(ValueError, match="Unrecognized response maybe"):
        hub.load("owner/net:master", "tiny")
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert isinstance(hub.load("owner/net:master", "tiny"), staged.nn.Linear)
    assert (home / "hub" / "trusted_list").read_text() == "owner_net\n"


def test_a_zip_reaching_outside_its_directory_is_refused(home, tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../escaped.pth", b"x")
    with pytest.raises(ValueError, match="outside the target directory: ../escaped.pth"):
        with pytest.warns(FutureWarning, match="old format"):
            hub.load_state_dict_from_url(archive.as_uri(), progress=False)
    assert not (home / "hub" / "escaped.pth").exists()


def test_progress_is_shown_as_torchs_and_model_zoo_is_the_old_name(
    home, tmp_path, capsys, monkeypatch
):
    _, source = _torch_weights(tmp_path / "weights.pth")
    monkeypatch.setattr(hub, "tqdm", hub._Progress)  # torch's stand-in without tqdm
    hub.download_url_to_file(source.as_uri(), str(tmp_path / "copy.pth"))
    assert capsys.readouterr().err.endswith("100.0%\n")
    assert (tmp_path / "copy.pth").read_bytes() == source.read_bytes()
    from staged.utils import model_zoo

    assert model_zoo.load_url is hub.load_state_dict_from_url and model_zoo.tqdm is hub.tqdm
