"""On-policy distillation against GRPO alone on the quickstart task: held-out accuracy step by step.

    .venv/bin/python bench/distill.py --steps 100                     # the shipped teacher, assets/tiny-adder-teacher
    .venv/bin/python bench/distill.py --steps 100 --teacher DIR       # another teacher of the policy's tokenizer

Each arm is one `flywheel train configs/quickstart.yaml` (as shipped: asynchronous, lr 2e-4) from the shipped
model: `grpo` (the quickstart), `distill` (the teacher's per-token advantage alone, no task reward), the same with
each token's advantage clipped to [-1, 1], and that plus GRPO's advantage (reward_weight 1). Writes bench/results/distill.json and the table of bench/distill.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean

from machine import describe, machine

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ARMS = {
    "grpo": [],
    "distill": ["algorithm.name=distill"],
    "distill clip 1": ["algorithm.name=distill", "algorithm.advantage_clip=1.0"],
    "distill+reward clip 1": ["algorithm.name=distill", "algorithm.advantage_clip=1.0", "algorithm.reward_weight=1.0"],
}


def train(name: str, overrides: list[str], out: Path) -> list[dict]:
    """One quickstart run's metric rows."""
    args = [str(REPO / "configs/quickstart.yaml"), f"run.output_dir={out}", f"run.name={name}", "run.progress=false", *overrides]
    subprocess.run([sys.executable, "-m", "flywheel.cli", "train", *args], cwd=REPO, check=True)
    return [json.loads(line) for line in (out / name / "metrics.jsonl").read_text().splitlines()]


def curve(rows: list[dict]) -> list[tuple[int, float, float]]:
    """(step, eval/accuracy, eval/greedy_accuracy) of every evaluation."""
    return [(r["step"], r["eval/accuracy"], r["eval/greedy_accuracy"]) for r in rows if "eval/accuracy" in r]


def first_step_reaching(points: list[tuple[int, float, float]], target: float) -> int | None:
    """The first evaluated step whose accuracy (T = 1) is at least ``target``, or None."""
    return next((step for step, accuracy, _ in points if accuracy >= target), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--every", type=int, default=10, help="evaluate every this many steps")
    parser.add_argument("--teacher", default="assets/tiny-adder-teacher", help="the teacher's model directory")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="flywheel-distill-"))
    teacher = args.teacher
    teacher_eval = train("teacher-eval", [f"model.path={teacher}", "run.steps=0"], out)[0]
    results: dict = {
        "machine": machine(),
        "steps": args.steps,
        "teacher": {"accuracy": teacher_eval["eval/accuracy"], "greedy_accuracy": teacher_eval["eval/greedy_accuracy"]},
    }
    common = [f"run.steps={args.steps}", f"eval.every={args.every}", f"run.checkpoint_every={args.steps}"]
    for name, overrides in ARMS.items():
        started = time.perf_counter()
        extra = [f"algorithm.teacher={teacher}"] if "distill" in name else []
        rows = train(name.replace(" ", "_"), [*common, *overrides, *extra], out)
        points, trained = curve(rows), [r for r in rows if "reward/mean" in r]
        by_10 = lambda key: [round(mean(r[key] for r in trained[i : i + 10]), 3) for i in range(0, len(trained), 10)]  # noqa: E731
        results[name] = {
            "eval": points,
            "seconds": round(time.perf_counter() - started, 1),
            "s_per_step": round(rows[-1]["timing/elapsed_s"] / args.steps, 3),
            # every arm samples the same prompts with the same seeds step by step: a paired, less noisy yardstick
            "train_reward_by_10_steps": by_10("reward/mean"),
            "reverse_kl_by_10_steps": by_10("distill/reverse_kl") if "distill/reverse_kl" in trained[0] else None,
        }
        print(name, points[-1], flush=True)
    for name in ARMS:  # steps to the teacher's accuracy, and to the halfway point between the start and it
        points, start = results[name]["eval"], results[name]["eval"][0][1]
        results[name]["step_to_teacher"] = first_step_reaching(points, results["teacher"]["accuracy"])
        results[name]["step_to_half"] = first_step_reaching(points, (start + results["teacher"]["accuracy"]) / 2)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results/distill.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "distill.md").write_text(report(results, args))


def report(results: dict, args) -> str:
    m, t = results["machine"], results["teacher"]
    command = f".venv/bin/python bench/distill.py --steps {args.steps} --every {args.every} --teacher {args.teacher}"
    lines = [
        "# On-policy distillation vs GRPO on the quickstart task",
        "",
        f"The student is the shipped model (`assets/tiny-adder`); the teacher is `{args.teacher}` (held-out accuracy {t['accuracy']:.3f} at",
        f"T = 1, {t['greedy_accuracy']:.3f} greedy; the student's own warm-up continued further, see `assets/make_tiny_model.py`). Each arm runs `configs/quickstart.yaml`",
        "as shipped (asynchronous, 64 prompts x 8 samples a step, lr 2e-4) for the same steps: `grpo` is the quickstart, `distill`",
        "trains on the teacher's per-token advantage log p_teacher - log p_student alone (no task reward), `distill clip 1` clips it",
        "to [-1, 1] (`algorithm.advantage_clip=1`), `distill+reward clip 1` adds GRPO's advantage (`algorithm.reward_weight=1`). The",
        "teacher's engine shares the engine's core. Eval: 200 held-out problems,",
        f"one sample each at T = 1 and greedy. Machine: {describe(m)}.",
        "",
        "```bash",
        command,
        "```",
        "",
        "| step | " + " | ".join(f"{name} (T = 1) | {name} (greedy)" for name in ARMS) + " |",
        "| ---: | " + " | ".join("---: | ---:" for _ in ARMS) + " |",
    ]
    for i, (step, *_) in enumerate(results["grpo"]["eval"]):
        cells = [f"{results[name]['eval'][i][1]:.3f} | {results[name]['eval'][i][2]:.3f}" for name in ARMS]
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Mean sampled training reward of each 10 steps (every arm samples the same prompts with the same seeds), and the mean",
        "`distill/reverse_kl` of each 10 steps:",
        "",
        "| arm | training reward by 10 steps | reverse KL by 10 steps (nats/token) | first step at the teacher's accuracy | first step halfway there | s / step |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for name in ARMS:
        r = results[name]
        kl = ", ".join(f"{v:.2f}" for v in r["reverse_kl_by_10_steps"]) if r["reverse_kl_by_10_steps"] else "-"
        rewards = ", ".join(f"{v:.3f}" for v in r["train_reward_by_10_steps"])
        lines.append(f"| `{name}` | {rewards} | {kl} | {r['step_to_teacher'] or '-'} | {r['step_to_half'] or '-'} | {r['s_per_step']:.2f} |")
    lines += ["", "The same figures are in `bench/results/distill.json`.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
