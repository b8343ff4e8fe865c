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
. "$root/eval/bench/gpu_common.sh"
start_check "$root" || exit 1
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
markov_corpus "$python" "$corpus" "$tokens"
lm() { timeout 120 "$python" -m semhuff.cli.lm "$corpus" \
    --device "$dev" --heldout-chars "$((tokens / 2))" --epochs 1 --no-progress --bptt 35 --batch-size 32 "$@"; }
lm --arch transformer --layers 2 --heads 4 --emb 256 --hidden 256 --loss tree --precision bf16 \
    --checkpoint "$site/t.ckpt" --checkpoint-steps 200 --report "$out/lm_transformer_tree.json" \
    || status=1
lm --arch lstm --emb 256 --hidden 256 --loss self-organized --reassign-every 200 \
    --checkpoint "$site/l.ckpt" --checkpoint-steps 200 --report "$out/lm_lstm_so.json" || status=1
echo "session status $status"
exit $status
