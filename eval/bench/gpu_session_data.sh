#!/usr/bin/env bash
# The data the prepared GPU check needs, into .gpu_data/ (ignored by git) for the device tool
# to carry (its `carry` argument: [".gpu_data"]): the shared corpus (from $SEMHUFF_DATA or the
# checkout's ../shared/data) and gensim's copies of the three evaluation files. 35 MB.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${1:-$root/.gpu_data}"; mkdir -p "$dest"
# the checkout's venv when there is one (the README's install), so a plain `bash` finds semhuff
python="${PYTHON:-}"
[ -n "$python" ] || { [ -x "$root/.venv/bin/python" ] && python="$root/.venv/bin/python"; } || python=python3
"$python" -c "import semhuff.data_paths, semhuff.eval.bench.light_quality" 2>/dev/null || {
    echo "gpu_session_data: $python cannot import semhuff (install it, or set PYTHON)" >&2; exit 2; }
corpus="$("$python" -c "from semhuff.data_paths import shared_corpus; print(shared_corpus())")"
[ -f "$corpus" ] || { echo "gpu_session_data: no shared corpus at $corpus" >&2; exit 2; }
cp "$corpus" "$dest/corpus.txt.gz"
tests="$("$python" -c "from semhuff.eval.bench.light_quality import gensim_data_folder; print(gensim_data_folder())")"
for f in wordsim353.tsv simlex999.txt questions-words.txt; do cp "$tests/$f" "$dest/$f"; done
du -sh "$dest"
