# Shared by the prepared device checks (lm_gpu_session.sh, lm_head_tree_gpu.sh): sourced, not run.
#   start_check ROOT              the checks' start: $out (OUT, or ROOT/gpu_out) made, $python
#                                 (PYTHON, or python3), $status 0, Python unbuffered, semhuff
#                                 installed (install_semhuff) and the folder changed to $site,
#                                 not the checkout (its semhuff/, without eval/ and cli/, would
#                                 shadow the install)
#   install_semhuff ROOT PYTHON   the checkout installed offline (no dependencies: the GPU image
#                                 has torch, numpy, scipy, numba) into a fresh folder, $site, on
#                                 PYTHONPATH; the GPU's name printed first
#   markov_corpus PYTHON PATH TOKENS [WORDS]   a Markov text over WORDS (default 5,000) Zipf-skewed
#                                 words, 20 a line (each word has 4 successors)
start_check() {
    out="${OUT:-$1/gpu_out}"; mkdir -p "$out"
    python="${PYTHON:-python3}"
    export PYTHONUNBUFFERED=1
    status=0
    install_semhuff "$1" "$python" && cd "$site"
}

install_semhuff() {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
    site="$(mktemp -d)"
    "$2" -m pip install -q --no-deps --no-build-isolation --no-index --target "$site" "$1" \
        >"$site/install.log" 2>&1 || { echo "install failed:"; tail -5 "$site/install.log"; return 1; }
    export PYTHONPATH="$site"
}

markov_corpus() {
    "$1" - "$2" "$3" "${4:-5000}" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(0)
V = int(sys.argv[3])
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
}
