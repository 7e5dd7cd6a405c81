"""Python state a compiled step reads that once went unguarded: each change made between
calls must re-trace, as eager code would read the new value (the compiled calls kept the
old one, silently). Eager is the oracle at every call; trace counts show that an unchanged
value is not re-traced."""

from __future__ import annotations

import dataclasses
import enum
import warnings

import numpy as np
import pytest

import staged
from staged import nn


class Scaled(nn.Module):
    SCALE = 1.0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x):
        return self.lin(x) * self.SCALE


class Settings:
    K = 1.0
    TABLE = {"a": 2.0}


class Mode(enum.Enum):
    A = 1
    B = 2


class Cfg:
    def __init__(self, s):
        self.s = s


@dataclasses.dataclass
class Hyper:
    a: float = 1.0
    b: float = 2.0


MODEL = Scaled()
MEAN = np.array([1.0, 2.0], dtype=np.float32)
BIG = np.ones(1 << 17, dtype=np.float32)
MODE = Mode.A
FLAGS = {"a"}
BY_INDEX = {0: 2.0, (1, 2): 3.0}
WEIGHTS = {"a": 1.0, "b": 2.0}
X = staged.ones(2, 3)
LAYERS = [Cfg(2.0), Cfg(3.0)]
PAIR = (Cfg(2.0),)
NESTED = {"layers": [Cfg(1.0), Cfg(2.0)]}
HYPER = [Hyper(), Hyper(b=3.0)]
OBJ = Cfg(1.0)
SIZES = [[1.0, 2.0], [3.0]]
HISTORY = [staged.ones(1)]
LONG = [1.0] * 100


def _class_attribute(x):
    return MODEL(x)


def _user_class(x):
    return x * Settings.K + Settings.TABLE["a"]


def _array_as_tensor(x):
    return x * staged.from_numpy(MEAN).sum()


def _array_item(x):
    return x * float(MEAN[1])


def _enum(x):
    return x * (1.0 if MODE is Mode.A else 2.0)


def _set(x):
    return x * (1.0 if "b" in FLAGS else 2.0)


def _int_key(x):
    return x * BY_INDEX[0] + BY_INDEX[1, 2]


def _items_loop(x):
    for _, w in WEIGHTS.items():
        x = x * w
    return x


def _computed_key(x):
    key = "".join(["b"])
    return x * WEIGHTS[key]


def _list_of_objects(x):
    for c in LAYERS:
        x = x * c.s
    return x


def _tuple_of_objects(x):
    return x * PAIR[0].s


def _objects_in_a_dict(x):
    for c in NESTED["layers"]:
        x = x * c.s
    return x


def _dataclasses(x):
    for h in HYPER:
        x = x * h.a + h.b
    return x


def _vars(x):
    return x * sum(vars(OBJ).values())


def _asdict(x):
    d = dataclasses.asdict(HYPER[1])
    return x * d["a"] - d["b"]


def _nested_list(x):
    return x * SIZES[0][1]


def _length(x):
    return x * len(HISTORY)


def _last_of_long(x):
    return x * LONG[-1]


def _deterministic(x):
    return x * (2.0 if staged.are_deterministic_algorithms_enabled() else 1.0)


def _precision(x):
    return x * (1.0 if staged.get_float32_matmul_precision() == "highest" else 3.0)


def _set_global(name, value):
    return lambda: globals().__setitem__(name, value)


@pytest.fixture(autouse=True)
def _restore():
    yield
    Scaled.SCALE, Settings.K, Settings.TABLE["a"] = 1.0, 1.0, 2.0
    MEAN[:] = (1.0, 2.0)
    FLAGS.discard("b")
    BY_INDEX.update({0: 2.0, (1, 2): 3.0})
    WEIGHTS.update({"a": 1.0, "b": 2.0})
    globals()["MODE"] = Mode.A
    LAYERS[1].s, PAIR[0].s, NESTED["layers"][0].s, OBJ.s = 3.0, 2.0, 1.0, 1.0
    HYPER[0].a, HYPER[1].b, SIZES[0][1] = 1.0, 3.0, 2.0
    del HISTORY[1:], LONG[100:]
    staged.use_deterministic_algorithms(False)
    staged.set_float32_matmul_precision("highest")
    staged.set_default_dtype(staged.float32)


