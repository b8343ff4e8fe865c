#!/usr/bin/env bash
# Everything a session with a lent GPU runs for the LM issues (34, 35), as one command from the
# checkout's root, in under 9 minutes on one H100:
#     bash eval/bench/lm_gpu_session.sh            # results under $OUT (or ./gpu_out)
# 1. semhuff installed offline (no dependencies: the GPU image has torch, numpy, scipy, numba,
#    networkx, tqdm; gensim is not needed by semhuff.lm or semhuff-lm on a corpus file);
# 2. lm_gpu_correctness.py: CPU == CUDA, read-backs, torch.compile, Triton vs torch (~2 min);
# 3. lm_gpu_check.sh: the layer benchmark and the short LM runs (--time-budget, default 330 s);
# 4. semhuff-lm --device cuda end to end on a generated corpus: transformer + tree in bf16,
#    LSTM + self-organized in fp32, each with a checkpoint and a report.
# QUICK=1 runs every step at smoke-test sizes on the CPU (no GPU needed).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${OUT:-$root/gpu_out}"; mkdir -p "$out"
python="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
status=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
site="$(mktemp -d)"
"$python" -m pip install -q --no-deps --no-build-isolation --no-index --target "$site" "$root" \
    >"$site/install.log" 2>&1 || { echo "install failed:"; tail -5 "$site/install.log"; exit 1; }
export PYTHONPATH="$site"
if [ "${QUICK:-0}" = 1 ]; then dev=cpu; quick=(--device cpu --quick); else dev=cuda; quick=(); fi
echo "== correctness"
timeout 240 "$python" "$root/eval/bench/lm_gpu_correctness.py" --device "$dev" \
    --out "$out/lm_gpu_correctness.json" 2>"$out/correctness.err" || status=1
echo "== layer benchmark and short LM runs"
OUT="$out" PYTHON="$python" bash "$root/eval/bench/lm_gpu_check.sh" "${quick[@]}" \
    --time-budget "${BUDGET:-330}" 2>"$out/check.err" || status=1
echo "== semhuff-lm --device $dev"
corpus="$site/markov.txt"
if [ "${QUICK:-0}" = 1 ]; then tokens=60000; else tokens=400000; fi
"$python" - "$corpus" "$tokens" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
V = 5000
p = 1.0 / np.arange(1, V + 1)
nxt = rng.choice(V, size=(V, 4), p=p / p.sum())
pick = rng.choice(4, size=int(sys.argv[2]), p=[0.55, 0.25, 0.15, 0.05])
w, words = 0, []
for k in pick:
    w = nxt[w, k]
    words.append(f"w{w}")
with open(sys.argv[1], "w") as fh:
    for i in range(0, len(words), 20):
        fh.write(" ".join(words[i:i + 20]) + "\n")
PY
lm() { timeout 120 "$python" -m semhuff.cli.lm "$corpus" \
    --device "$dev" --heldout-chars "$((tokens / 2))" --epochs 1 --no-progress --bptt 35 --batch-size 32 "$@"; }
lm --arch transformer --layers 2 --heads 4 --emb 256 --hidden 256 --output tree --precision bf16 \
    --checkpoint "$site/t.ckpt" --checkpoint-steps 200 --report "$out/lm_transformer_tree.json" \
    || status=1
lm --arch lstm --emb 256 --hidden 256 --output self-organized --reassign-every 200 \
    --checkpoint "$site/l.ckpt" --checkpoint-steps 200 --report "$out/lm_lstm_so.json" || status=1
echo "session status $status"
exit $status
