"""The reward pipeline of a training step: rubric + batched scorers (judge, reward model), then the hacking guards,
then the hacking alert.

    reward = rubric.total + sum(scorer.weight * scorer score)  ->  guards (flag | penalize | zero)

A scorer may answer None for a completion it does not apply to (TRL's rule): it adds nothing to that total.
A scorer that raises ``RewardFault`` (a reward function that raised or timed out), answers one for a
completion (the judge's parser), or a guard that raises makes those completions' episodes invalid
(``RewardResult.faults``); ``UserFunctionBug`` and any other error end the run.
Metrics: `reward/<name>/mean` for every sub-score (unweighted, over the completions it applies to; absent when none), the scorers' own metrics (`judge/...`), and
`hacking/<guard>_rate` + `hacking/any_rate`. A completion is the model's own text (its last turn, never an
environment's); a task is a dict: the task's `prompt` (the question), `answer` (the reference, when present),
its metadata (e.g. `visible_inputs` for the guards) and `model_turns` (every model turn). The judge reads the
prompt and answer; the reward model scores `prompt + completion`.

`score` is a coroutine run on the caller's event loop: scorers may be plain functions or coroutines (the
judge's requests and a reward-model actor's call are awaited there, never on a loop of their own).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from flywheel.config import JudgeConfig, RewardConfig
from flywheel.rewards.faults import RewardFault
from flywheel.rewards.guards import Guard, HackingAlert, apply_guards, default_guards
from flywheel.rewards.judge import Judge, JudgeItem, OpenAIBackend
from flywheel.rewards.rubric import Rubric

#: Scores a batch of (completion, task) pairs: one float per completion (None: does not apply, adds nothing; a
#: RewardFault: its scoring failed), and metrics of the call (or a coroutine of them).
Scores = tuple[list[float | RewardFault | None], dict[str, float]]
BatchRewardFn = Callable[[Sequence[str], Sequence[dict]], Scores | Awaitable[Scores]]


@dataclass(frozen=True)
class Scorer:
    """A named batched reward function and its weight in the total."""

    name: str
    fn: BatchRewardFn
    weight: float = 1.0


@dataclass(frozen=True)
class RewardResult:
    """Per completion: the final reward (after the guards), whether a guard flagged it and why, and the
    fault that makes its episode invalid (None: none); and metrics."""

    rewards: list[float]
    flagged: list[bool]
    reasons: list[list[str]]
    metrics: dict[str, float] = field(default_factory=dict)
    faults: list[RewardFault | None] = field(default_factory=list)


#: Guards that fit any judged task: what a judge reads can be injected or padded.
JUDGE_GUARDS = ("judge_injection", "length_padding")


def resolve_guards(config: RewardConfig, env_guards: Sequence[str]) -> tuple[str, ...]:
    """The guards of a run: ``reward.guards`` when given, else the environment's own plus the judge
    guards when the judge is on."""
    if config.guards is not None:
        return tuple(config.guards)
    judge = JUDGE_GUARDS if config.judge.enabled else ()
    return tuple(dict.fromkeys([*env_guards, *judge]))


class HackingStop(RuntimeError):
    """A hacking alert fired and `reward.stop_on_hacking` is true; the message holds the alerts."""


class RewardPipeline:
    def __init__(
        self,
        rubric: Rubric | None = None,
        scorers: Sequence[Scorer] = (),
        guards: Sequence[Guard] = (),
        *,
        mode: str = "flag",
        penalty: float = 1.0,
        alert: HackingAlert | None = None,
    ):
        names = [*(rubric.functions if rubric else ()), *(s.name for s in scorers)]
        if not names:
            raise ValueError("a reward pipeline needs a rubric or at least one scorer")
        if len(set(names)) != len(names):
            raise ValueError(f"reward names must be unique across the rubric and the scorers, got {names}")
        self.rubric, self.scorers, self.guards = rubric, list(scorers), list(guards)
        self.mode, self.penalty = mode, penalty
        self.alert = alert or HackingAlert()

    @classmethod
    def from_config(
        cls, config: RewardConfig, rubric: Rubric | None, scorers: Sequence[Scorer] = (), judge: Judge | None = None, env_guards: Sequence[str] = ()
    ) -> RewardPipeline:
        """Guards by name (``resolve_guards``) and the alert from `config`; the judge scorer too when
        `reward.judge.enabled` (`judge`, or one on the configured endpoint)."""
        by_name = {g.name: g for g in default_guards()}
        if config.judge.enabled:
            scorers = [*scorers, judge_scorer(judge or build_judge(config.judge), config.judge.weight)]
        alert = HackingAlert(config.alert_threshold, config.alert_rise, config.alert_decay, config.stop_on_hacking)
        guards = [by_name[name] for name in resolve_guards(config, env_guards)]
        return cls(rubric, scorers, guards, mode=config.guard_mode, penalty=config.guard_penalty, alert=alert)

    async def score(self, completions: Sequence[str], tasks: Sequence[dict]) -> RewardResult:
        """Rewards of a batch, the guards applied, with every sub-score's mean in the metrics."""
        if len(completions) != len(tasks):
            raise ValueError(f"got {len(completions)} completions but {len(tasks)} tasks")
        n = len(completions)
        totals = [0.0] * n
        subs: dict[str, list[float]] = {}
        metrics: dict[str, float] = {}
        if self.rubric is not None:
            for i, (completion, task) in enumerate(zip(completions, tasks)):
                scored = self.rubric.score(completion, task)
                totals[i] += scored.total
                for key, value in scored.scores.items():
                    subs.setdefault(key, []).append(value)
        faults: list[RewardFault | None] = [None] * n
        for scorer in self.scorers:
            try:
                scored = scorer.fn(completions, tasks)
                values, extra = await scored if inspect.isawaitable(scored) else scored
            except RewardFault as fault:  # the call failed: every completion it scored
                faults = [f or fault for f in faults]
                continue
            if len(values) != n:
                raise ValueError(f"scorer {scorer.name!r} returned {len(values)} scores for {n} completions")
            faults = [f or (v if isinstance(v, RewardFault) else None) for f, v in zip(faults, values)]
            values = [None if isinstance(v, RewardFault) else v for v in values]
            totals = [t if v is None else t + scorer.weight * v for t, v in zip(totals, values)]
            subs[f"reward/{scorer.name}"] = [v for v in values if v is not None]
            metrics |= extra
        metrics |= {f"{key}/mean": sum(values) / len(values) for key, values in subs.items() if values}
        report = apply_guards(completions, self.guards, self.mode, rewards=totals, tasks=tasks, penalty=self.penalty)
        if self.guards:
            metrics |= report.metrics
        faults = [f or g for f, g in zip(faults, report.faults)]
        return RewardResult(report.rewards, report.flagged, report.reasons, metrics, faults)

    def watch(self, step: int, metrics: dict[str, float]) -> list[str]:
        """This step's hacking alerts (one sentence each, for the log and the terminal); raises `HackingStop`
        when there are some and the alert was built with stop=True."""
        alerts = self.alert.update(step, metrics)
        if alerts and self.alert.stop:
            raise HackingStop(" ".join(alerts) + " Stopping the run (reward.stop_on_hacking is true).")
        return alerts


