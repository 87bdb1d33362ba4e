"""The Python API from a fresh interpreter, as a notebook calls it: train a short run from a dict, then
evaluate its final model from inside a running event loop (as a Jupyter cell does); the results are the
files the run wrote."""

import json
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.slow
def test_train_then_evaluate_from_python(tmp_path):
    script = textwrap.dedent(
        f"""
        import asyncio, json, yaml
        from flywheel import train, evaluate
        config = yaml.safe_load(open("configs/quickstart.yaml"))
        config["run"] |= {{"steps": 2, "output_dir": "{tmp_path}", "name": "api", "progress": False}}
        result = train(config, {{"rollout.prompts_per_step": 8, "task.eval_size": 12, "eval.greedy": False}})

        async def cell():  # a Jupyter cell runs inside the kernel's event loop
            return evaluate(config, {{"task.eval_size": 12}}, checkpoint=result.run_dir, k=2, n=2)

        report = asyncio.run(cell())
        print(json.dumps({{"run_dir": str(result.run_dir), "rows": result.metrics, "report": report}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    run_dir = tmp_path / "api"
    assert out["run_dir"] == str(run_dir)
    assert out["rows"] == [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in out["rows"]] == [0, 1, 2]
    report = out["report"]
    assert report["model"] == str(run_dir / "final") and report["tasks"] >= 10 and report["n"] == 2
    assert json.loads((run_dir / "final" / "eval_k2.json").read_text())["metrics"] == report["metrics"]
    assert set(report["metrics"]) == {"pass@2", "maj@2", "mean@2"}
