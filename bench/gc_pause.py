"""A full garbage collection's pause in the two long-lived processes of a rollout: the driver (the
controller's process) and the engine actor (vLLM's front end), with the startup heap frozen and not.

    PYTHONPATH=src .venv/bin/python bench/gc_pause.py

Starts the quickstart's engine as a run does, then times ``gc.collect()`` (median of 5) in each
process, unfrozen and after ``freeze_startup_heap``; prints one JSON line.
"""

from __future__ import annotations

import gc
import json
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def collection(repeats: int = 5) -> dict:
    """The median seconds of a full collection here, and the objects it walks."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        gc.collect()
        seconds.append(time.perf_counter() - start)
    return {"seconds": statistics.median(seconds), "tracked_objects": len(gc.get_objects())}


def unfrozen_then_frozen(_actor=None) -> dict:
    from flywheel.engines.heap import freeze_startup_heap

    gc.unfreeze()
    unfrozen = collection()
    freeze_startup_heap()
    return {"unfrozen": unfrozen, "frozen": collection()}


def main() -> None:
    import ray

    from flywheel.cluster.workers import engine_group, start_engines
    from flywheel.config import load_config

    config = load_config(REPO / "configs/quickstart.yaml", ["run.progress=false"])
    [engine] = start_engines(engine_group(config))
    try:
        driver = unfrozen_then_frozen()
        actor = ray.get(engine.actor.__ray_call__.remote(unfrozen_then_frozen))
    finally:
        engine.shutdown()
        ray.shutdown()
    print(json.dumps({"driver": driver, "engine_actor": actor}), flush=True)


if __name__ == "__main__":
    main()
