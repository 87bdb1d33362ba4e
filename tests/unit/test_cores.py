"""The core split of an asynchronous run on one CPU machine (cluster/cores.py) and the actor specs the builder makes
from a config (cluster/workers.py)."""

from pathlib import Path

import pytest
import torch

from flywheel.cluster.cores import as_cpu_list, halves, split_for_async
from flywheel.cluster.workers import Placement, RayCluster, RewardModelSpec, bf16_note, engine_options, local_run_spec, run_spec
from flywheel.config import load_config

REPO = Path(__file__).resolve().parents[2]


def quickstart(*overrides: str):
    return load_config(REPO / "configs/quickstart.yaml", list(overrides))


def test_halves_give_the_engines_the_first_half_rounded_up():
    assert halves([1, 0]) == ([0], [1])
    assert halves([4, 5, 6]) == ([4, 5], [6])
    assert halves(range(8)) == ([0, 1, 2, 3], [4, 5, 6, 7])
    assert halves([3]) == ([3], [])


def test_cpu_lists_join_runs_of_cores():
    assert as_cpu_list([0]) == "0"
    assert as_cpu_list([5, 0, 1, 2]) == "0-2,5"
    assert as_cpu_list([1, 3, 4, 7]) == "1,3-4,7"


def test_the_shipped_quickstart_splits_two_cores():
    config, note = split_for_async(quickstart(), [0, 1], gpu=False)
    assert config.engine.cpu_bind == "0" and config.trainer.cpu_affinity == [1] and config.trainer.threads == 1
    assert note is not None and "engines on cores 0, trainer on cores 1" in note
    assert config.rollout == quickstart().rollout and config.algorithm == quickstart().algorithm  # nothing else moves


def test_trainer_threads_are_shared_among_its_ranks_and_never_raised():
    config, _ = split_for_async(quickstart("trainer.ranks=2", "trainer.threads=8"), range(8), gpu=False)
    assert config.engine.cpu_bind == "0-3" and config.trainer.cpu_affinity == [4, 5, 6, 7] and config.trainer.threads == 2
    config, _ = split_for_async(quickstart("trainer.threads=1"), range(8), gpu=False)
    assert config.trainer.threads == 1


@pytest.mark.parametrize(
    "overrides, cores, gpu",
    [
        (["rollout.max_staleness=0"], [0, 1], False),  # synchronous: each side has every core while the other waits
        (["engine.cpu_bind='0-1'"], [0, 1], False),  # chosen by hand
        (["trainer.cpu_affinity=[0]"], [0, 1], False),
        (["cluster.address=127.0.0.1:6379"], [0, 1], False),  # the workers live elsewhere
        ([], [0, 1], True),
        ([], [0], False),  # one core: nothing to split
        (["trainer.ranks=2"], [0, 1], False),  # two ranks on one core
        (["rollout.engines=2"], range(8), False),  # one cpu_bind for both replicas: they would share the half
        (["eval.engines=1"], range(8), False),
    ],
)
def test_no_split_where_it_is_not_asked_for_or_does_not_fit(overrides, cores, gpu):
    config = quickstart(*overrides)
    assert split_for_async(config, cores, gpu) == (config, None)


def test_a_supervised_run_gets_the_same_actor_specs_as_a_plain_one():
    """The actor builder's specs (cluster/workers.py) for run.supervise=true equal a plain run's: the engines
    on core 0, the trainer on core 1 with one thread, placement alike; only the run section differs."""
    plain = run_spec(quickstart(), [0, 1], gpu=False)
    supervised = run_spec(quickstart("run.supervise=true", "run.max_restarts=1"), [0, 1], gpu=False)
    assert supervised.engines == plain.engines and supervised.engines.spec.options.cpu_bind == "0"
    assert supervised.engines.placement == Placement(RayCluster(None, 2), cpus=1.0, gpu_share=0.5, labels={}, apart_from_trainer=False)
    trainer = supervised.trainer.config.trainer
    assert trainer == plain.trainer.config.trainer and (trainer.cpu_affinity, trainer.threads) == ([1], 1)
    assert supervised.trainer.gpu_share == plain.trainer.gpu_share == 0.5
    assert supervised.notes == plain.notes and "engines on cores 0, trainer on cores 1" in supervised.notes[0]
    assert supervised.config.engine == plain.config.engine and supervised.config.trainer == plain.config.trainer


