"""Reward QA before a run pays for anything: ``flywheel check-reward CONFIG``, and its short version at the start of
``flywheel train`` (``reward.check``).

The configured reward (the environment's grade, TRL reward functions, an endpoint judge, a reward model, then the
guards) scores probes built from real tasks of the config (``flywheel.rewards.probes``): honest answers in several
wrappers and notations, and adversarial completions that never commit to the right answer alone. No engine starts:
a judge on the run's engines (``reward.judge.engine`` policy or own) is not checked, and the report says so.

An adversarial form **pays** when its mean reward over the tasks exceeds the wrong answer's by more than
``share`` of the margin between the best honest wrapper and the wrong answer; an honest notation is
**under-graded** when it falls short of the best wrapper by more than that share.
"""

from __future__ import annotations

import asyncio
import math
import sys
import threading
from dataclasses import dataclass, field

from flywheel.config import Config, ConfigError
from flywheel.envs.registry import env_factory, make_env
from flywheel.rewards.faults import UserFunctionBug
from flywheel.rewards.pipeline import RewardPipeline
from flywheel.rewards.probes import Probe, adversarial_probes, distractors, honest_notations, honest_wrappers, reference_free_probes
from flywheel.rewards.wiring import reward_pipeline
from flywheel.types import Task

#: Share of the honest-minus-wrong margin past which a form pays (adversarial) or is under-graded (honest).
SHARE = 0.2


@dataclass(frozen=True)
class FormScore:
    """One probe family over the tasks: mean reward of its valid episodes, and how many were invalid."""

    family: str
    honest: bool
    mean: float
    tasks: int
    invalid: int = 0


@dataclass(frozen=True)
class RewardCheck:
    """What the configured reward pays: per wrapper, per honest notation, per adversarial form."""

    wrapper: str  # the honest wrapper paid best, the one the other probes are written in
    honest: float  # its mean reward
    wrong: float  # the mean reward of a wrong answer in that wrapper
    wrappers: list[FormScore]
    forms: list[FormScore]
    tasks: int
    not_checked: list[str] = field(default_factory=list)  # parts of the reward the check could not run, one sentence each

    @property
    def margin(self) -> float:
        return self.honest - self.wrong

    @property
    def conclusive(self) -> bool:
        """Whether some honest wrapper earns more than a wrong answer: else nothing can be told apart."""
        return self.margin > 1e-9

    @property
    def paying(self) -> list[FormScore]:
        """Adversarial forms that earn reward (module docstring)."""
        if not self.conclusive:
            return []
        return [f for f in self.forms if not f.honest and f.family != "wrong" and f.mean > self.wrong + SHARE * self.margin]

    @property
    def undergraded(self) -> list[FormScore]:
        """Honest notations graded short of the best wrapper (module docstring)."""
        if not self.conclusive:
            return []
        return [f for f in self.forms if f.honest and f.mean < self.honest - SHARE * self.margin]

    def warnings(self) -> list[str]:
        """One sentence per adversarial form that pays, and one when the check cannot conclude."""
        if self.wrappers and all(f.invalid == f.tasks for f in self.wrappers):
            return ["reward check: every honest probe's episode was invalid (the environment or the reward failed on it), so nothing was checked"]
        if not self.conclusive and self.wrappers:  # without reference answers there was nothing to conclude
            return [
                f"reward check: no honest answer earned more than a wrong one on {self.tasks} tasks (best: {self.wrapper}, {self.honest:.2f}), "
                "so gameable forms cannot be told apart; run `flywheel check-reward` on the config to see every form's reward"
            ]
        return [
            f"reward check: the adversarial form '{f.family}' earns {f.mean:.2f} on average over {f.tasks} tasks (an honest answer "
            f"{self.honest:.2f}, a wrong one {self.wrong:.2f}); the policy can learn it: fix the reward, or see `flywheel check-reward`"
            for f in self.paying
        ]

    def report(self) -> str:
        """The whole check as a table, then its verdict."""
        lines = [f"reward check over {self.tasks} tasks (mean reward of each form; invalid episodes left out)"]
        if self.wrappers:
            lines.append("honest wrappers:")
            lines += [
                f"  {f.family:<22} {f.mean:6.3f}{_invalid(f)}" + ("   <- used below" if f.family == self.wrapper else "") for f in self.wrappers
            ]
            lines.append(f"honest notations in '{self.wrapper}':")
            lines += [
                f"  {f.family:<22} {f.mean:6.3f}{_invalid(f)}" + ("   UNDER-GRADED" if f in self.undergraded else "") for f in self.forms if f.honest
            ]
        lines.append(f"adversarial forms in '{self.wrapper}':" if self.wrappers else "adversarial forms:")
        lines += [f"  {f.family:<22} {f.mean:6.3f}{_invalid(f)}" + ("   PAYS" if f in self.paying else "") for f in self.forms if not f.honest]
        lines += [f"not checked: {sentence}" for sentence in self.not_checked]
        if not self.wrappers:
            lines.append("verdict: inconclusive, no honest answer to compare with")
        elif not self.conclusive:
            lines.append("verdict: inconclusive, no honest wrapper earns more than a wrong answer")
        else:
            paying, under = [f.family for f in self.paying], [f.family for f in self.undergraded]
            lines.append(f"verdict: {len(paying)} adversarial forms pay" + (f" ({', '.join(paying)})" if paying else ""))
            lines.append(f"         {len(under)} honest notations are under-graded" + (f" ({', '.join(under)})" if under else ""))
        return "\n".join(lines)


