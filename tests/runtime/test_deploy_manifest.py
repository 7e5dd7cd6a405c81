"""A saved step's ``manifest.json`` carries the sha256 of its own canonical JSON
(``manifest_sha256``), checked by ``load`` as the other files' are (Note [trusting a saved
step]): an edited state shape loaded without complaint."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import staged
from staged.runtime.deploy import IntegrityError, manifest_sha256


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A step ``w -= 0.5 * x`` called once (w = -0.5) and saved."""
    w = staged.zeros(3, requires_grad=True)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        with staged.no_grad():
            w.sub_(0.5 * w.grad)
            w.grad = None
        return loss.detach()

    f = staged.compile(step)
    f(staged.ones(3))
    out = tmp_path_factory.mktemp("saved")
    f.save(out)
    return out


@pytest.fixture
def copy(saved, tmp_path):
    return shutil.copytree(saved, tmp_path / "step")


def _manifest(d) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _write(d, m, **dumps) -> None:
    (d / "manifest.json").write_text(json.dumps(m, **dumps))


def test_the_manifest_records_its_own_sha256_and_a_reformatted_one_loads(copy):
    m = _manifest(copy)
    assert len(m["manifest_sha256"]) == 64
    assert m["manifest_sha256"] == manifest_sha256(m)
    _write(copy, dict(reversed(m.items())), indent=5)  # canonical JSON: same content
    step = staged.runtime.load(copy)
    assert step(np.ones(3, np.float32)).item() == -1.5
    step.save(copy / "again")  # a re-saved step records the sha256 of its new manifest
    again = _manifest(copy / "again")
    assert again["manifest_sha256"] == manifest_sha256(again)
    assert staged.runtime.load(copy / "again")(np.ones(3, np.float32)).item() == -3.0


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: m["state"][0].__setitem__("shape", [2]),
        lambda m: m["args"][0].__setitem__("dtype", "float64"),
        lambda m: m.__setitem__("manifest_sha256", "0" * 64),
    ],
    ids=["state shape", "argument dtype", "recorded sha256"],
)
def test_an_edited_manifest_is_refused_naming_it(copy, edit):
    m = _manifest(copy)
    edit(m)
    _write(copy, m, indent=2)
    with pytest.raises(
        IntegrityError,
        match=r"step/manifest.json: sha256 [0-9a-f]{64} does not match its recorded "
        r"[0-9a-f]{64}: the file was damaged or changed after saving",
    ):
        staged.runtime.load(copy)


def test_a_manifest_saved_before_the_check_loads(copy):
    """The hashes find damage, not intent: a manifest of this format without its own
    sha256 (saved before the check) loads, so no saved step is lost."""
    m = _manifest(copy)
    del m["manifest_sha256"]
    _write(copy, m, indent=2)
    assert staged.runtime.load(copy)(np.ones(3, np.float32)).item() == -1.5