def test_disaggregated_engines_are_kept_off_the_trainer_s_nodes_and_take_whole_gpus():
    spec = run_spec(
        quickstart("cluster.address=auto", "cluster.placement=disaggregated", "cluster.engine_labels={zone: a}", "eval.engines=2"), [0, 1]
    )
    assert spec.notes == () and spec.engines.spec.options.cpu_bind == "auto"  # the workers live elsewhere: no split
    assert spec.engines.placement == Placement(RayCluster("auto", 2), cpus=1.0, gpu_share=1.0, labels={"zone": "a"}, apart_from_trainer=True)
    assert spec.trainer.gpu_share == 1.0
    assert engine_options(spec.engines.placement, 1, gpus=True, avoid_nodes=["n1", "n2"]) == {
        "num_cpus": 1.0,
        "num_gpus": 1.0,
        "label_selector": {"zone": "a", "ray.io/node-id": "!in(n1,n2)"},
        "scheduling_strategy": "SPREAD",
    }
    # the evaluation replicas share the engines' CPUs and are not kept apart
    assert spec.eval_engines.replicas == 2 and spec.eval_engines.placement.cpus == 0 and not spec.eval_engines.placement.apart_from_trainer
    assert engine_options(spec.eval_engines.placement, 2, gpus=False, avoid_nodes=[]) == {
        "num_cpus": 0.0,
        "num_gpus": 0.0,
        "label_selector": {"zone": "a"},
        "scheduling_strategy": "SPREAD",
    }


def test_colocated_replicas_share_half_a_gpu_and_a_cpu():
    spec = run_spec(quickstart("rollout.engines=2"), [0, 1])
    assert spec.notes == ()  # two replicas would share the engines' half
    assert engine_options(spec.engines.placement, 2, gpus=True, avoid_nodes=[]) == {
        "num_cpus": 0.5,
        "num_gpus": 0.25,
        "label_selector": None,
        "scheduling_strategy": "SPREAD",
    }
    assert [spec.engines.replicas, spec.eval_engines, spec.judge, spec.reward_model] == [2, None, None, None]


def test_a_judge_of_its_own_and_a_reward_model_are_specified_from_their_sections():
    spec = run_spec(
        quickstart(
            "reward.judge.enabled=true",
            "reward.judge.engine=own",
            "reward.judge.model_path=assets/tiny-adder",
            "reward.reward_model.path=assets/tiny-adder",
        ),
        [0, 1],
    )
    assert spec.judge.replicas == 1 and spec.judge.spec.model == "assets/tiny-adder" and spec.judge.placement.cpus == 0
    assert spec.judge.spec.options.cpu_bind == "0"  # on the engines' half of the split
    assert spec.reward_model == RewardModelSpec("assets/tiny-adder", batch_size=16, max_length=2048, threads=1)


def test_a_bf16_run_on_a_cpu_without_bf16_instructions_is_told_that_float32_trains_faster():
    bf16 = quickstart("model.dtype=bfloat16")
    assert "model.dtype=float32 trains faster" in bf16_note(bf16, cpu_lacks_bf16=True)
    assert bf16_note(bf16, cpu_lacks_bf16=False) is None
    assert bf16_note(quickstart(), cpu_lacks_bf16=True) is None  # float32
    lacks = not torch.cuda.is_available() and not torch.ops.mkldnn._is_mkldnn_bf16_supported()  # this machine
    assert [bf16_note(bf16, True)] * lacks == [note for note in local_run_spec(bf16).notes if "bfloat16" in note]
