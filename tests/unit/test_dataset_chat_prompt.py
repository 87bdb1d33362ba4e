"""Dataset prompts through a real chat template (the shipped tiny-calc model's tokenizer; no engine): a word problem
with the configured system prompt, a prompt of chat messages with and without its own system message, and the
plain-text fallback of a tokenizer without a template (the quickstart's tiny-adder)."""

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from flywheel.config import load_config
from flywheel.envs.episode import Renderer
from flywheel.rollout.stream import load_tasks

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "assets/word-problems/train.jsonl"


@pytest.fixture(scope="module")
def calc():
    return AutoTokenizer.from_pretrained(REPO / "assets/tiny-calc")


def first_prompt(tokenizer, tasks, task):
    """The ids the rollout sends the engine for ``task`` (rollout/group.py: Renderer of the group's first environment)."""
    env = tasks.env_factory()
    return Renderer(tokenizer, env.system_prompt, env.tools).prompt(env.reset(task))


def test_a_word_problem_with_the_system_prompt(calc):
    overrides = [
        f"task.dataset={TRAIN}",
        "task.prompt_column=question",
        "task.reference_extraction=gsm8k",
        "task.system_prompt=Show your steps.",
        "task.eval_size=10",
    ]
    tasks = load_tasks(load_config(None, overrides))
    task = tasks.train[0]
    ids, messages = first_prompt(calc, tasks, task)
    assert calc.decode(ids) == f"<|im_start|>system\nShow your steps.<|im_end|>\n<|im_start|>user\n{task.prompt}<|im_end|>\n<|im_start|>assistant\n"
    assert ids == calc.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert task.prompt == json.loads(TRAIN.read_text().splitlines()[0])["question"]


@pytest.mark.parametrize("own_system", [True, False])
def test_chat_message_prompts_keep_their_own_system_message(calc, tmp_path, own_system):
    messages = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3?"}]
    messages = [{"role": "system", "content": "Answer with a number."}] * own_system + messages
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps({"prompt": messages, "answer": a}) + "\n" for a in ("6", "7")))
    tasks = load_tasks(load_config(None, [f"task.dataset={path}", "task.system_prompt=Be brief.", "task.eval_size=1"]))
    ids, rendered = first_prompt(calc, tasks, tasks.train[0])
    system = "Answer with a number." if own_system else "Be brief."
    assert rendered[0] == {"role": "system", "content": system} and rendered[1:] == messages[own_system:]
    assert calc.decode(ids) == (
        f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n"
        "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n"
    )


def test_without_a_chat_template_the_messages_are_plain_text(tmp_path):
    adder = AutoTokenizer.from_pretrained(REPO / "assets/tiny-adder")  # digits, + and = only
    path = tmp_path / "chat.jsonl"
    path.write_text(
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": f"{a}+1="}, {"role": "user", "content": "2+2="}], "answer": "4"}) + "\n"
            for a in (1, 2)
        )
    )
    tasks = load_tasks(load_config(None, [f"task.dataset={path}", "task.eval_size=1"]))
    ids, _ = first_prompt(adder, tasks, tasks.train[0])
    assert adder.decode(ids) == f"{tasks.train[0].metadata['messages'][0]['content']}2+2="  # "\n" is not in its vocabulary
