"""On-policy distillation on ``flywheel.Session``: the student samples 4 completions of 64 training prompts a round,
the teacher's engine scores the student's own tokens, and the student trains on each token's advantage
log p_teacher - log p_student (``algorithm.name=distill``, the teacher's model directory in ``algorithm.teacher``);
before and after, it measures greedy accuracy on the held-out prompts.

    python examples/distill.py TEACHER_DIR [rounds] [key=value ...]      # e.g. a quickstart checkpoint, 20 rounds
"""

import json
import sys

from flywheel import Session
from flywheel.algorithms.distill import teacher_metrics

PROMPTS, SAMPLES = 64, 4


def accuracy(session, tasks):
    """Share of ``tasks`` whose greedy completion earns the full reward."""
    groups = session.sample(tasks, n=1, temperature=0.0)
    return sum(group[0].reward >= 1.0 for group in groups) / len(tasks)


def main(teacher, rounds=20, overrides=()):
    settings = ["run.name=distill", "algorithm.name=distill", f"algorithm.teacher={teacher}", *overrides]
    with Session("configs/quickstart.yaml", settings) as session:
        train, held_out = session.tasks.train, session.tasks.eval
        session.log({"eval/accuracy": accuracy(session, held_out)}, 0)
        for step in range(1, rounds + 1):
            groups = session.sample(train[(step - 1) * PROMPTS : step * PROMPTS], n=SAMPLES)
            batch = session.batch(groups)  # the teacher scores every sampled token: the advantages
            row = {"reward/mean": sum(e.reward for g in groups for e in g) / (PROMPTS * SAMPLES), **teacher_metrics(batch)}
            row |= session.train_step(batch).metrics
            session.publish()
            if step == rounds:
                row["eval/accuracy"] = accuracy(session, held_out)
            session.log(row, step)
            print(json.dumps({"step": step, **row}), flush=True)
        print(f"run directory: {session.run_dir}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20, sys.argv[3:])
