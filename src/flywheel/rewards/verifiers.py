"""Answer verifiers beyond exact match: the last number of a text, and math-verify equivalence.

math-verify's own time limits use SIGALRM, which works only in a process's main thread; here every
check runs in a worker process of a small pool with the library's limits off, and the caller waits
with a deadline. A check past the deadline scores 0, is counted, and its worker is replaced, so a
pathological expression can neither hang the trainer nor leak a busy thread.
"""

from __future__ import annotations

import multiprocessing
import re

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+")


def last_number_text(text: str) -> str | None:
    """The last number written in ``text`` as written, thousands separators removed, or None."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def last_number(text: str) -> float | None:
    """The last number written in ``text`` (thousands separators allowed), or None."""
    found = last_number_text(text)
    if found is None:
        return None
    try:
        return float(found)
    except ValueError:
        return None


def _equivalent(completion: str, answer: str) -> bool:
    from math_verify import parse, verify

    gold = parse(answer, parsing_timeout=None)
    return bool(gold) and verify(gold, parse(completion, parsing_timeout=None), timeout_seconds=None)


class MathVerifier:
    """``verifier(completion, answer) -> 1.0 | 0.0`` by math-verify equivalence, each check bounded by ``timeout_s``.

    ``timeouts`` counts the checks that ran out of time (each scored 0). Use as a context manager or call close().
    """

    def __init__(self, timeout_s: float = 5.0, workers: int = 1) -> None:
        self.timeout_s, self.workers, self.timeouts = timeout_s, workers, 0
        self._pool = self._new_pool()

    def _new_pool(self):
        return multiprocessing.get_context("spawn").Pool(self.workers)

    def __call__(self, completion: str, answer: str) -> float:
        pending = self._pool.apply_async(_equivalent, (completion, answer))
        try:
            return 1.0 if pending.get(timeout=self.timeout_s) else 0.0
        except multiprocessing.TimeoutError:
            self.timeouts += 1
            self._pool.terminate()
            self._pool = self._new_pool()
            return 0.0

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

    def __enter__(self) -> MathVerifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
