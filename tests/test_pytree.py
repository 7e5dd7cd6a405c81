"""``staged.utils._pytree`` against torch 2.13's ``torch.utils._pytree`` on the same
objects: leaves and their order, TreeSpec repr, equality and hash, round trips, key paths,
``treespec_dumps`` strings, user-registered nodes, the map/all/any family, staged's return
types against torch's structseqs, and errors by type and message; and the module reached
as ``torch.utils._pytree`` under ``staged.as_torch()``."""

from __future__ import annotations

import copy
import dataclasses
import enum
import pickle
import sys
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple

import numpy as np
import pytest
import torch
import torch.utils._pytree as tp

import staged
import staged.utils._pytree as sp
from tests import jobs

LIBS = [tp, sp]
Point = namedtuple("Point", "x y")


class Color(enum.Enum):
    RED = 1


TREES = {
    "leaf": lambda: 3,
    "none": lambda: None,
    "empty": lambda: ((), [], {}),
    "nested": lambda: {"a": (1, [2, 3]), "b": None, "c": [[4], {"d": 5.0}]},
    "namedtuple": lambda: [Point(1, (2, 3)), Point(x=[], y="s")],
    "ordered": lambda: OrderedDict([("z", 1), ("a", (2, 3))]),
    "defaultdict": lambda: defaultdict(list, {"k": [1, 2], 3: 4}),
    "deque": lambda: (deque([1, [2]], maxlen=4), deque([3])),
    "int keys": lambda: {2: "b", 1: "a", (0, 1): [None]},
    "subclasses are leaves": lambda: [type("L", (list,), {})([1, 2]), staged.Size([2, 3])],
}
SERIALIZABLE = ["leaf", "none", "empty", "nested", "ordered", "defaultdict", "deque"]


def _both(fn):
    """``fn(lib)`` for torch's module, then staged's."""
    return [fn(lib) for lib in LIBS]


def _same_error(fn):
    """``fn(lib)`` raises the same exception type with the same message in both."""
    errors = []
    for lib in LIBS:
        with pytest.raises(Exception) as e:
            fn(lib)
        errors.append(e.value)
    theirs, ours = errors
    assert type(ours) is type(theirs) and str(ours) == str(theirs), (ours, theirs)
    return ours


@pytest.fixture
def registered():
    """Deregisters, after the test, the classes the test registered in both libraries."""
    classes: list = []
    yield classes
    for cls in classes:  # as _deregister_pytree_node, which fails for a second unnamed class
        for lib in LIBS:
            del lib.SUPPORTED_NODES[cls], lib.SUPPORTED_SERIALIZED_TYPES[cls]
            lib.CONSTANT_NODES.discard(cls)
            names = lib.SERIALIZED_TYPE_TO_PYTHON_TYPE
            for name in [n for n, c in names.items() if c is cls]:
                del names[name]


# --- flatten, unflatten, specs -----------------------------------------------------------------
@pytest.mark.parametrize("name", list(TREES))
def test_flatten_unflatten_round_trip_as_torchs(name):
    tree = TREES[name]()
    (theirs, tspec), (ours, spec) = _both(lambda lib: lib.tree_flatten(tree))
    assert len(ours) == len(theirs) and all(a is b for a, b in zip(ours, theirs))
    assert repr(spec) == repr(tspec) and str(spec) == str(tspec)
    counts = ("num_nodes", "num_leaves", "num_children")
    assert [getattr(spec, c) for c in counts] == [getattr(tspec, c) for c in counts]
    assert spec.context == tspec.context and spec.is_leaf() == tspec.is_leaf()
    assert [repr(c) for c in spec.children()] == [repr(c) for c in tspec.children()]
    rebuilt = sp.tree_unflatten(ours, spec)
    assert rebuilt == tree and type(rebuilt) is type(tree)
    assert sp.tree_unflatten(spec, ours) == tree  # either order, as torch
    assert sp.tree_leaves(tree) == tp.tree_leaves(tree)
    assert repr(sp.tree_structure(tree)) == repr(tp.tree_structure(tree))


@pytest.mark.parametrize("name", SERIALIZABLE)
def test_treespec_dumps_is_torchs_string_and_loads_back(name):
    tree = TREES[name]()
    theirs, ours = _both(lambda lib: lib.treespec_dumps(lib.tree_structure(tree)))
    assert ours == theirs
    spec = sp.treespec_loads(ours)
    assert spec == sp.tree_structure(tree) and repr(spec) == repr(tp.treespec_loads(theirs))