def build_judge(config: JudgeConfig) -> Judge:
    backend = OpenAIBackend(
        config.base_url, config.model, api_key_env=config.api_key_env, concurrency=config.concurrency,
        timeout_s=config.timeout_s, max_retries=config.max_retries, backoff_s=config.backoff_s,
        max_tokens=config.max_tokens,
    )  # fmt: skip
    return Judge(backend, structured=config.structured_output, max_block_chars=config.max_block_chars)


def judge_scorer(judge: Judge, weight: float = 1.0) -> Scorer:
    """The judge's score of each completion against the task's `prompt` and, when present, its `answer`."""

    async def fn(completions: Sequence[str], tasks: Sequence[dict]) -> tuple[list[float], dict[str, float]]:
        items = [JudgeItem(t["prompt"], c, t.get("answer")) for c, t in zip(completions, tasks)]
        result = await judge.ascore(items)
        return result.scores, result.metrics

    return Scorer("judge", fn, weight)


def reward_model_scorer(score_texts: Callable[[list[str]], list[float] | Awaitable[list[float]]], weight: float = 1.0) -> Scorer:
    """A reward model's score of `prompt + completion`; `score_texts` is e.g. `actor.score.remote` of a
    `ray.remote(RewardModel)` actor (awaited), or a plain function."""

    async def fn(completions: Sequence[str], tasks: Sequence[dict]) -> tuple[list[float], dict[str, float]]:
        scores = score_texts([t["prompt"] + c for c, t in zip(completions, tasks)])
        return list(await scores if inspect.isawaitable(scores) else scores), {}

    return Scorer("reward_model", fn, weight)