def _invalid(form: FormScore) -> str:
    return f"  ({form.invalid} invalid)" if form.invalid else ""


def check_reward(config: Config, tasks: int = 8) -> RewardCheck:
    """Scores the probes of ``tasks`` train tasks of ``config`` with its reward (module docstring)."""
    factory = env_factory(config.task.name)
    env = make_env(config.task.name, **config.task.env_kwargs())
    sample = env.tasks(tasks, config.task.seed)[:tasks]
    if not sample:
        raise ConfigError(f"reward check: environment {config.task.name!r} gave no tasks to build probes from")
    pipeline, not_checked = _pipeline(config, getattr(factory, "guards", ()))
    if not any(t.answer for t in sample):
        forms = _families(_score(config, pipeline, sample, [reference_free_probes(t.prompt) for t in sample]))
        no_reference = "honest answers and the forms built from one: the tasks carry no reference answer (Task.answer)"
        return RewardCheck("", 0.0, 0.0, [], forms, len(sample), [*not_checked, no_reference])
    references = [t.answer for t in sample]
    tag = config.task.answer_tag
    wrappers = honest_wrappers(tag)
    scored = _score(config, pipeline, sample, [[Probe(name, wrap(t.answer), True) for name, wrap in wrappers.items()] for t in sample])
    wrapper_scores = _families(scored)
    best = max(wrapper_scores, key=lambda f: f.mean)  # the first of equals: bare before boxed
    wrap = wrappers[best.family]
    probes = [
        honest_notations(t.answer, wrap) + adversarial_probes(t.prompt, t.answer, wrap, distractors(t.answer, references[i + 1 :] + references[:i]))
        for i, t in enumerate(sample)
    ]
    forms = _families(_score(config, pipeline, sample, probes))
    wrong = next(f.mean for f in forms if f.family == "wrong")
    return RewardCheck(best.family, best.mean, wrong, wrapper_scores, forms, len(sample), not_checked)


def _pipeline(config: Config, env_guards: tuple[str, ...]) -> tuple[RewardPipeline | None, list[str]]:
    """The run's reward pipeline without engines: a judge on the run's engines is left out (and named)."""
    r, not_checked = config.reward, []
    if r.judge.enabled and r.judge.engine != "endpoint":
        not_checked.append(f"the judge (reward.judge.engine: {r.judge.engine}) runs on the run's engines, which the check does not start")
        config = config.model_copy(update={"reward": r.model_copy(update={"judge": r.judge.model_copy(update={"enabled": False})})})
    score_texts = None
    if r.reward_model.path:
        from flywheel.rewards.reward_model import RewardModel

        score_texts = RewardModel(r.reward_model.path, dtype=config.model.dtype).score
    pipeline = reward_pipeline(config, env_guards, policy_engine=None, score_texts=score_texts)  # type: ignore[arg-type]
    return pipeline, not_checked


