"""Every metric name flywheel logs, in one registry (DESIGN principle 14).

A name is ``namespace/rest``; ``<word>`` in it is a placeholder matching one path segment or part of
one (``reward/<name>/mean`` matches ``reward/judge/mean``, ``hacking/<guard>_rate`` matches
``hacking/exit_tricks_rate``). A metric marked ``held_out`` is also logged on the held-out split as
``eval/<name>`` and on each set of ``eval.environments`` as ``eval/<set>/<name>``.

The docs' metric table (docs/reference/metrics.md) is generated from ``METRICS``; the integration
tests check that their runs' ``metrics.jsonl`` hold no name outside it, and a unit test that every
metric name written in ``src/`` is in it. This module imports nothing from flywheel.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: namespace -> what it holds
NAMESPACES: dict[str, str] = {
    "reward": "rewards of the step's episodes and the reward pipeline's sub-scores",
    "loss": "the objective's terms, from the algorithm's loss",
    "train": "the trainer's step: gradients, entropy, trainer-vs-engine agreement, off-policy weights, speed",
    "rollout": "generation: lengths, speed, staleness, groups dropped",
    "env": "environments: faults, turns, their own sub-scores",
    "tools": "tool calls of the episodes",
    "hacking": "the reward-hacking guards",
    "judge": "the LLM judge",
    "distill": "on-policy distillation: the student's distance to its teacher",
    "timing": "seconds per stage of the step",
    "engines": "engine replicas: live, restarted, requests resubmitted",
    "weights": "the weight version served",
    "alerts": "health alerts",
    "eval": "the held-out split and eval.environments",
}

PLACEHOLDER = re.compile(r"<[a-z_]+>")
#: what a placeholder matches: a word of a path segment (no "/")
_WORD = r"[A-Za-z0-9_.-]+"
#: the held-out forms of a ``held_out`` metric
HELD_OUT_FORMS = ("eval/{}", "eval/<set>/{}")


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    description: str
    held_out: bool = False  # also eval/<name> and eval/<set>/<name>

    @property
    def namespace(self) -> str:
        return self.name.split("/", 1)[0]


METRICS: tuple[Metric, ...] = (
    Metric("reward/mean", "reward", "mean final reward of the step's valid episodes"),
    Metric(
        "reward/<name>/mean",
        "reward",
        "a reward-pipeline sub-score, unweighted: task, judge, reward_model, rubric functions, each TRL function of "
        "reward.functions by its function name (over the samples it did not answer None for)",
    ),
    Metric("reward/nonfinite", "episodes", "episodes whose reward was NaN or infinite (left out of the advantages)"),
    Metric(
        "reward/errors",
        "episodes",
        "episodes whose scoring raised (left out of the advantages): a reward function of reward.functions (its whole group), a guard, "
        "the judge's verdict parser",
    ),
    Metric("reward/timeouts", "episodes", "episodes whose reward function outlived reward.function_timeout_s (its whole group)"),
    Metric("loss/policy", "loss", "the policy loss (mean over the step's optimiser steps)"),
    Metric(
        "loss/user", "loss", "flywheel.Session: the caller's loss_fn over the whole forward_backward batch (the sum of its micro-batches' shares)"
    ),
    Metric("loss/clip_frac", "share", "share of tokens (GSPO: sequences; CISPO: weights) clipped"),
    Metric("loss/dual_clip_frac", "share", "share of tokens clipped by the dual clip"),
    Metric("loss/ratio_mean", "ratio", "GSPO / CISPO: mean importance ratio"),
    Metric("loss/kl_reference", "nats/token", "token-mean KL to the reference model (kl_beta > 0)"),
    Metric("loss/critic", "loss", "PPO: value loss"),
    Metric("loss/value_clip_frac", "share", "PPO: share of tokens whose clipped value term is the larger"),
    Metric("train/entropy", "nats/token", "policy entropy"),
    Metric("train/grad_norm", "L2 norm", "gradient norm before clipping"),
    Metric("train/nonfinite_skipped", "share", "share of optimiser steps skipped for a non-finite loss or gradient"),
    Metric("train/critic_grad_norm", "L2 norm", "PPO: the critic's gradient norm before clipping"),
    Metric("train/critic_nonfinite_skipped", "share", "PPO: share of the critic's optimiser steps skipped for a non-finite loss or gradient"),
    Metric("train/value_mean", "value", "PPO: the critic's mean value over the trained tokens"),
    Metric(
        "train/mismatch_kl",
        "nats/token",
        "trainer vs engine logprobs of the sampled tokens (KL), over the tokens the trained weights sampled themselves (absent when a step has none)",
    ),
    Metric("train/mismatch_abs_diff", "nats/token", "the same tokens' mean absolute logprob difference"),
    Metric(
        "train/behaviour_kl",
        "nats/token",
        "trainer (proximal) vs engine logprobs over every trained token: mismatch plus the policy lag of stale tokens",
    ),
    Metric("train/is_ratio_mean", "ratio", "off-policy correction (algorithm.off_policy): mean importance ratio"),
    Metric("train/is_ratio_max", "ratio", "off-policy correction: largest importance ratio"),
    Metric("train/is_ratio_clip_frac", "share", "off-policy correction: share of tokens (or sequences) truncated or masked"),
    Metric("train/tokens_per_s", "tokens/s", "completion tokens trained per second of training"),
    Metric("train/padding_frac", "share", "share of the positions the step's forward passes computed that were padding (0 when packed)"),
    Metric("rollout/tokens_per_s", "tokens/s", "tokens generated per second of step"),
    Metric("rollout/response_length_mean", "tokens", "mean completion length"),
    Metric("rollout/truncated_frac", "share", "share of completions cut by the token limit"),
    Metric("rollout/staleness_mean", "versions", "mean versions between the trainer and the trained tokens"),
    Metric("rollout/staleness_max", "versions", "most versions between the trainer and a trained token"),
    Metric("rollout/group_age_s_mean", "s", "mean seconds from a trained group's admission to the start of its training step"),
    Metric("rollout/group_age_s_max", "s", "most seconds from a trained group's admission to the start of its training step"),
    Metric("rollout/dropped_stale", "groups", "groups dropped as too stale (and replaced)"),
    Metric("rollout/dropped_uninformative", "groups", "groups dropped because all their rewards were equal (dynamic sampling, and replaced)"),
    Metric("rollout/dropped_invalid_groups", "groups", "groups dropped for too few valid episodes (and replaced)"),
    Metric(
        "rollout/long_prompts_skipped",
        "tasks",
        "train rows of task.dataset left out at the start: their prompts leave less than rollout.max_new_tokens of the model's context",
    ),
    Metric("rollout/worker_restarts", "workers", "rollout workers restarted in place of dead ones so far in the run (rollout.workers)"),
    Metric("rollout/invalid_frac", "share", "share of the step's episodes that were invalid"),
    Metric("env/errors", "episodes", "episodes whose environment raised"),
    Metric("env/timeouts", "episodes", "episodes that outlived the time limit"),
    Metric("env/turns_mean", "turns", "model turns per episode", held_out=True),
    Metric("env/time_limit_frac", "share", "share of episodes ended by the time limit", held_out=True),
    Metric(
        "env/score/<name>",
        "score",
        "mean of a sub-score the environment reports with its final step (info['scores']): a verifiers rubric's functions and metrics, unweighted",
        held_out=True,
    ),
    Metric("tools/call_rate", "share", "share of episodes with a tool call", held_out=True),
    Metric("tools/calls_per_episode", "calls", "tool calls per episode", held_out=True),
    Metric("tools/error_rate", "share", "share of tool calls that failed", held_out=True),
    Metric("hacking/<guard>_rate", "share", "share of completions the guard flagged"),
    Metric("hacking/any_rate", "share", "share of completions any guard flagged"),
    Metric("judge/parse_fail_rate", "share", "share of the judge's replies that were no verdict (scored 0)"),
    Metric("judge/latency_s", "s", "mean seconds per judge request"),
    Metric("judge/retries", "requests", "judge requests retried"),
    Metric("distill/reverse_kl", "nats/token", "distill: token mean of log p_student - log p_teacher over the sampled, trained tokens"),
    Metric("timing/wait_for_batch_s", "s", "the trainer starved, waiting for a batch"),
    Metric("timing/train_s", "s", "training: batch building and the trainer's step"),
    Metric("timing/sync_s", "s", "publishing the weights (after the previous version's load)"),
    Metric("timing/wait_for_weights_s", "s", "engines paused by the previous load"),
    Metric("timing/step_s", "s", "the whole step"),
    Metric("timing/elapsed_s", "s", "since the run started"),
    Metric("engines/live", "replicas", "live engine replicas"),
    Metric("engines/resubmitted", "requests", "requests resubmitted after a replica died"),
    Metric("engines/restarts", "replicas", "replacement replicas started"),
    Metric("weights/version", "version", "the weight version the engines serve after the step"),
    Metric(
        "weights/verified",
        "flag",
        "of the version the engines finished loading during the step: 1, every engine worker checked each tensor against the trainer's digest (a copy corrupt twice stops the run); 0, not checked (vLLM's NCCL receiver)",
    ),
    Metric(
        "weights/probe_gap",
        "logprob",
        "the same version's probe: the largest |engine - trainer| logprob over its tokens and replicas (weights.probe)",
    ),
    Metric("alerts/fired", "alerts", "alerts that started at this step (each one in alerts.jsonl)"),
    Metric("eval/accuracy", "share", "mean reward of one sample per held-out task at eval.temperature"),
    Metric("eval/greedy_accuracy", "share", "the same at temperature 0 (eval.greedy)"),
    Metric("eval/<set>/accuracy", "share", "eval/accuracy on the held-out set <set> of eval.environments"),
)


def names() -> tuple[str, ...]:
    """Every registered name, the held-out forms of ``held_out`` metrics included."""
    return tuple(m.name for m in METRICS) + tuple(form.format(m.name) for m in METRICS if m.held_out for form in HELD_OUT_FORMS)


def pattern(name: str) -> re.Pattern[str]:
    """The names ``name`` stands for: each ``<word>`` placeholder matches a word without "/"."""
    parts = PLACEHOLDER.split(name)
    return re.compile("".join(re.escape(p) + (_WORD if i < len(parts) - 1 else "") for i, p in enumerate(parts)) + r"\Z")


_PATTERNS = tuple(pattern(n) for n in names())


def is_registered(name: str) -> bool:
    return any(p.match(name) for p in _PATTERNS)


def unregistered(logged: Iterable[str]) -> set[str]:
    """The names among ``logged`` that no registered name stands for."""
    return {name for name in logged if not is_registered(name)}
