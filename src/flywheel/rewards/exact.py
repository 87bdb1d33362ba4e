"""Exact-answer verifier."""


def exact_match_reward(completion: str, answer: str) -> float:
    """1.0 when the completion, stripped of surrounding whitespace, is exactly the answer, else 0.0."""
    return 1.0 if completion.strip() == answer else 0.0
