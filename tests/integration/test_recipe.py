"""configs/qwen2.5-0.5b-gsm8k.yaml, checked without a GPU or a network: against a model directory of
Qwen2.5-0.5B-Instruct's architecture with random bf16 weights and a ChatML tokenizer, on the shipped word
problems (GSM8K's format) in place of GSM8K."""

from pathlib import Path

import pytest
import torch
from tiny_models import ascii_tokenizer
from transformers import AutoConfig, AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from flywheel.config import ConfigError, load_config
from flywheel.envs.episode import Renderer
from flywheel.envs.registry import make_env
from flywheel.trainer.logprobs import token_logprobs

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "configs/qwen2.5-0.5b-gsm8k.yaml"
SHIPPED = [f"task.dataset={REPO}/assets/word-problems/train.jsonl", f"task.eval_dataset={REPO}/assets/word-problems/test.jsonl"]


def qwen25_05b_random(path: Path) -> Path:
    """Qwen2.5-0.5B-Instruct's architecture (its config.json's sizes; 494M parameters, tied embeddings),
    random weights saved in bf16; a one-character tokenizer with a ChatML chat template."""
    tokenizer = ascii_tokenizer()
    tokenizer.chat_template = (REPO / "assets/tiny-calc/chat_template.jinja").read_text()
    config = Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, use_sliding_window=False, sliding_window=32768, max_window_layers=21,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        torch_dtype="bfloat16",
    )  # fmt: skip
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        Qwen2ForCausalLM(config).save_pretrained(path)
    finally:
        torch.set_default_dtype(default)
    tokenizer.save_pretrained(path)
    return path


def test_the_recipe_validates_renders_trains_and_grades(tmp_path):
    with pytest.raises(ConfigError, match="model.path 'models/Qwen2.5-0.5B-Instruct' is not a Hugging Face model directory"):
        load_config(RECIPE, SHIPPED)  # before the model is fetched: one sentence naming it
    model_dir = qwen25_05b_random(tmp_path / "qwen2.5-0.5b-random")
    config = load_config(RECIPE, [f"model.path={model_dir}", *SHIPPED])
    assert (config.model.dtype, config.rollout.max_new_tokens, config.task.grader) == ("bfloat16", 512, "math")

    env = make_env(config.task.name, **config.task.env_kwargs())
    train, held_out = env.splits(config.task.train_size, config.task.eval_size, config.task.seed)
    assert (len(train), len(held_out)) == (400, 100)  # eval_size 500 is capped at the file's rows
    task = train[0]
    assert task.answer == "24"  # 'Maya sold 16 shells ... #### 24': the number after ####

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    renderer = Renderer(tokenizer, env.system_prompt)
    prompt_ids, messages = renderer.prompt(env.reset(task))
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nSolve the problem step by step.") and text.endswith(
        f"{task.prompt}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert prompt_ids == tokenizer.encode(text, add_special_tokens=False)
    assert [m["role"] for m in messages] == ["system", "user"]

    completion = "Maya sold 16 / 2 = 8 in May, so 16 + 8 = 24. \\boxed{24}"
    assert env.step(completion).reward == 1.0
    env.reset(task)
    assert env.step("\\boxed{23}").reward == 0.0

    with torch.device("meta"):
        full = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    assert sum(p.numel() for p in full.parameters()) == 494_032_768  # Qwen2.5-0.5B's count, embeddings counted once
    # Trained below: the checkpoint's embeddings and first 2 of its 24 layers (the same code), on the completion after
    # the prompt's last 8 tokens. On CPUs without native bf16 (AVX2) torch's bf16 backward runs at 0.5-1 GFLOP/s: the
    # whole model on the whole 300-token episode took 6 minutes, most of it the tied output layer's input gradient
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, num_hidden_layers=2)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    tokens = torch.tensor([prompt_ids[-8:] + tokenizer.encode(completion)])
    logprobs = token_logprobs(model, tokens, torch.ones_like(tokens))
    completion_logprobs = logprobs[0, 8:]
    completion_logprobs.sum().backward()
    assert logprobs.dtype == torch.float32 and torch.isfinite(logprobs).all() and (completion_logprobs < 0).all()
    assert torch.isfinite(model.get_input_embeddings().weight.grad).all()