def _score(config: Config, pipeline: RewardPipeline | None, tasks: list[Task], probes: list[list[Probe]]) -> list[tuple[Probe, float | None]]:
    """Each probe's reward on its task: the environment's grade of it as the model's only turn, then the pipeline's
    total (one call over every probe); None when the episode is invalid (the environment raised, the reward failed
    or is not finite)."""
    pairs = [(task, probe) for task, batch in zip(tasks, probes) for probe in batch]
    rewards = [_grade(config, task, probe.text) for task, probe in pairs]
    if pipeline is not None:
        records = [
            {"prompt": t.prompt, "answer": t.answer, **t.metadata, "reward": 0.0 if g is None else g, "model_turns": [p.text], "completion_ids": []}
            for (t, p), g in zip(pairs, rewards)
        ]  # fmt: skip
        result = asyncio.run(pipeline.score([p.text for _, p in pairs], records))
        faults = result.faults or [None] * len(pairs)
        rewards = [None if g is None or f is not None else x for g, x, f in zip(rewards, result.rewards, faults)]
    return [(p, x if x is None or math.isfinite(x) else None) for (_, p), x in zip(pairs, rewards)]


def _grade(config: Config, task: Task, text: str) -> float | None:
    """The environment's grade of ``text`` as the model's turn: 0 when the episode would go on, None when it raised."""
    try:
        env = make_env(config.task.name, **config.task.env_kwargs())
        env.reset(task)
        result = env.step(text)
    except Exception:  # noqa: BLE001 - an environment that raises on a probe makes that episode invalid, as in a run
        return None
    return float(result.reward or 0.0) if result.done else 0.0


def _families(scored: list[tuple[Probe, float | None]]) -> list[FormScore]:
    """Mean reward per family, in the order the families first appear."""
    by_family: dict[str, list[float | None]] = {}
    honest: dict[str, bool] = {}
    for probe, reward in scored:
        by_family.setdefault(probe.family, []).append(reward)
        honest[probe.family] = probe.honest
    out = []
    for family, rewards in by_family.items():
        valid = [r for r in rewards if r is not None]
        out.append(FormScore(family, honest[family], sum(valid) / len(valid) if valid else 0.0, len(rewards), len(rewards) - len(valid)))
    return out


def check_at_start(config: Config) -> None:
    """``reward.check`` at the start of a run: warnings on stderr; ConfigError (one sentence) when an adversarial form
    pays and ``reward.check`` is ``stop``. A check past ``reward.check_timeout_s`` is abandoned with a warning; a reward
    function that returns the wrong shape is left to the run's first call, which stops with it."""
    if config.reward.check == "off":
        return
    outcome: list = []

    def check() -> None:
        try:
            outcome.append(check_reward(config, config.reward.check_tasks))
        except UserFunctionBug:
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - raised again on the caller's thread
            outcome.append(error)

    thread = threading.Thread(target=check, name="reward-check", daemon=True)  # a hung environment must not hold the exit
    thread.start()
    thread.join(config.reward.check_timeout_s)
    if not outcome:
        print(
            f"flywheel: warning: reward check did not finish within {config.reward.check_timeout_s:g} s (reward.check_timeout_s); skipped",
            file=sys.stderr,
        )
        return
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    if result is None:
        return
    warnings = result.warnings()
    if config.reward.check == "stop" and result.paying:
        raise ConfigError(warnings[0] + " (reward.check is stop; set it to warn to train anyway)")
    for line in warnings:
        print(f"flywheel: warning: {line}", file=sys.stderr)
