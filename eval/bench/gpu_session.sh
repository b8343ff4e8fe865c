#!/usr/bin/env bash
# The prepared GPU check (issue 43): what a session with a lent GPU runs first, as one command
# from the checkout's root, in at most 8 minutes on one H100 including installs:
#     bash eval/bench/gpu_session_data.sh            # here, before: .gpu_data/ (35 MB, ignored)
#     bash eval/bench/gpu_session.sh OUT             # there, with .gpu_data carried
# 1. semhuff installed offline without dependencies (the GPU image has numpy, scipy, numba,
#    numba-cuda, torch, triton, tqdm, networkx; not gensim: the quality figures come from
#    eval/bench/light_quality.py, gensim's protocol);
# 2. correctness on the device: the sentence kernel with one block against the CPU kernel
#    (tests/test_gpu_sentences.py, a few cases, NUMBA_ENABLE_CUDASIM=0);
# 3. OUT/word2vec.json: the CPU trainer against --device cuda (sentence and batched forms) on
#    the shared corpus, sg-HS, sg-NS and CBOW-HS, speed, peak memory and quality
#    (eval/bench/gpu_word2vec_check.py), and sentence-form runs with other grids and stores;
# 4. OUT/lm.json: the language-model checks the last GPU run left open
#    (eval/bench/lm_gpu_open.py).
# Every step prints as it goes and writes its JSON after every run: a check cut short still
# reports. QUICK=1: every step at smoke-test sizes on any CPU (the CUDA simulator), under 5
# minutes. The data: GPU_DATA (default .gpu_data) holding corpus.txt.gz and the three
# evaluation files; without it the shared corpus is looked up as semhuff looks it up.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${OUT:-$root/gpu_out}}"; mkdir -p "$out"; out="$(cd "$out" && pwd)"
python="${PYTHON:-python3}"
data="${GPU_DATA:-$root/.gpu_data}"
export PYTHONUNBUFFERED=1
status=0
started=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
site="$(mktemp -d)"
"$python" -m pip install -q --no-deps --no-build-isolation --no-index --target "$site" "$root" \
    >"$site/install.log" 2>&1 || { echo "install failed:"; tail -5 "$site/install.log"; exit 1; }
export PYTHONPATH="$site"
corpus=(); evaldata=()
[ -f "$data/corpus.txt.gz" ] && corpus=(--corpus "$data/corpus.txt.gz")
[ -f "$data/questions-words.txt" ] && evaldata=(--eval-data "$data")
if [ "${QUICK:-0}" = 1 ]; then
    export NUMBA_ENABLE_CUDASIM=1 SEMHUFF_GPU_LANES=8
    quick=(--quick); lmquick=(--quick --device cpu); tests=(-k "sg-hs-mixed-plain")
    corpus=()  # its own small corpus: the simulator takes hours over the shared one
    extra=(); w2v_budget=200; lm_budget=90
else
    export NUMBA_ENABLE_CUDASIM=0
    quick=(); lmquick=(); tests=(-k "sg-hs-mixed-saturate or sg-ns-batched-plain or warp")
    extra=(--extra chunk_words=8000000 blocks=512 updates=plain)
    w2v_budget="${W2V_BUDGET:-230}"; lm_budget="${LM_BUDGET:-120}"
fi
steps="${STEPS:-correctness word2vec lm}"  # STEPS=word2vec: a rerun of one step
if [[ " $steps " == *" correctness "* ]]; then
echo "== correctness: one block against the CPU kernel ($((SECONDS - started)) s)"
(cd "$root/tests" && timeout 100 "$python" -m pytest -q -p no:cacheprovider \
    test_gpu_sentences.py "${tests[@]}" 2>&1 | tail -4) || status=1
fi
if [[ " $steps " == *" word2vec "* ]]; then
echo "== word2vec: CPU trainer against --device cuda ($((SECONDS - started)) s)"
# from the install's folder: `-m` from the checkout's root would import ./semhuff, the source
# tree, which has no semhuff.eval (setup.cfg maps eval/ there only when installed)
(cd "$site" && timeout "$((w2v_budget + 60))" "$python" -m semhuff.eval.bench.gpu_word2vec_check \
    "${corpus[@]}" "${evaldata[@]}" "${quick[@]}" --out "$out/word2vec.json" \
    --time-budget "$w2v_budget" "${extra[@]}") || status=1
fi
if [[ " $steps " == *" lm "* ]]; then
echo "== language models: the open checks ($((SECONDS - started)) s)"
timeout "$((lm_budget + 40))" "$python" "$root/eval/bench/lm_gpu_open.py" \
    --out "$out/lm.json" --time-budget "$lm_budget" "${lmquick[@]}" || status=1
fi
echo "session status $status after $((SECONDS - started)) s"
exit $status
