"""flywheel.Session on the session's engine with a fresh trainer: sample scored groups, a loss of the caller's
own through forward_backward (the value it reports is the loss of the whole batch, however the trainer cut it),
optim_step, publish (the engine then samples, and scores given tokens, with the trainer's new weights), save /
load (exact), a NaN loss skipped, a call from inside a running event loop (a notebook cell), log, close;
(slow) the same on two trainer ranks.
(slow) examples/rejection_sft.py from outside the package: best-of-n then SFT raises the sampled reward;
examples/distill.py: on-policy distillation draws the student to its teacher."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_models import save_perturbed

from flywheel import Session
from flywheel.api import as_config

REPO = Path(__file__).resolve().parents[2]


def nll(micro, logprobs, totals):
    return -(logprobs * micro.loss_mask).sum() / totals.tokens, {"sft/rows": float(len(micro))}


def mean_nll(logprobs: torch.Tensor, batch) -> float:
    return (-(logprobs * batch.loss_mask).sum() / batch.loss_mask.sum()).item()


def test_a_session_samples_trains_its_own_loss_publishes_and_saves(fresh_workers, config, tmp_path):
    config = as_config(config, ["trainer.max_tokens_per_microbatch=48", f"run.output_dir={tmp_path}", "run.name=session"])
    with Session(config, workers=fresh_workers(config)) as session:
        assert session.version == 0  # the initial weights, published by the session
        groups = session.sample(session.tasks.train[:6], n=4)
        assert [len(g) for g in groups] == [4] * 6
        episodes = [e for g in groups for e in g]
        assert {e.reward for e in episodes} <= {0.0, 1.0} and all(e.completion.weight_version == 0 for e in episodes)

        batch = session.collate(episodes)
        before = session.logprobs(batch)
        torch.testing.assert_close(before[batch.loss_mask > 0], batch.behaviour_logprobs[batch.loss_mask > 0], atol=2e-3, rtol=0)
        metrics = session.forward_backward(batch, nll)  # 24 rows of ~13 tokens: several micro-batches of 48 tokens
        assert metrics["loss/user"] == pytest.approx(mean_nll(before, batch), abs=1e-4) and metrics["sft/rows"] > 0
        step = session.optim_step()
        assert step["train/grad_norm"] > 0 and step["train/nonfinite_skipped"] == 0.0
        after = session.logprobs(batch)
        assert mean_nll(after, batch) < mean_nll(before, batch) - 0.01

        assert session.publish() == 1
        greedy = [g[0] for g in session.sample(session.tasks.train[:6], n=1, temperature=0.0)]
        assert all(e.completion.weight_version == 1 for e in greedy)
        served = session.collate(greedy)
        sampled = served.loss_mask > 0
        torch.testing.assert_close(session.logprobs(served)[sampled], served.behaviour_logprobs[sampled], atol=2e-3, rtol=0)
        prefill = session.engine_logprobs(served)  # the engine scoring given tokens (a teacher's call), prompt included
        torch.testing.assert_close(prefill[sampled], served.behaviour_logprobs[sampled], atol=1e-4, rtol=0)
        torch.testing.assert_close(prefill, session.logprobs(served), atol=2e-3, rtol=0)

        saved = session.save(tmp_path / "ckpt")
        session.forward_backward(batch, nll)
        session.optim_step()
        assert not torch.equal(session.logprobs(batch), after)
        session.load(saved)
        torch.testing.assert_close(session.logprobs(batch), after, atol=1e-6, rtol=0)

        nan = session.forward_backward(batch, lambda micro, logprobs, totals: logprobs.sum() * float("nan"))
        assert nan["loss/user"] != nan["loss/user"] and session.optim_step()["train/nonfinite_skipped"] == 1.0
        torch.testing.assert_close(session.logprobs(batch), after, atol=1e-6, rtol=0)  # the NaN step was not applied

        async def cell():  # a Jupyter cell runs inside the kernel's event loop
            return session.sample(session.tasks.train[:2], n=2)

        assert [len(g) for g in asyncio.run(cell())] == [2, 2]
        session.log({"sft/kept": 3.0}, 1)
        run_dir = session.run_dir
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 1, "sft/kept": 3.0}]


@pytest.mark.slow
def test_a_session_on_two_trainer_ranks(fresh_workers, config, tmp_path):
    """The rows of forward_backward are dealt to two FSDP ranks: the loss it reports is still the whole batch's, the
    step lowers it, and the engine serves what the two ranks trained."""
    config = as_config(config, ["trainer.ranks=2", "trainer.threads=1", f"run.output_dir={tmp_path}", "run.name=two_ranks"])
    with Session(config, workers=fresh_workers(config)) as session:
        batch = session.collate([e for g in session.sample(session.tasks.train[:6], n=4) for e in g])
        before = session.logprobs(batch)
        assert session.forward_backward(batch, nll)["loss/user"] == pytest.approx(mean_nll(before, batch), abs=1e-4)
        assert session.optim_step()["train/grad_norm"] > 0
        after = session.logprobs(batch)
        assert mean_nll(after, batch) < mean_nll(before, batch) - 0.01
        assert session.publish() == 1
        torch.testing.assert_close(session.engine_logprobs(batch), after, atol=2e-3, rtol=0)


@pytest.mark.slow
def test_rejection_sampling_then_sft_from_outside_the_package(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, str(REPO / "examples/rejection_sft.py"), "16", f"run.output_dir={tmp_path}", "run.progress=false"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "rejection_sft/metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(17)) and "eval/accuracy" in rows[0] and "eval/accuracy" in rows[-1]
    assert all(row["sft/kept"] > 0 and row["train/grad_norm"] > 0 for row in rows[1:])
    rewards = [row["reward/mean"] for row in rows[1:]]  # 512 sampled episodes a round
    assert sum(rewards[-3:]) / 3 >= sum(rewards[:3]) / 3 + 0.03, rewards  # measured: 0.318 -> 0.396


@pytest.mark.slow
def test_a_teacher_engine_scores_the_students_tokens(tmp_path):
    """algorithm.teacher is served on an engine of its own: the same model as the student scores the student's
    tokens as the student's engine does, and no longer once the student has trained."""
    overrides = [f"run.output_dir={tmp_path}", "run.progress=false", "algorithm.name=distill", f"algorithm.teacher={REPO / 'assets/tiny-adder'}"]
    with Session(REPO / "configs/quickstart.yaml", overrides) as session:
        batch = session.collate([g[0] for g in session.sample(session.tasks.train[:4], n=1)])
        teacher = session.teacher_logprobs(batch)
        torch.testing.assert_close(teacher, session.engine_logprobs(batch), atol=1e-4, rtol=0)
        assert (teacher[:, 1:] * batch.attention_mask[:, 1:] < 0).any()
        session.forward_backward(batch, nll)
        session.optim_step()
        session.publish()
        assert (session.engine_logprobs(batch) - session.teacher_logprobs(batch)).abs().max() > 1e-3


@pytest.mark.slow
def test_distillation_from_outside_the_package_draws_the_student_to_its_teacher(tmp_path):
    """examples/distill.py with a teacher the student is not (the shipped model with noise on every weight): the
    per-token reverse KL to the teacher falls round after round."""
    teacher = save_perturbed(REPO / "assets/tiny-adder", tmp_path / "teacher", scale=0.3)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = [sys.executable, str(REPO / "examples/distill.py"), str(teacher), "12", f"run.output_dir={tmp_path}", "run.progress=false"]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "distill/metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(13)) and "eval/accuracy" in rows[-1]
    kl = [row["distill/reverse_kl"] for row in rows[1:]]
    print("reverse KL per round:", [round(k, 4) for k in kl])
    assert sum(kl[:3]) / 3 > 0.01 and sum(kl[-3:]) / 3 < 0.7 * sum(kl[:3]) / 3, kl
