"""Token-in/token-out: the assembled episode equals the chat template's rendering, and sampled ids are kept as sampled."""

import pytest
from chat_tokenizer import chat_tokenizer

from flywheel.envs.episode import Renderer, Transcript, env_messages
from flywheel.envs.tools import tool
from flywheel.types import Completion


@tool
def calculate(expression: str) -> str:
    """Evaluates an arithmetic expression.

    Args:
        expression: e.g. 12*34
    """
    return str(eval(expression))


@pytest.fixture(scope="module")
def tokenizer():
    return chat_tokenizer()


def sampled(tokenizer, text: str, version: int, stop_token: bool = True) -> Completion:
    """What the engine returns for a model turn whose ids are the canonical tokens of text (+ <|im_end|>)."""
    ids = tokenizer.encode(text, add_special_tokens=False) + ([tokenizer.eos_token_id] if stop_token else [])
    return Completion(ids, [-0.5] * len(ids), text, weight_versions=(version,) * len(ids))


def test_assembled_ids_equal_the_templates_rendering(tokenizer):
    renderer = Renderer(tokenizer, system_prompt="Use the tool.", tools=[calculate])
    prompt_ids, messages = renderer.prompt("What is 12 times 34?")
    episode = Transcript(prompt_ids, messages)
    call = 'I will compute it.\n<tool_call>\n{"name": "calculate", "arguments": {"expression": "12*34"}}\n</tool_call>'
    episode.add_model_turn(sampled(tokenizer, call, version=3))
    env = env_messages(["408", "Error: no second call."], role="tool")
    episode.add_env_turn(renderer.env_turn(episode.messages, episode.ids, env), env)
    conversation = [
        {"role": "system", "content": "Use the tool."},
        {"role": "user", "content": "What is 12 times 34?"},
        {"role": "assistant", "content": call},
        {"role": "tool", "content": "408"},
        {"role": "tool", "content": "Error: no second call."},
    ]
    assert episode.messages == conversation
    template_ids = tokenizer.apply_chat_template(
        conversation, tools=[calculate.schema()], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert episode.context == template_ids

    episode.add_model_turn(sampled(tokenizer, "The answer is 408.", version=4))
    conversation.append({"role": "assistant", "content": "The answer is 408."})
    template_ids = tokenizer.apply_chat_template(conversation, tools=[calculate.schema()], tokenize=True, return_dict=False)
    # the model stopped on <|im_end|>; the template closes the message with <|im_end|> and a newline
    assert template_ids[: len(episode.context)] == episode.context
    assert tokenizer.decode(template_ids[len(episode.context) :]) == "\n"


def test_loss_mask_logprobs_and_versions_mark_model_tokens_only(tokenizer):
    renderer = Renderer(tokenizer, tools=[calculate])
    prompt_ids, messages = renderer.prompt("12*34?")
    episode = Transcript(prompt_ids, messages)
    first = sampled(tokenizer, '<tool_call>{"name": "calculate", "arguments": {"expression": "12*34"}}</tool_call>', version=5)
    episode.add_model_turn(first)
    env_ids = renderer.env_turn(episode.messages, episode.ids, env_messages(["408"], "tool"))
    episode.add_env_turn(env_ids, env_messages(["408"], "tool"))
    second = sampled(tokenizer, "408", version=6)
    episode.add_model_turn(second)
    completion = episode.completion(text="", truncated=False)
    n1, n2, ne = len(first.token_ids), len(second.token_ids), len(env_ids)
    assert tokenizer.decode(env_ids) == "\n<|im_start|>user\n<tool_response>\n408\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert completion.token_ids == first.token_ids + env_ids + second.token_ids
    assert completion.loss_mask == (1,) * n1 + (0,) * ne + (1,) * n2
    assert completion.logprobs == [-0.5] * n1 + [0.0] * ne + [-0.5] * n2
    assert episode.versions == [5] * n1 + [None] * ne + [6] * n2
    assert completion.weight_version == 5  # the oldest


def test_sampled_ids_are_never_retokenized(tokenizer):
    # "408" sampled one character at a time is not how the tokenizer would encode "408" (one merged token)
    renderer = Renderer(tokenizer)
    prompt_ids, messages = renderer.prompt("12*34?")
    digits = [tokenizer.convert_tokens_to_ids(c) for c in "408"] + [tokenizer.eos_token_id]
    assert tokenizer.encode("408", add_special_tokens=False) != digits[:3]
    episode = Transcript(prompt_ids, messages)
    episode.add_model_turn(Completion(digits, [-1.0] * 4, "408", weight_versions=(0,) * 4))
    episode.add_env_turn(renderer.env_turn(episode.messages, episode.ids, env_messages("Correct.", "user")), env_messages("Correct.", "user"))
    assert episode.ids[:4] == digits


def test_without_a_chat_template_messages_are_plain_text():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("assets/tiny-adder")
    renderer = Renderer(tokenizer)
    ids, _ = renderer.prompt("12+34=")
    assert ids == tokenizer.encode("12+34=")
    assert renderer.env_turn([], [4, 1], env_messages("=", "user")) == tokenizer.encode("=")
