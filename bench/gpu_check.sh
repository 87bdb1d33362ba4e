#!/usr/bin/env bash
# The checks this CPU machine cannot run, for a machine with NVIDIA GPUs (about 6-8 minutes on one
# H200 once the environment is installed): the quickstart on the GPU, the NCCL weight transport (vLLM's
# own NCCL transfer engine), bf16 on a random model of Qwen2.5-0.5B's shape colocated with its engine
# on one GPU, and on 2+ GPUs a 2-rank FSDP2 trainer over NCCL. Writes $OUT/gpu_check.json (one row
# per check: passed, seconds, the metrics it judged) and exits non-zero if a check failed.
#
#   bash bench/gpu_check.sh                   # uses .venv-gpu, made with `pip install -e '.[gpu,test]'` if missing
#   PYTHON=/path/to/python bash bench/gpu_check.sh   # a Python that already has vllm (GPU build) and flywheel
#
# Not covered: engine sleep/wake for colocated runs (flywheel has none yet), engine tensor parallelism.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu-check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || { echo "gpu_check: no NVIDIA GPU visible (nvidia-smi failed)"; exit 2; }

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  PY=.venv-gpu/bin/python
  [ -x "$PY" ] || { python3 -m venv .venv-gpu && "$PY" -m pip install -q -e '.[gpu,test]'; } || { echo "gpu_check: could not install .[gpu,test] (no network? set PYTHON)"; exit 2; }
fi
"$PY" -c "import torch, vllm; assert torch.cuda.is_available(), 'torch sees no CUDA device'" || { echo "gpu_check: $PY lacks a CUDA torch or vllm"; exit 2; }
GPUS=$("$PY" -c "import torch; print(torch.cuda.device_count())")

# A random model of Qwen2.5-0.5B's shape (24 layers, hidden 896, tied embeddings) with the tests' ASCII tokenizer.
"$PY" - "$OUT/qwen2.5-0.5b-shape" <<'EOF'
import sys
sys.path.insert(0, "tests/integration")
import torch
from tiny_models import ascii_tokenizer
from transformers import Qwen2Config, Qwen2ForCausalLM
tok = ascii_tokenizer()
config = Qwen2Config(vocab_size=len(tok), hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                     num_key_value_heads=2, head_dim=64, max_position_embeddings=4096, tie_word_embeddings=True,
                     bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
torch.manual_seed(0)
Qwen2ForCausalLM(config).save_pretrained(sys.argv[1])
tok.save_pretrained(sys.argv[1])
EOF

check() {  # name, then the train overrides; runs flywheel train and records the outcome
  local name=$1; shift
  local started=$SECONDS
  "$PY" -m flywheel.cli train configs/quickstart.yaml run.output_dir="$OUT" run.name="$name" run.progress=false eval.every=1000 "$@" \
    >"$OUT/$name.log" 2>&1
  echo "$name $? $((SECONDS - started))" >>"$OUT/outcomes.txt"
}
: >"$OUT/outcomes.txt"
check quickstart-file run.steps=20
check quickstart-nccl run.steps=20 weights.name=collective weights.backend=nccl
check qwen-shape-bf16-colocated run.steps=4 model.path="$OUT/qwen2.5-0.5b-shape" model.dtype=bfloat16 \
  weights.name=collective rollout.prompts_per_step=16 rollout.max_new_tokens=64 trainer.max_tokens_per_microbatch=8192
[ "$GPUS" -ge 2 ] && check quickstart-2-ranks-nccl run.steps=10 trainer.ranks=2 weights.name=collective

# Judge each run: finished, finite losses, the engines serving the trainer's last version, a small mismatch.
"$PY" - "$OUT" <<'EOF'
import json, math, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for line in (out / "outcomes.txt").read_text().split("\n"):
    if not line:
        continue
    name, code, seconds = line.split()
    runs = sorted(out.glob(f"{name}*/metrics.jsonl"))
    metrics = [m for l in runs[-1].read_text().splitlines() if (m := json.loads(l))["step"] > 0] if runs else []  # step 0: the eval
    last = metrics[-1] if metrics else {}
    finite = all(math.isfinite(m.get("loss/policy", 0.0)) for m in metrics)
    kl = max((m.get("train/mismatch_kl", 0.0) for m in metrics), default=float("nan"))
    passed = code == "0" and bool(metrics) and finite and last.get("weights/version") == last.get("step") and kl < 1e-2
    rows.append({"check": name, "passed": passed, "exit_code": int(code), "seconds": int(seconds), "steps": len(metrics),
                 "max_mismatch_kl": kl, "reward_first_last": [metrics[0].get("reward/mean"), last.get("reward/mean")] if metrics else None,
                 "step_s_last": last.get("timing/step_s"), "sync_s_last": last.get("timing/sync_s")})
(out / "gpu_check.json").write_text(json.dumps(rows, indent=2) + "\n")
print(json.dumps(rows, indent=2))
sys.exit(0 if all(r["passed"] for r in rows) else 1)
EOF