@pytest.mark.parametrize("name", list(TREES))
def test_key_paths_as_torchs(name):
    tree = TREES[name]()
    theirs, ours = _both(lambda lib: lib.tree_leaves_with_path(tree))
    assert [(repr(p), sp.keystr(p)) for p, _ in ours] == [
        (repr(p), tp.keystr(p)) for p, _ in theirs
    ]
    assert all(sp.key_get(tree, p) is leaf for p, leaf in ours)
    pairs, spec = sp.tree_flatten_with_path(tree)
    assert [leaf for _, leaf in pairs] == sp.tree_leaves(tree) and spec == sp.tree_structure(tree)


def test_keys_print_and_compare_as_torchs():
    for key in ("SequenceKey(3)", "MappingKey('a')", "MappingKey((1, 2))", "GetAttrKey('w')"):
        theirs, ours = _both(lambda lib: eval(f"lib.{key}"))
        assert (repr(ours), str(ours), hash(ours)) == (repr(theirs), str(theirs), hash(theirs))
        assert ours == eval(f"sp.{key}")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sp.SequenceKey(0).idx = 1


def test_is_leaf_argument_stops_the_walk_as_torchs():
    tree = {"a": (1, 2), "b": [(3,), 4], "c": Point(5, 6)}
    is_tuple = lambda x: isinstance(x, tuple)
    (theirs, tspec), (ours, spec) = _both(lambda lib: lib.tree_flatten(tree, is_leaf=is_tuple))
    assert ours == theirs == [(1, 2), (3,), 4, Point(5, 6)] and repr(spec) == repr(tspec)
    theirs, ours = _both(lambda lib: lib.tree_leaves_with_path(tree, is_leaf=is_tuple))
    assert [(sp.keystr(p), v) for p, v in ours] == [(tp.keystr(p), v) for p, v in theirs]
    assert _both(lambda lib: lib.tree_is_leaf([1], is_leaf=lambda x: True)) == [True, True]
    assert _both(lambda lib: lib.tree_is_leaf({"a": None})) == [False, False]


def test_treespec_equality_hash_and_leafspec_as_torchs():
    a, b = sp.tree_structure({"x": [1, 2]}), sp.tree_structure({"x": ["u", "v"]})
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != sp.tree_structure({"y": [1, 2]}) and a != sp.tree_structure({"x": (1, 2)})
    assert sp.tree_structure(Point(1, 2)) != sp.tree_structure((1, 2))
    assert len({a, b, sp.tree_structure([1])}) == 2
    leaf = sp.TreeSpec(list, None, [sp.tree_structure(0)] * 2)
    assert leaf == sp.tree_structure([7, 8]) and not sp.tree_structure(0) == 0
    for lib in LIBS:
        with pytest.warns(FutureWarning, match="`isinstance\\(treespec, LeafSpec\\)`"):
            s = lib.LeafSpec()
        assert repr(s) == "*" and s == lib.tree_structure(0) and s.is_leaf()
        with pytest.warns(FutureWarning, match="children_specs"):
            assert lib.tree_structure([1]).children_specs == [s]
        assert lib.treespec_leaf() is lib.tree_structure(0)
        nested = lib.tree_structure(TREES["nested"]())
        with warnings.catch_warnings():  # torch's copies construct LeafSpecs, which warn
            warnings.simplefilter("ignore" if lib is tp else "error", FutureWarning)
            assert copy.deepcopy(nested) == nested == pickle.loads(pickle.dumps(nested))
    theirs, ours = _both(
        lambda lib: lib.treespec_dict(a=lib.treespec_tuple([lib.treespec_leaf()] * 2))
    )
    assert repr(ours) == repr(theirs) and ours == sp.tree_structure({"a": (0, 0)})
    assert (
        _both(lambda lib: lib.treespec_pprint(lib.tree_structure(TREES["nested"]())))
        == ["{'a': (*, [*, *]), 'b': *, 'c': [[*], {'d': *}]}"] * 2
    )


def test_flatten_up_to_accepts_what_torchs_does():
    spec = {"a": [1, 2], "b": deque([3], maxlen=2)}
    for lib in LIBS:
        s = lib.tree_structure(spec)
        other = OrderedDict(b=deque([[9]]), a=[(5,), 6])  # another dict kind, keys reordered
        assert s.flatten_up_to(other) == [(5,), 6, [9]]