CASES = {
    "a user Module's class attribute": (_class_attribute, lambda: setattr(Scaled, "SCALE", 3.0)),
    "a user class's attribute": (_user_class, lambda: setattr(Settings, "K", 5.0)),
    "a user class's dict item": (_user_class, lambda: Settings.TABLE.__setitem__("a", 7.0)),
    "a NumPy array made a tensor": (_array_as_tensor, lambda: MEAN.__setitem__(0, 5.0)),
    "a NumPy array's item": (_array_item, lambda: MEAN.__setitem__(1, 7.0)),
    "an Enum member": (_enum, _set_global("MODE", Mode.B)),
    "a set": (_set, lambda: FLAGS.add("b")),
    "an int-keyed item": (_int_key, lambda: BY_INDEX.__setitem__(0, 4.0)),
    "a tuple-keyed item": (_int_key, lambda: BY_INDEX.__setitem__((1, 2), 6.0)),
    "a loop over a dict's items": (_items_loop, lambda: WEIGHTS.__setitem__("a", 3.0)),
    "a dict item under a computed key": (
        _computed_key,
        lambda: WEIGHTS.__setitem__("b", 5.0),
    ),
    "a list of objects' attribute": (_list_of_objects, lambda: setattr(LAYERS[1], "s", 5.0)),
    "a tuple of objects' attribute": (_tuple_of_objects, lambda: setattr(PAIR[0], "s", 7.0)),
    "an object's in a dict's list": (
        _objects_in_a_dict,
        lambda: setattr(NESTED["layers"][0], "s", 6.0),
    ),
    "a list of dataclasses' field": (_dataclasses, lambda: setattr(HYPER[0], "a", 4.0)),
    "vars(obj).values()": (_vars, lambda: setattr(OBJ, "s", 4.0)),
    "dataclasses.asdict(obj)": (_asdict, lambda: setattr(HYPER[1], "b", 6.0)),
    "a list of lists' item": (_nested_list, lambda: SIZES[0].__setitem__(1, 8.0)),
    "a list's length": (_length, lambda: HISTORY.append(staged.ones(1))),
    "the last of a long list": (_last_of_long, lambda: LONG.append(4.0)),
    "use_deterministic_algorithms": (
        _deterministic,
        lambda: staged.use_deterministic_algorithms(True),
    ),
    "float32 matmul precision": (
        _precision,
        lambda: staged.set_float32_matmul_precision("high"),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_change_between_calls_re_traces(case):
    fn, change = CASES[case]
    compiled = staged.compile(fn)
    for _ in range(2):
        np.testing.assert_allclose(compiled(X).detach().numpy(), fn(X).detach().numpy(), rtol=1e-6)
    assert compiled.traces == 1  # unchanged: served by the trace
    before = fn(X).detach().numpy()
    change()
    after = fn(X).detach().numpy()
    assert not np.allclose(before, after)  # the change matters to eager code
    np.testing.assert_allclose(compiled(X).detach().numpy(), after, rtol=1e-6)
    assert compiled.traces == 2


def test_the_default_dtype_re_traces_with_its_name_in_the_reason():
    compiled = staged.compile(lambda x: x + staged.zeros(3))
    x = staged.ones(3)
    assert compiled(x).dtype == staged.float32
    staged.set_default_dtype(staged.float64)
    out = compiled(x)  # x stays float32: the zeros made in the step are float64 now
    assert out.dtype == staged.float64
    assert "default dtype: staged.float32 -> staged.float64" in compiled.last_retrace_reason


def test_a_changed_class_attribute_is_named_in_the_reason():
    compiled = staged.compile(_class_attribute)
    compiled(X)
    Scaled.SCALE = 2.0
    compiled(X)
    assert "MODEL.SCALE: 1.0 -> 2.0" in compiled.last_retrace_reason


def test_an_instance_attribute_shadowing_the_class_one_is_what_is_guarded():
    model = Scaled()
    model.SCALE = 4.0
    compiled = staged.compile(lambda x: model(x))
    np.testing.assert_allclose(compiled(X).detach().numpy(), model(X).detach().numpy(), rtol=1e-6)
    Scaled.SCALE = 9.0  # shadowed: changes nothing
    compiled(X)
    assert compiled.traces == 1
    model.SCALE = 5.0
    np.testing.assert_allclose(compiled(X).detach().numpy(), model(X).detach().numpy(), rtol=1e-6)
    assert compiled.traces == 2


def test_an_array_too_large_to_compare_warns_that_its_changes_are_not_seen():
    compiled = staged.compile(lambda x: x * float(BIG[3]))
    with pytest.warns(
        UserWarning,
        match=r"reads the NumPy array BIG \(float32\[131072\]\).*"
        r"not seen.*torch.from_numpy\(array\)",
    ):
        compiled(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per step
        compiled(X)


def test_a_tensor_sharing_a_large_array_s_memory_sees_its_changes():
    """What the warning above says to do."""
    t = staged.from_numpy(BIG)
    compiled = staged.compile(lambda x: x * t[:3].sum())
    np.testing.assert_allclose(compiled(X).detach().numpy(), np.full((2, 3), 3.0))
    BIG[0] = 5.0
    try:
        np.testing.assert_allclose(compiled(X).detach().numpy(), np.full((2, 3), 7.0))
    finally:
        BIG[0] = 1.0


def test_a_counter_in_a_dict_of_values_is_replayed_and_named():
    """Note [binding writes]: the dict guarded whole (for loops over its items) lets its
    item's own guard replay the write and name it."""
    state = {"n": 0, "scale": 2.0}

    def step(x):
        state["n"] += 1
        return x * state["scale"] * state["n"]

    compiled = staged.compile(step)
    for n in (1, 2, 3):
        np.testing.assert_allclose(compiled(X).numpy(), np.full((2, 3), 2.0 * n))
        assert state["n"] == n
    assert "state['n']: 1 -> 2" in compiled.last_retrace_reason


def test_an_object_read_whole_is_named_by_its_dict_in_the_reason():
    compiled = staged.compile(_vars)
    compiled(X)
    OBJ.s = 4.0
    compiled(X)
    assert compiled.last_retrace_reason == "OBJ.__dict__: {'s': 1.0} -> {'s': 4.0}"
