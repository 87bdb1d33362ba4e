"""HackingAlert: watch `hacking/<guard>_rate` across training steps and raise alerts."""

from __future__ import annotations

from collections.abc import Mapping


def running_baseline(baseline: float | None, value: float, decay: float) -> float:
    """The exponential moving average after ``value``: seeded by the first value (``baseline`` None)."""
    return value if baseline is None else decay * baseline + (1.0 - decay) * value


class HackingAlert:
    """Fires for a `hacking/*_rate` metric above `threshold`, or more than `rise` above its running baseline (an
    exponential moving average with `decay`, seeded by the metric's first value and updated after each check).
    With `stop=True`, any alert sets `should_stop`."""

    def __init__(self, threshold: float = 0.1, rise: float = 0.05, decay: float = 0.9, stop: bool = False):
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.threshold, self.rise, self.decay, self.stop = threshold, rise, decay, stop
        self.baselines: dict[str, float] = {}
        self.should_stop = False

    def update(self, step: int, metrics: Mapping[str, float]) -> list[str]:
        """The alerts of this step, one sentence each, in metric-name order."""
        alerts = []
        for key in sorted(k for k in metrics if k.startswith("hacking/") and k.endswith("_rate")):
            rate = float(metrics[key])
            base = self.baselines.get(key)
            if rate > self.threshold:
                alerts.append(f"Step {step}: {key} is {rate:.3f}, above the threshold {self.threshold:.3f}.")
            elif base is not None and rate - base > self.rise:
                alerts.append(f"Step {step}: {key} rose to {rate:.3f} from its baseline {base:.3f} (more than {self.rise:.3f}).")
            self.baselines[key] = running_baseline(base, rate, self.decay)
        if alerts and self.stop:
            self.should_stop = True
        return alerts