# --- map, all, any -----------------------------------------------------------------------------
def test_tree_map_family_as_torchs():
    tree = {"a": (1, 2.5), "b": [3, "s", None], "c": Point(4, True)}
    assert (
        _both(lambda lib: lib.tree_map(lambda x: [x], tree))
        == [sp.tree_map(lambda x: [x], tree)] * 2
    )
    rest = {"a": [10, 20], "b": (30, 40, 50), "c": Point(60, [70])}  # lists for tuples: no
    _same_error(lambda lib: lib.tree_map(lambda x, y: (x, y), tree, rest))
    prefix = [1, {"k": 2}]
    full = [[10, 11], {"k": (12, Point(13, 14))}]
    theirs, ours = _both(lambda lib: lib.tree_map(lambda x, y: (x, y), prefix, full))
    assert ours == theirs == [(1, [10, 11]), {"k": (2, (12, Point(13, 14)))}]
    for kinds in (int, (int, float), int | str):
        theirs, ours = _both(lambda lib: lib.tree_map_only(kinds, lambda x: x * 2, tree))
        assert ours == theirs
    assert (
        _both(lambda lib: lib.tree_map_only(lambda x: x is None, lambda x: 0, tree))
        == [{"a": (1, 2.5), "b": [3, "s", 0], "c": Point(4, True)}] * 2
    )
    _same_error(lambda lib: lib.tree_map_only(3, lambda x: x, tree))
    for lib in LIBS:
        seen: list = []
        target = {"x": [1, [2, 3]], "y": 4}
        assert lib.tree_map_(seen.append, target) is target and seen == [1, 2, 3, 4]
        bufs = {"x": [bytearray(), 1], "y": bytearray(b"a")}
        assert lib.tree_map_only_(bytearray, lambda b: b.append(48), bufs) is bufs
        assert bufs == {"x": [bytearray(b"0"), 1], "y": bytearray(b"a0")}
        lists = {"x": [[], [1]]}  # a list is a node, unless is_leaf says it is a leaf
        is_list = lambda x: isinstance(x, list) and x != lists["x"]
        assert lib.tree_map_only_(list, lambda v: v.append(0), lists, is_leaf=is_list) is lists
        assert lists == {"x": [[0], [1, 0]]}
    preds = [
        ("tree_all", (lambda x: x is not None, tree)),
        ("tree_any", (lambda x: x is None, tree)),
        ("tree_all_only", (int, lambda x: x > 0, tree)),
        ("tree_any_only", ((str, float), lambda x: x == "t", tree)),
        ("tree_all", (lambda x: False, [])),
    ]
    for name, args in preds:
        theirs, ours = _both(lambda lib: getattr(lib, name)(*args))
        assert ours == theirs, name


def test_tree_map_with_path_as_torchs():
    tree = {"a": [1, (2,)], "b": Point(3, 4)}
    rest = {"a": [10, (20,)], "b": Point(30, 40)}
    theirs, ours = _both(
        lambda lib: lib.tree_map_with_path(lambda p, x, y: (lib.keystr(p), x + y), tree, rest)
    )
    assert ours == theirs


def test_broadcast_to_and_flatten_as_torchs():
    spec_tree = ([0, 0], {"a": (0, 0, 0)})
    for prefix in (1, (None, 2), ([3, 4], {"a": 5}), ([3], 2)):
        theirs, ours = _both(
            lambda lib: lib._broadcast_to_and_flatten(prefix, lib.tree_structure(spec_tree))
        )
        assert ours == theirs, prefix


# --- staged's return types flatten as torch's structseqs -----------------------------------------
@pytest.mark.parametrize("op", ["max", "sort", "topk"])
def test_return_types_flatten_as_torchs(op):
    x = np.arange(6.0).reshape(2, 3)
    args = {"max": (0,), "sort": (), "topk": (2,)}[op]
    theirs = getattr(torch, op)(torch.tensor(x), *args)
    ours = getattr(staged, op)(staged.tensor(x), *args)
    (tleaves, tspec), (leaves, spec) = tp.tree_flatten(theirs), sp.tree_flatten(ours)
    assert repr(spec) == repr(tspec) and spec.type is type(ours)
    for a, b in zip(leaves, tleaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), b.numpy())
    assert [repr(p) for p, _ in sp.tree_leaves_with_path(ours)] == [
        repr(p) for p, _ in tp.tree_leaves_with_path(theirs)
    ]
    rebuilt = sp.tree_unflatten(leaves, spec)
    assert type(rebuilt) is type(ours) and all(a is b for a, b in zip(rebuilt, ours))
    assert sp.tree_map(lambda t: t.shape, ours) == type(ours)(*(t.shape for t in ours))
    with pytest.raises(NotImplementedError, match="No registered serialization name"):
        sp.treespec_dumps(spec)


