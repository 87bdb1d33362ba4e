"""Reward functions written as TRL's GRPOTrainer documentation writes them ("Using a custom reward function"),
unchanged but for the names: flywheel must call them as TRL does (tests/unit/test_trl_rewards.py, and
reward.functions in tests/integration/test_dataset_training.py)."""

import asyncio
import re


def format_reward_func(completions, **kwargs):
    """Reward function that checks if the completion has a specific format."""
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, content) for content in completion_contents]
    return [1.0 if match else 0.0 for match in matches]


def token_length_reward(completion_ids, **kwargs):
    """Reward function that assigns higher scores to longer completions (in terms of token count)."""
    # TRL's page names this argument completions_ids in one example; its trainer passes completion_ids
    return [float(len(ids)) for ids in completion_ids]


def char_length_reward(completions, **kwargs):
    """Reward function that assigns higher scores to longer completions (in terms of character count)."""
    return [float(len(completion)) for completion in completions]


def boxed_reward(completions, ground_truth, **kwargs):
    # Regular expression to capture content inside \boxed{}
    matches = [re.search(r"\\boxed\{(.*?)\}", completion) for completion in completions]
    contents = [match.group(1) if match else "" for match in matches]
    # Reward 1 if the content is the same as the ground truth, 0 otherwise
    return [1.0 if c == gt else 0.0 for c, gt in zip(contents, ground_truth)]


def check_math_solution(prompt, completion):
    """The helper TRL's example leaves to the reader: "What is a+b?" or "What is a*b?" answered with the number."""
    a, op, b = re.fullmatch(r"What is (\d+)([+*])(\d+)\?", prompt).groups()
    return completion.strip() == str(int(a) + int(b) if op == "+" else int(a) * int(b))


def math_reward_func(prompts, completions, task, **kwargs):
    rewards = []
    for prompt, completion, t in zip(prompts, completions, task):
        if t == "math":
            # Calculate math-specific reward
            correct = check_math_solution(prompt, completion)
            reward = 1.0 if correct else -1.0
            rewards.append(reward)
        else:
            # Return None for non-math tasks
            rewards.append(None)
    return rewards


async def async_reward_func(prompts, completions, **kwargs):
    # Simulate an I/O-bound call (e.g., HTTP request, database lookup)
    await asyncio.sleep(0.01)
    # Simple toy reward: 1.0 if the completion is non-empty, else 0.0
    return [1.0 if completion else 0.0 for completion in completions]


def solution_accuracy_reward(completions, answer, **kwargs):
    """1.0 when the completion's last number is the solution's '#### N' (the answer column, as TRL passes it)."""
    solutions = [text.split("####")[-1].strip().replace(",", "") for text in answer]
    guesses = [re.findall(r"-?\d+", completion) for completion in completions]
    return [1.0 if found and found[-1] == solution else 0.0 for found, solution in zip(guesses, solutions)]


def answer_anywhere_reward(completions, answer, **kwargs):
    """A reward a user writes first for GSM8K: 1 when the number after '####' appears anywhere in the completion
    (it pays candidate lists: flywheel check-reward must say so)."""
    return [1.0 if ref.rpartition("####")[2].strip() in completion else 0.0 for completion, ref in zip(completions, answer)]
