"""Layers around dispatch (vmap, forward AD, the profiler) installed from two threads at
once both stay installed."""

import threading

from staged.eager import dispatch


def test_layers_set_from_two_threads_both_stay():
    first, second_done = threading.Event(), threading.Event()

    def wrap_a(fn):
        if not first.is_set():  # the first composition waits while the other thread sets
            first.set()
            second_done.wait(timeout=2)  # (the fix makes it wait for this one instead)
        return ("a", fn)

    def set_b():
        first.wait()
        dispatch.set_layer("zz_b", lambda fn: ("b", fn))
        second_done.set()

    t = threading.Thread(target=set_b)
    t.start()
    try:
        dispatch.set_layer("zz_a", wrap_a)
        t.join()
        bound, names = dispatch._bind[0], []
        while isinstance(bound, tuple):
            names.append(bound[0])
            bound = bound[1]
    finally:
        dispatch.set_layer("zz_a", None)
        dispatch.set_layer("zz_b", None)
    assert names == ["b", "a"] and bound is dispatch.apply