def test_namedtuple_is_not_a_structseq():
    r = staged.max(staged.ones(2, 3), 0)
    assert sp.is_namedtuple(r) and not sp.is_structseq(r)  # torch's is a C structseq
    assert tp.is_structseq(torch.max(torch.ones(2, 3), 0)) and sp.is_structseq(sys.version_info)
    assert _both(lambda lib: (lib.is_namedtuple(Point), lib.is_namedtuple_instance(Point(1, 2))))
    assert _both(lambda lib: lib.is_namedtuple_class(tuple)) == [False, False]


# --- user nodes ----------------------------------------------------------------------------------
class Pair:
    def __init__(self, first, second, tag="t"):
        self.first, self.second, self.tag = first, second, tag

    def __eq__(self, other):
        return isinstance(other, Pair) and vars(self) == vars(other)


def _register_pair(lib, **kw):
    lib.register_pytree_node(
        Pair,
        lambda p: ([p.first, p.second], {"tag": p.tag, "color": Color.RED}),
        lambda values, ctx: Pair(*values, tag=ctx["tag"]),
        serialized_type_name="tests.test_pytree.Pair",
        flatten_with_keys_fn=lambda p: (
            [(lib.GetAttrKey("first"), p.first), (lib.GetAttrKey("second"), p.second)],
            {"tag": p.tag, "color": Color.RED},
        ),
        **kw,
    )


def test_a_user_node_flattens_as_in_torch(registered):
    for lib in LIBS:
        _register_pair(lib)
    registered.append(Pair)
    tree = {"p": Pair([1, 2], Pair(3, None, tag="in")), "q": 4}
    (theirs, tspec), (ours, spec) = _both(lambda lib: lib.tree_flatten(tree))
    assert ours == theirs == [1, 2, 3, None, 4] and repr(spec) == repr(tspec)
    assert sp.tree_unflatten(ours, spec) == tree
    paths = _both(lambda lib: [lib.keystr(p) for p, _ in lib.tree_leaves_with_path(tree)])
    first, second = "['p'].first", "['p'].second"
    assert (
        paths[0]
        == paths[1]
        == [f"{first}[0]", f"{first}[1]", f"{second}.first"]
        + [
            f"{second}.second",
            "['q']",
        ]
    )
    theirs, ours = _both(lambda lib: lib.treespec_dumps(lib.tree_structure(tree)))
    assert ours == theirs and "__enum__" in ours  # enums in a context, as torch writes
    assert sp.treespec_loads(ours) == spec
    _same_error(lambda lib: _register_pair(lib))
    _same_error(lambda lib: lib.tree_structure(tree).flatten_up_to({"p": Pair(1, 2, "x"), "q": 0}))
    _same_error(lambda lib: lib.tree_structure(tree).flatten_up_to({"p": (1, 2), "q": 0}))


def test_custom_dumpable_context_and_keyless_nodes_as_torchs(registered):
    class Box:
        def __init__(self, items):
            self.items = items

    for lib in LIBS:
        lib.register_pytree_node(
            Box,
            lambda b: (list(b.items), len(b.items)),
            lambda values, n: Box(list(values)),
            serialized_type_name="tests.Box",
            to_dumpable_context=lambda n: {"n": n},
            from_dumpable_context=lambda d: d["n"],
        )
    registered.append(Box)
    tree = [Box([1, (2, 3)])]
    theirs, ours = _both(lambda lib: lib.treespec_dumps(lib.tree_structure(tree)))
    assert ours == theirs and sp.treespec_loads(ours) == sp.tree_structure(tree)
    _same_error(lambda lib: lib.tree_leaves_with_path(tree))  # no flatten_with_keys_fn
    _same_error(
        lambda lib: lib.register_pytree_node(
            type("C", (), {}), lambda c: ([], None), lambda v, c: c, to_dumpable_context=str
        )
    )


def test_unserializable_specs_fail_as_torchs(registered):
    class Bag:
        pass

    for lib in LIBS:
        lib.register_pytree_node(Bag, lambda b: ([], object()), lambda v, c: Bag())
    registered.append(Bag)
    _same_error(lambda lib: lib.treespec_dumps(lib.tree_structure([Bag()])))
    _same_error(lambda lib: lib.treespec_dumps(lib.tree_structure(Point(1, 2))))
    _same_error(lambda lib: lib.treespec_dumps(lib.tree_structure([1]), protocol=2))
    _same_error(lambda lib: lib.treespec_loads('[1, {"type": "no.Such", "context": 0}]'))
    _same_error(lambda lib: lib.treespec_dumps([1]))


