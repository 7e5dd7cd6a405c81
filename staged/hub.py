"""``staged.hub``: torch.hub's cache of downloaded weights and of repositories with a
``hubconf.py``, in torch's places (``$TORCH_HOME/hub``, ``~/.cache/torch/hub`` by default),
so weights torch downloaded before load without a download, and files staged downloads
are torch's too. Files are read by ``staged.load``, which reads torch's format."""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import uuid
import warnings
import zipfile
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

from .serialization import load as _load


class _Progress:
    """tqdm's interface as far as downloads use it: percentages on stderr (torch's stand-in
    where tqdm is not installed)."""

    def __init__(self, total=None, disable=False, **_):
        self.total, self.disable, self.n = total, disable, 0

    def update(self, n):
        if not self.disable:
            self.n += n
            done = f"{100 * self.n / self.total:.1f}%" if self.total else f"{self.n:.1f} bytes"
            sys.stderr.write(f"\r{done}")
            sys.stderr.flush()

    def set_description(self, *args, **kwargs):
        pass

    def write(self, s):
        sys.stderr.write(f"{s}\n")

    def close(self):
        self.disable = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.disable:
            sys.stderr.write("\n")


try:
    from tqdm import tqdm  # type: ignore[import-untyped]  # torch's progress bar, where installed
except ImportError:
    tqdm = _Progress

__all__ = [
    "download_url_to_file",
    "get_dir",
    "help",
    "list",
    "load",
    "load_state_dict_from_url",
    "set_dir",
]

HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")  # resnet18-bfd8deac.pth: the SHA-256's prefix
_TRUSTED_OWNERS = ("facebookresearch", "facebookincubator", "pytorch", "fairinternal")
_CHUNK = 128 * 1024
_hub_dir: str | None = None


def _get_torch_home() -> str:
    cache = os.getenv("XDG_CACHE_HOME", "~/.cache")
    return os.path.expanduser(os.getenv("TORCH_HOME", os.path.join(cache, "torch")))


