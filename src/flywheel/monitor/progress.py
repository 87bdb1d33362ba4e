"""Terminal progress: a live bar with reward and eval accuracy, plus one line per evaluation."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class RunProgress:
    def __init__(self, total_steps: int, enabled: bool) -> None:
        self.console = Console(stderr=True)
        self._progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("reward {task.fields[reward]}  eval {task.fields[accuracy]}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not enabled,
        )
        self._task = self._progress.add_task("train", total=total_steps, reward="-", accuracy="-")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def step(self, row: dict) -> None:
        fields = {"reward": f"{row['reward/mean']:.3f}"}
        if "eval/accuracy" in row:
            fields["accuracy"] = f"{row['eval/accuracy']:.3f}"
        self._progress.update(self._task, completed=row["step"], **fields)

    def evaluated(self, row: dict) -> None:
        """One line per evaluation, kept above the bar."""
        greedy = f"  greedy {row['eval/greedy_accuracy']:.3f}" if "eval/greedy_accuracy" in row else ""
        tools = f"  tool-call rate {row['eval/tools/call_rate']:.3f}" if "eval/tools/call_rate" in row else ""
        self.log(f"step {row['step']:4d}  eval accuracy {row['eval/accuracy']:.3f}{greedy}{tools}")

    def log(self, message: str) -> None:
        self.console.print(message)
