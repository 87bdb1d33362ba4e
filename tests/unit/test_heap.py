"""The startup heap is frozen out of garbage collection for a block and back under it afterwards, and what
becomes unreachable meanwhile is still freed."""

import gc
import weakref

from flywheel.engines.heap import startup_heap_frozen


class Node:
    pass


def test_the_startup_heap_is_frozen_for_the_block_and_collected_again_after_it():
    assert gc.get_freeze_count() == 0
    startup = Node()
    startup.self = startup  # a cycle alive at startup
    with startup_heap_frozen():
        assert gc.get_freeze_count() > 1000  # the interpreter's and pytest's objects
        frozen_cycle = weakref.ref(startup)
        del startup
        gc.collect()
        assert frozen_cycle() is not None  # frozen: its cycle waits for the unfreeze
        fresh = Node()
        fresh.self = fresh
        fresh_cycle = weakref.ref(fresh)
        del fresh
        gc.collect()
        assert fresh_cycle() is None  # allocated since: collected as usual
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert frozen_cycle() is None


def test_an_inner_block_leaves_the_heap_frozen_for_the_outer_one():
    with startup_heap_frozen():
        with startup_heap_frozen():
            pass
        assert gc.get_freeze_count() > 1000
    assert gc.get_freeze_count() == 0
