"""The cores of an asynchronous run on one CPU machine: the engines on one half, the trainer on the other.

With rollout.max_staleness > 0 the engines generate the next batch while the trainer trains. On a CPU both sides
then run at once, and left to the scheduler their compute threads take turns on the same cores; split, each runs
on its own (the quickstart, README: 1.26 s per step so, against 2.07 s synchronous on all cores). The split is
made only where nothing was chosen by hand (engine.cpu_bind 'auto', trainer.cpu_affinity unset), on a local
machine without a GPU, for one engine (no second rollout replica, no evaluation engine: engine.cpu_bind is one
value for them all, so they would share the half) and where each trainer rank gets a core of its own.
The actor builder (cluster/workers.py, ``run_spec``) applies it to every run whose actors it starts, supervised
or not.
"""

from __future__ import annotations

from collections.abc import Iterable

from flywheel.config import Config


def halves(cores: Iterable[int]) -> tuple[list[int], list[int]]:
    """The engines' cores (the first half, rounded up) and the trainer's (the rest)."""
    ordered = sorted(set(cores))
    cut = len(ordered) - len(ordered) // 2
    return ordered[:cut], ordered[cut:]


def as_cpu_list(cores: Iterable[int]) -> str:
    """A Linux CPU list of ``cores``: [0, 1, 2, 5] -> '0-2,5'."""
    ordered, runs = sorted(set(cores)), []
    for core in ordered:
        if runs and core == runs[-1][1] + 1:
            runs[-1][1] = core
        else:
            runs.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def split_for_async(config: Config, cores: Iterable[int], gpu: bool) -> tuple[Config, str | None]:
    """``config`` with its engines and trainer on separate halves of ``cores`` where an asynchronous run on
    this machine asks for it, and the sentence saying so; else ``config`` unchanged and None."""
    engine_cores, trainer_cores = halves(cores)
    wanted = (
        config.rollout.max_staleness > 0
        and getattr(config.engine, "cpu_bind", None) == "auto"
        and config.trainer.cpu_affinity is None
        and config.cluster.address is None
        and not gpu
        and config.rollout.engines == 1
        and config.eval.engines == 0
        and 1 <= config.trainer.ranks <= len(trainer_cores)
    )
    if not wanted:
        return config, None
    threads = min(config.trainer.threads, len(trainer_cores) // config.trainer.ranks)
    engine = config.engine.model_copy(update={"cpu_bind": as_cpu_list(engine_cores)})
    trainer = config.trainer.model_copy(update={"cpu_affinity": trainer_cores, "threads": threads})
    note = (
        f"asynchronous run (rollout.max_staleness={config.rollout.max_staleness}): engines on cores {as_cpu_list(engine_cores)}, "
        f"trainer on cores {as_cpu_list(trainer_cores)} with {threads} thread(s) per rank; set engine.cpu_bind or trainer.cpu_affinity to choose"
    )
    return config.model_copy(update={"engine": engine, "trainer": trainer}), note