def get_dir() -> str:
    """The hub's directory: ``set_dir``'s, else ``$TORCH_HOME/hub`` (``$TORCH_HOME``
    defaulting to ``$XDG_CACHE_HOME/torch``, that to ``~/.cache/torch``)."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead", stacklevel=2)
    return _hub_dir if _hub_dir is not None else os.path.join(_get_torch_home(), "hub")


def set_dir(d: str | os.PathLike) -> None:
    global _hub_dir
    _hub_dir = os.path.expanduser(d)


def download_url_to_file(
    url: str, dst: str, hash_prefix: str | None = None, progress: bool = True
) -> None:
    """Download ``url`` to ``dst`` through a temporary file beside it, moved into place only
    when complete and, given ``hash_prefix``, when its SHA-256 starts with it (else
    RuntimeError, nothing written)."""
    dst = os.path.expanduser(dst)
    tmp = f"{dst}.{uuid.uuid4().hex}.partial"
    try:
        with open(tmp, "xb") as f, urlopen(Request(url, headers={"User-Agent": "torch.hub"})) as u:
            size = u.info().get("Content-Length")
            sha256 = hashlib.sha256()
            bar = tqdm(
                total=int(size) if size else None,
                disable=not progress,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
            )
            with bar:
                while buffer := u.read(_CHUNK):
                    f.write(buffer)
                    sha256.update(buffer)
                    bar.update(len(buffer))
        digest = sha256.hexdigest()
        if hash_prefix is not None and not digest.startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _extract(archive: zipfile.ZipFile, to: str) -> None:
    """Extract ``archive`` into ``to``, refusing a member that would land outside it."""
    root = os.path.realpath(to)
    for member in archive.namelist():
        path = os.path.realpath(os.path.join(root, member))
        if os.path.commonpath([root, path]) != root:
            raise ValueError(f"Zip file contains a path outside the target directory: {member}")
    archive.extractall(root)


def load_state_dict_from_url(
    url: str,
    model_dir: str | None = None,
    map_location=None,
    progress: bool = True,
    check_hash: bool = False,
    file_name: str | None = None,
    weights_only: bool = False,
):
    """What ``staged.load`` reads from the file at ``url``, downloaded once into
    ``model_dir`` (default ``<get_dir()>/checkpoints``) under ``file_name`` or the URL's
    name; a cached file is read without downloading. ``check_hash``: the name's
    ``-<hex>.`` part must start the file's SHA-256. A zip of one file (torch's format
    before 1.6) is extracted and that file read."""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn(
            "TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead", stacklevel=2
        )
    model_dir = model_dir if model_dir is not None else os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name if file_name is not None else os.path.basename(urlparse(url).path)
    cached = os.path.join(model_dir, name)
    if not os.path.exists(cached):
        sys.stdout.write(f'Downloading: "{url}" to {cached}\n')
        found = HASH_REGEX.search(name) if check_hash else None
        download_url_to_file(url, cached, found.group(1) if found else None, progress)
    if zipfile.is_zipfile(cached):
        with zipfile.ZipFile(cached) as archive:
            members = archive.infolist()
            if len(members) == 1 and not members[0].is_dir():  # a legacy zip of one file
                warnings.warn(
                    "Falling back to the old format < 1.6. This support will be deprecated in "
                    "favor of default zipfile format introduced in 1.6. Please redo "
                    "torch.save() to save it in the new zipfile format.",
                    FutureWarning,
                    stacklevel=2,
                )
                _extract(archive, model_dir)
                cached = os.path.join(model_dir, members[0].filename)
    return _load(cached, map_location=map_location, weights_only=weights_only)


def _parse_repo(github: str) -> tuple[str, str, str]:
    """``owner/name[:ref]`` with the default ref found as torch's: ``main`` where GitHub has
    it, else ``master``; offline, whichever the cache holds."""
    info, _, ref = github.partition(":")
    owner, _, name = info.partition("/")
    if not owner or not name or "/" in name:
        raise ValueError(
            f'Invalid GitHub repository "{github}": expected "owner/name" or '
            '"owner/name:ref" (or source="local" for a directory)'
        )
    if ref:
        return owner, name, ref
    try:
        with urlopen(f"https://github.com/{owner}/{name}/tree/main/"):
            return owner, name, "main"
    except HTTPError as err:
        if err.code == 404:
            return owner, name, "master"
        raise
    except URLError as err:
        for ref in ("main", "master"):
            if os.path.exists(os.path.join(get_dir(), f"{owner}_{name}_{ref}")):
                return owner, name, ref
        raise RuntimeError(
            "It looks like there is no internet connection and the repo could not be found "
            f"in the cache ({get_dir()})"
        ) from err


def _check_trusted(owner: str, name: str, owner_name_ref: str, trust_repo) -> None:
    """torch's ``trust_repo``: True trusts and records the repository; "check" asks (as
    False always does) unless it is recorded in ``<hub>/trusted_list``, was downloaded
    before, or belongs to PyTorch's or Meta's organisations."""
    hub = get_dir()
    listed = os.path.join(hub, "trusted_list")
    trusted = []
    if os.path.exists(listed):
        with open(listed) as f:
            trusted = f.read().split()
    owner_name = f"{owner}_{name}"
    is_trusted = (
        owner_name in trusted
        or os.path.isdir(os.path.join(hub, owner_name_ref))
        or owner in _TRUSTED_OWNERS
    )
    if trust_repo is False or (trust_repo == "check" and not is_trusted):
        answer = input(
            f"The repository {owner_name} does not belong to the list of trusted repositories "
            "and as such cannot be downloaded. Do you trust this repository and wish to add it "
            "to the trusted list of repositories (y/N)?"
        ).lower()
        if answer in ("n", "no", ""):
            raise Exception("Untrusted repository.")  # torch's type and message  # noqa: TRY002
        if answer not in ("y", "yes"):
            raise ValueError(f"Unrecognized response {answer}.")
    if not is_trusted:
        with open(listed, "a") as f:
            f.write(owner_name + "\n")


def _validate_ref(owner: str, name: str, ref: str) -> None:
    """Raise ValueError unless ``ref`` is a branch, tag or commit of ``owner/name`` itself
    (GitHub serves a fork's commits under the original's name too)."""
    headers = {"Accept": "application/vnd.github.v3+json"}
    if token := os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"token {token}"
    for kind in ("branches", "tags"):
        page = 1
        while True:
            url = f"https://api.github.com/repos/{owner}/{name}/{kind}?per_page=100&page={page}"
            with urlopen(Request(url, headers=headers)) as r:
                entries = json.loads(r.read().decode("utf-8"))
            if not entries:
                break
            if any(e["name"] == ref or e["commit"]["sha"].startswith(ref) for e in entries):
                return
            page += 1
    raise ValueError(
        f"Cannot find {ref} in https://github.com/{owner}/{name}. If it's a commit from a "
        "forked repo, please call hub.load() with forked repo directly."
    )


def _repo_dir(github: str, force_reload: bool, trust_repo, verbose: bool, skip_validation):
    """The local copy of a GitHub repository at a ref, ``<hub>/<owner>_<name>_<ref>``,
    downloaded (GitHub's zip of it) where missing or ``force_reload``."""
    hub = get_dir()
    os.makedirs(hub, exist_ok=True)
    owner, name, ref = _parse_repo(github)
    owner_name_ref = "_".join([owner, name, ref.replace("/", "_")])
    repo_dir = os.path.join(hub, owner_name_ref)
    _check_trusted(owner, name, owner_name_ref, trust_repo)
    if not force_reload and os.path.exists(repo_dir):
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    if not skip_validation:
        _validate_ref(owner, name, ref)
    cached = os.path.join(hub, ref.replace("/", "_") + ".zip")
    url = f"https://github.com/{owner}/{name}/zipball/{ref}"
    sys.stdout.write(f'Downloading: "{url}" to {cached}\n')
    download_url_to_file(url, cached, progress=False)
    with zipfile.ZipFile(cached) as archive:
        top = os.path.join(hub, archive.infolist()[0].filename)
        shutil.rmtree(top, ignore_errors=True)
        _extract(archive, hub)
    os.remove(cached)
    shutil.rmtree(repo_dir, ignore_errors=True)
    shutil.move(top, repo_dir)
    return repo_dir


@contextlib.contextmanager
def _hubconf(directory: str):
    """The ``hubconf.py`` module of ``directory``, imported with the directory first on
    ``sys.path``; its ``dependencies`` must all be importable."""
    sys.path.insert(0, directory)
    try:
        path = os.path.join(directory, "hubconf.py")
        spec = importlib.util.spec_from_file_location("hubconf", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        missing = [
            d for d in getattr(module, "dependencies", ()) if importlib.util.find_spec(d) is None
        ]
        if missing:
            raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
        yield module
    finally:
        sys.path.remove(directory)


def _entry(module, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    func = getattr(module, model, None)
    if not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def list(  # noqa: A001  (torch's name)
    github, force_reload=False, skip_validation=False, trust_repo="check", verbose=True
) -> builtins.list[str]:
    """The entry points (public callables) of the repository's ``hubconf.py``."""
    directory = _repo_dir(github, force_reload, trust_repo, verbose, skip_validation)
    with _hubconf(directory) as module:
        return [f for f in dir(module) if callable(getattr(module, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo="check"):  # noqa: A001
    """The docstring of entry point ``model``."""
    directory = _repo_dir(github, force_reload, trust_repo, True, skip_validation)
    with _hubconf(directory) as module:
        return _entry(module, model).__doc__


def load(
    repo_or_dir,
    model,
    *args,
    source="github",
    trust_repo="check",
    force_reload=False,
    verbose=True,
    skip_validation=False,
    **kwargs,
):
    """``model(*args, **kwargs)``, ``model`` an entry point of ``hubconf.py`` in a GitHub
    repository (``source="github"``, ``"owner/name[:ref]"``, downloaded once into the hub)
    or a local directory (``source="local"``)."""
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        repo_or_dir = _repo_dir(repo_or_dir, force_reload, trust_repo, verbose, skip_validation)
    with _hubconf(repo_or_dir) as module:
        return _entry(module, model)(*args, **kwargs)
