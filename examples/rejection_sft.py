"""Rejection sampling then SFT, a loop that is not flywheel's own, written on ``flywheel.Session``: each round
samples 8 completions of 64 training prompts, keeps the best-rewarded one of each prompt that got a reward, and
takes SFT steps on them (their tokens' mean negative log-likelihood); before and after, it measures greedy
accuracy on the held-out prompts.

    python examples/rejection_sft.py [rounds] [key=value ...]      # e.g. 16 run.output_dir=runs
"""

import json
import sys

from flywheel import Session

PROMPTS, EPOCHS = 64, 4  # prompts sampled per round; SFT steps on each round's kept episodes


def sft_loss(micro, logprobs, totals):
    """Mean negative log-likelihood over every kept token of the batch (this micro-batch's share of it)."""
    return -(logprobs * micro.loss_mask).sum() / totals.tokens


def best(group):
    """The group's best episode if it earned a reward, else None."""
    top = max(group, key=lambda episode: episode.reward if episode.valid else float("-inf"))
    return top if top.valid and top.reward > 0 else None


def accuracy(session, tasks):
    """Share of ``tasks`` whose greedy completion earns the full reward."""
    groups = session.sample(tasks, n=1, temperature=0.0)
    return sum(group[0].reward >= 1.0 for group in groups) / len(tasks)


def main(rounds=16, overrides=()):
    with Session("configs/quickstart.yaml", ["run.name=rejection_sft", *overrides]) as session:
        train, held_out = session.tasks.train, session.tasks.eval
        session.log({"eval/accuracy": accuracy(session, held_out)}, 0)
        for step in range(1, rounds + 1):
            groups = session.sample(train[(step - 1) * PROMPTS : step * PROMPTS], n=8)
            kept = [episode for episode in map(best, groups) if episode is not None]
            row = {"reward/mean": sum(e.reward for g in groups for e in g) / sum(map(len, groups)), "sft/kept": len(kept)}
            if kept:
                for _ in range(EPOCHS):
                    row |= session.forward_backward(session.collate(kept), sft_loss) | session.optim_step()
                session.publish()
            if step == rounds:
                row["eval/accuracy"] = accuracy(session, held_out)
            session.log(row, step)
            print(json.dumps({"step": step, **row}), flush=True)
        print(f"run directory: {session.run_dir}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 16, sys.argv[2:])