def test_register_dataclass_and_constant_as_torchs(registered):
    @dataclasses.dataclass
    class Config:
        a: object
        b: object = None
        c: int = dataclasses.field(default=0, init=False)

    @dataclasses.dataclass(frozen=True)
    class Norm:
        kind: str

    for lib in LIBS:
        lib.register_dataclass(Config)
        lib.register_constant(Norm)
    registered += [Config, Norm]
    tree = [Config([1, 2]), Config(3, b=Norm("l2"))]
    (theirs, tspec), (ours, spec) = _both(lambda lib: lib.tree_flatten(tree))
    assert ours == theirs and repr(spec) == repr(tspec)
    assert sp.tree_unflatten(ours, spec) == tree
    assert [sp.keystr(p) for p, _ in sp.tree_leaves_with_path(tree)] == [
        tp.keystr(p) for p, _ in tp.tree_leaves_with_path(tree)
    ]
    assert hash(spec) == hash(sp.tree_structure(tree)) and sp.is_constant_class(Norm)
    _same_error(lambda lib: lib.register_dataclass(Config, field_names=["a", "z"]))
    _same_error(lambda lib: lib.register_dataclass(Pair))
    _same_error(lambda lib: lib.register_constant(Pair.__mro__[-1]))
    _same_error(lambda lib: lib.register_constant(type("H", (), {"__eq__": lambda s, o: 1})))


def test_deprecated_register_warns_and_overwrites_as_torchs(registered):
    class Old(dict):
        pass

    def register_twice(lib):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for _ in range(2):
                lib._register_pytree_node(Old, lib._dict_flatten, lambda v, c: Old(zip(c, v)))
        return [(m.category, str(m.message)) for m in w]

    theirs, ours = _both(register_twice)
    registered.append(Old)
    assert ours == theirs and [c for c, _ in ours] == [FutureWarning, FutureWarning, UserWarning]
    assert sp.tree_unflatten(*sp.tree_flatten(Old(a=[1]))) == Old(a=[1])


# --- errors --------------------------------------------------------------------------------------
def test_errors_as_torchs(registered):
    spec = lambda lib: lib.tree_structure({"a": [1, 2], "b": (3,)})
    _same_error(lambda lib: spec(lib).unflatten([1, 2]))
    _same_error(lambda lib: lib.tree_unflatten([1, 2, 3, 4], spec(lib)))
    _same_error(lambda lib: lib.tree_unflatten([1], [2]))
    _same_error(lambda lib: spec(lib).flatten_up_to({"a": [1, 2], "c": (3,)}))
    _same_error(lambda lib: spec(lib).flatten_up_to({"a": (1, 2), "b": (3,)}))
    _same_error(lambda lib: spec(lib).flatten_up_to({"a": [1], "b": (3,)}))
    _same_error(lambda lib: lib.tree_structure(Point(1, 2)).flatten_up_to((1, 2)))
    _same_error(lambda lib: lib.register_pytree_node(dict, lib._dict_flatten, lib._dict_unflatten))

    class Twice:
        pass

    for lib in LIBS:
        lib.register_pytree_node(Twice, lambda t: ([], None), lambda v, c: Twice())
    registered.append(Twice)
    error = _same_error(lambda lib: lib.register_pytree_node(Twice, None, None))
    assert isinstance(error, ValueError) and "is already registered as pytree node" in str(error)


# --- as torch ------------------------------------------------------------------------------------
_AS_TORCH = """
import staged
staged.as_torch()
import torch.utils._pytree as pytree
import torch
import staged.utils._pytree
assert pytree is staged.utils._pytree is torch.utils._pytree, pytree
assert pytree.__name__ == "staged.utils._pytree"
class Output(dict):
    pass
torch.utils._pytree.register_pytree_node(
    Output,
    pytree._dict_flatten,
    lambda values, keys: Output(zip(keys, values)),
    serialized_type_name="m.Output",
    flatten_with_keys_fn=pytree._dict_flatten_with_keys,
)
out = pytree.tree_map_only(torch.Tensor, lambda t: t * 2, Output(x=torch.ones(2), n=3))
print(type(out).__name__, out["x"].tolist(), out["n"], pytree.treespec_dumps(pytree.tree_structure(out)))
"""


def test_reachable_as_torch_utils_pytree_under_as_torch():
    done = jobs.run([sys.executable, "-c", _AS_TORCH], timeout=240)
    assert done.returncode == 0, done.stderr
    expected = "Output [2.0, 2.0] 3 " + tp.treespec_dumps(tp.tree_structure({"x": 0, "n": 0}))
    assert done.stdout.strip() == expected.replace("builtins.dict", "m.Output")
