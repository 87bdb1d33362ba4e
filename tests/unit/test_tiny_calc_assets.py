"""The shipped tiny calculator model's files: its tokenizer loads back as built, one token per character."""

import json
import sys
from pathlib import Path

from transformers import AutoTokenizer

from flywheel.envs.calculator import CalculatorEnv
from flywheel.envs.episode import Renderer

ASSETS = Path(__file__).resolve().parents[2] / "assets"
sys.path.insert(0, str(ASSETS))
from make_tiny_calc_model import build_tokenizer, demonstration  # noqa: E402 - the asset script, by path


def test_saved_tokenizer_equals_the_built_one_and_writes_tool_calls():
    saved, built = AutoTokenizer.from_pretrained(ASSETS / "tiny-calc"), build_tokenizer()
    env = CalculatorEnv()
    ids, loss_mask, first_turn = demonstration(saved, Renderer(saved, None, env.tools), "What is 347*582?", "201954", use_tool=True)
    assert (ids, loss_mask, first_turn) == demonstration(built, Renderer(built, None, env.tools), "What is 347*582?", "201954", use_tool=True)
    call = '<tool_call>{"name": "calculate", "arguments": {"expression": "347*582"}}</tool_call>'
    assert saved.decode(ids) == (
        "<|im_start|>user\nWhat is 347*582?<|im_end|>\n<|im_start|>assistant\n"
        + call
        + "<|im_end|>\n<|im_start|>tool\n201954<|im_end|>\n<|im_start|>assistant\n201954<|im_end|>"
    )
    trained = [t for t, m in zip(ids, loss_mask) if m]
    assert saved.decode(trained) == call + "201954<|im_end|>"  # the call, then the answer; never the tool's turn
    assert saved.decode([t for t, m in zip(ids, first_turn) if m]) == call
    assert len(saved.encode(call, add_special_tokens=False)) == len(call) - len("<tool_call></tool_call>") + 2


def test_model_is_untied_and_fits_the_episodes():
    config = json.loads((ASSETS / "tiny-calc/config.json").read_text())
    assert config["tie_word_embeddings"] is False and config["max_position_embeddings"] == 256
    assert AutoTokenizer.from_pretrained(ASSETS / "tiny-calc").model_max_length == 256
