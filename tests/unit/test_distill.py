"""On-policy distillation's numerics and its batch: the teacher's per-token advantage, its mix with the task
reward, the reverse-KL metric, and the config's sentences for a missing or wrong teacher."""

import asyncio

import pytest
import torch

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.batch import build_batch
from flywheel.algorithms.distill import prefill_logprobs, reverse_kl_advantages, teacher_metrics
from flywheel.config import ConfigError, load_config
from flywheel.types import Completion, Episode

TEACHER = "assets/tiny-adder"  # any model directory: these tests never start its engine


def episode(tokens: list[int], reward: float, logprob: float = -0.5) -> Episode:
    return Episode([4, 5], Completion(tokens, [logprob] * len(tokens), "", weight_versions=(0,) * len(tokens)), reward)


def teacher_scoring(logprob_of: dict[int, float]):
    """A teacher whose log p of token ``t`` is ``logprob_of[t]``, whatever comes before it (an engine's ``score``)."""

    async def score(sequences: list[list[int]]) -> list[list[float]]:
        return [[logprob_of[t] for t in sequence[1:]] for sequence in sequences]

    return score


def test_the_advantage_is_the_teachers_logprob_minus_the_students():
    student = torch.tensor([[0.0, -1.0, -2.0], [0.0, -0.1, 0.0]])
    teacher = torch.tensor([[0.0, -0.2, -3.0], [0.0, -0.1, -9.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    advantages = reverse_kl_advantages(student, teacher, mask)
    torch.testing.assert_close(advantages, torch.tensor([[0.0, 0.8, -1.0], [0.0, 0.0, 0.0]]))


def test_prefill_logprobs_align_with_the_behaviour_logprobs():
    batch = build(load_config(None, ["algorithm.name=grpo"]), [[episode([6, 1], 1.0), episode([7, 7, 7], 0.0)]])
    scored = asyncio.run(prefill_logprobs(teacher_scoring({4: -9.0, 5: -0.3, 6: -0.7, 7: -1.5, 1: -0.2}), batch))
    # rows [4, 5, 6, 1, pad] and [4, 5, 7, 7, 7]: position t holds log p(token t); 0 at position 0 and on padding
    torch.testing.assert_close(scored, torch.tensor([[0, -0.3, -0.7, -0.2, 0], [0, -0.3, -1.5, -1.5, -1.5]]))


def test_a_distill_batch_trains_on_the_teachers_advantages_alone_by_default():
    config = load_config(None, ["rollout.group_size=2", "algorithm.name=distill", f"algorithm.teacher={TEACHER}"])
    teacher = teacher_scoring({5: 0.0, 6: -0.1, 1: -2.5, 7: -0.5})
    batch = build(config, [[episode([6, 1], 1.0), episode([7, 7, 7], 0.0)]], teacher)
    # student -0.5 on every sampled token; rewards 1 and 0 count for nothing (reward_weight 0)
    torch.testing.assert_close(batch.advantages, torch.tensor([[0, 0, 0.4, -2.0, 0], [0, 0, 0.0, 0.0, 0.0]]))
    assert batch.teacher_logprobs[0, 2:4].tolist() == pytest.approx([-0.1, -2.5])
    # reverse KL over the 5 trained tokens: (-0.5 + 0.1) + (-0.5 + 2.5) + 3 * 0 = 1.6, / 5
    assert teacher_metrics(batch) == {"distill/reverse_kl": pytest.approx(0.32)}


def test_reward_weight_adds_the_task_rewards_group_advantage():
    overrides = ["rollout.group_size=2", "algorithm.name=distill", f"algorithm.teacher={TEACHER}", "algorithm.reward_weight=0.5"]
    teacher = teacher_scoring({5: 0.0, 6: -0.5, 1: -0.5, 7: -0.5})  # agrees with the student: no teacher signal
    batch = build(load_config(None, overrides), [[episode([6, 1], 1.0), episode([7, 7, 7], 0.0)]], teacher)
    half = 0.5 * 0.7071068  # GRPO on [1, 0]: +-1/sqrt(2)
    torch.testing.assert_close(batch.advantages, torch.tensor([[0, 0, half, half, 0], [0, 0, -half, -half, -half]]), atol=1e-5, rtol=0)


def test_a_distill_batch_without_a_teacher_is_refused():
    config = load_config(None, ["algorithm.name=distill", f"algorithm.teacher={TEACHER}"])
    with pytest.raises(ValueError, match="needs a teacher"):
        build(config, [[episode([6], 1.0)]])


def test_other_algorithms_have_no_teacher_metric():
    assert teacher_metrics(build(load_config(None, ["rollout.group_size=2"]), [[episode([6], 1.0), episode([7], 0.0)]])) == {}


def test_the_teacher_must_be_a_model_directory(tmp_path):
    with pytest.raises(ConfigError, match=r"^algorithm.teacher '.*' is not a Hugging Face model directory \(no config.json\)$"):
        load_config(None, ["algorithm.name=distill", f"algorithm.teacher={tmp_path}"])
    with pytest.raises(ConfigError, match="algorithm.teacher"):
        load_config(None, ["algorithm.name=distill"])


def build(config, groups, teacher=None):
    return asyncio.run(build_batch(groups, make_algorithm(config.algorithm), pad_id=0, trainer=None, teacher=teacher))


def test_the_teacher_must_share_the_policys_vocabulary():
    from flywheel.preflight import check_config

    other = load_config(None, ["algorithm.name=distill", "algorithm.teacher=assets/tiny-calc"])
    with pytest.raises(ConfigError, match=r"^algorithm.teacher 'assets/tiny-calc' has another vocabulary than model.path 'assets/tiny-adder'"):
        check_config(other)
    assert check_config(load_config(None, ["algorithm.name=distill", f"algorithm.teacher={TEACHER}"])).algorithm.teacher == TEACHER


def test_advantage_clip_bounds_the_teachers_advantage():
    student, teacher, mask = torch.tensor([[-0.5, -0.5, -3.0]]), torch.tensor([[-14.0, -0.4, 0.0]]), torch.ones(1, 3)
    torch.testing.assert_close(reverse_kl_advantages(student, teacher, mask, clip=2.0), torch.tensor([[-2.0, 0.1, 2.0]]))


def test_a_teacher_url_is_a_server_not_a_directory():
    from flywheel.config.algorithms import teacher_directory
    from flywheel.preflight import check_config

    overrides = ["algorithm.name=distill", "algorithm.teacher=http://127.0.0.1:8000/v1", "algorithm.teacher_model=t"]
    config = check_config(load_config(None, overrides))  # no directory to read, no tokenizer to compare
    assert config.algorithm.teacher_is_url and teacher_directory(config.algorithm) is None
    assert teacher_directory(load_config(None, ["algorithm.name=distill", f"algorithm.teacher={TEACHER}"]).algorithm) == TEACHER


def test_equal_rows_are_scored_once():
    asked = []
    score = teacher_scoring({4: -9.0, 5: -0.3, 6: -0.7, 7: -1.5, 1: -0.2})

    async def counting(sequences):
        asked.extend(sequences)
        return await score(sequences)

    groups = [[episode([6, 1], 1.0), episode([7, 7, 7], 0.0), episode([6, 1], 1.0), episode([7, 7, 7], 0.0)]]
    batch = build(load_config(None, ["rollout.group_size=4"]), groups)
    scored = asyncio.run(prefill_logprobs(counting, batch))
    assert asked == [[4, 5, 6, 1], [4, 5, 7, 7, 7]]
    torch.testing.assert_close(scored[2:], scored[:2])
    assert scored[3].tolist() == pytest.approx([0, -0.3, -1.5, -1.5, -1.5])
