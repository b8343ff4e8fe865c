#!/usr/bin/env bash
# Issue 45's device check, as one command from the checkout's root on a machine with a CUDA GPU
# (about 4 minutes on an H100):  bash eval/bench/lm_head_tree_gpu.sh   (results under $OUT)
# 1. the layers alone on the GPU (lm_layers, Zipf counts, V 50k): the adaptive softmax, the tree,
#    head-tree (head 2% and 4% of V, sparse and dense), class-tree and organized-tree; hidden
#    512 with batches of 128 x 20 (the CPU table's sizes) and hidden 1024 with 64 x 128
#    (docs/lm.md's GPU table's);
# 2. the adaptive softmax and issue 45's layers on one CPU thread of that machine, which runs
#    nothing else (the issue's target: forward + backward at most half the adaptive softmax's);
# 3. the trainer's whole step on the GPU: semhuff-lm, LSTM 256, a generated Markov text of
#    20,000 words, one epoch, adaptive against class-tree and head-tree (tokens/s from the
#    reports).
# QUICK=1: every step at smoke-test sizes on the CPU.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$root/eval/bench/gpu_common.sh"
start_check "$root" || exit 1
layers=(--zipf --only adaptive tree head-tree class-tree organized-tree --modes ""
        --log-prob-rows 256 --generation-rows 0)
if [ "${QUICK:-0}" = 1 ]; then
    dev=cpu; sizes=(--vocab-size 3000 --repeats 2); big=(--hidden 64 --batch 8 --bptt 16)
    tokens=40000; words=500
else
    dev=cuda; sizes=(--vocab-size 50000 --repeats 9); big=(--hidden 1024 --batch 64 --bptt 128)
    tokens=600000; words=20000
fi
bench() { timeout 200 "$python" -m semhuff.eval.bench.lm_layers "${layers[@]}" "${sizes[@]}" "$@"; }
echo "== layers on $dev, hidden 512, 128 x 20 tokens"
bench --device "$dev" --threads 1 --hidden 512 2>&1 | grep -v "^round " \
    | tee "$out/layers_${dev}_h512.txt" || status=1
echo "== layers on $dev, hidden 1024, 64 x 128 tokens"
bench --device "$dev" --threads 1 "${big[@]}" 2>&1 | grep -v "^round " \
    | tee "$out/layers_${dev}_h1024.txt" || status=1
echo "== layers on one CPU thread, hidden 512, nothing else running"
bench --device cpu --threads 1 --hidden 512 --only adaptive head-tree class-tree organized-tree \
    --log-prob-rows 0 2>&1 | grep -v "^round " \
    | tee "$out/layers_cpu1_h512.txt" || status=1
echo "== semhuff-lm --device $dev: the whole step"
corpus="$site/markov.txt"
markov_corpus "$python" "$corpus" "$tokens" "$words"
for output in adaptive class-tree head-tree; do
    timeout 150 "$python" -m semhuff.cli.lm "$corpus" --device "$dev" \
        --heldout-chars "$((tokens / 2))" --epochs 1 --no-progress --bptt 20 --batch-size 64 \
        --emb 256 --hidden 256 --loss "$output" --report "$out/lm_$output.json" || status=1
done
"$python" - "$out" <<'PY'
import json, sys
for name in ("adaptive", "class-tree", "head-tree"):
    try:
        r = json.load(open(f"{sys.argv[1]}/lm_{name}.json"))
    except OSError:
        continue
    e = r["epochs"][-1]
    print(f"{name}: {e['tokens'] / e['seconds']:,.0f} tokens/s, held-out perplexity "
          f"{e['heldout']['perplexity']:.2f}")
PY
echo "check status $status"
exit $status
