"""flywheel inspect: the config's departures from the defaults, the last metrics, the alerts and the slowest stages."""

import json

import yaml

from flywheel.cli import main
from flywheel.config import Config
from flywheel.monitor.run_summary import config_diff, summary


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_config_diff_names_only_the_changed_leaves():
    defaults = {"run": {"steps": 400, "name": "quickstart"}, "task": {"env_args": {}}}
    tree = {"run": {"steps": 20, "name": "quickstart"}, "task": {"env_args": {"digits": 3}}}
    assert config_diff(tree, defaults) == {"run.steps": (20, 400), "task.env_args.digits": (3, None)}  # a new key: no default


def test_summary_of_a_run_directory(tmp_path, capsys):
    tree = Config().model_dump(mode="json")
    tree["run"]["steps"], tree["trainer"]["lr"] = 3, 1e-4
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(tree))
    jsonl(tmp_path / "metrics.jsonl", [
        {"step": 0, "eval/accuracy": 0.25},
        {"step": 1, "reward/mean": 0.5, "timing/step_s": 2.0, "loss/policy": "nan"},
        {"step": 2, "reward/mean": 0.625, "timing/step_s": 1.5},
    ])  # fmt: skip
    jsonl(tmp_path / "alerts.jsonl", [{"step": 1, "kind": "nonfinite", "message": "non-finite loss or gradient", "time_s": 3.0}])
    jsonl(tmp_path / "timeline.jsonl", [
        {"actor": "trainer", "stage": "backward", "step": 1, "start_s": 0.0, "end_s": 0.5},
        {"actor": "trainer", "stage": "backward", "step": 2, "start_s": 1.0, "end_s": 1.75},
        {"actor": "engine-0", "stage": "generate", "step": 1, "start_s": 0.0, "end_s": 1.0},
    ])  # fmt: skip
    text = summary(tmp_path)
    assert "config: 2 settings differ from the defaults" in text
    assert "run.steps = 3  (default 400)" in text and "trainer.lr = 0.0001  (default 0.0002)" in text
    assert "metrics: 2 steps trained, last step 2" in text
    assert "reward/mean                   0.625  (step 2)" in text and "eval/accuracy                  0.25  (step 0)" in text
    assert "loss/policy                     nan  (step 1)" in text
    assert "step    1  [nonfinite] non-finite loss or gradient" in text
    stages = text[text.index("slowest stages") :].splitlines()[1:]
    assert stages[0].split() == ["trainer", "backward", "1.25", "s", "over", "2", "spans"] and stages[1].split()[:3] == [
        "engine-0",
        "generate",
        "1.00",
    ]
    assert main(["inspect", str(tmp_path)]) == 0 and capsys.readouterr().out.strip() == text
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2
    assert "is not a run directory (no metrics.jsonl)" in capsys.readouterr().err
