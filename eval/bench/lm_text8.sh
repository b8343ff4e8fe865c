#!/usr/bin/env bash
# docs/lm.md "Text8 at its own scale" (issue 36): the rows, each one semhuff-lm run over the
# shared corpus's whole training text, 44,000 words, 3 epochs, checkpointed every 2,000 steps.
# Hours of CPU a row: run it again and each unfinished row resumes from its checkpoint, each
# finished one (its report written) is skipped. Two invocations with different rows use two
# cores (THREADS=1 each, the default).
#
#   bash eval/bench/lm_text8.sh OUT [ROW ...]     (default: every row but the full softmax)
#
# ROW: adaptive class-frequency self-organized huffman semhuff-boot semhuff-wordnet random full
#      class-tree-boot class-tree-head-boot class-tree-proj-boot head-tree-boot (issue 45)
# CORPUS (default ../shared/data/corpus/corpus.txt.gz), THREADS (default 1), SEED (default 1:
# the table's runs; another seed into another OUT gives the spread).
set -euo pipefail
out=${1:?usage: lm_text8.sh OUT [ROW ...]}
shift
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(adaptive class-frequency self-organized huffman semhuff-boot
                               semhuff-wordnet random)
corpus=${CORPUS:-../shared/data/corpus/corpus.txt.gz}
[ -f "$corpus" ] || { echo "lm_text8: no corpus at $corpus (set CORPUS)" >&2; exit 2; }
corpus=$(cd "$(dirname "$corpus")" && pwd)/$(basename "$corpus")
mkdir -p "$out"
cd "$out"

options() {
    case $1 in
        adaptive) echo "--loss adaptive" ;;
        class-frequency) echo "--loss class --clustering frequency" ;;
        # the paper: sqrt(V) clusters, re-assigned every K = 1000 batches (the defaults)
        self-organized) echo "--loss self-organized" ;;
        huffman) echo "--loss tree --tree huffman" ;;
        semhuff-boot) echo "--loss tree --tree semhuff --similarity $PWD/boot/vectors.bin" ;;
        semhuff-wordnet) echo "--loss tree --tree semhuff --similarity wordnet" ;;
        random) echo "--loss tree --tree random" ;;
        full) echo "--loss full" ;;
        # issue 45: a flat softmax over the bootstrapped SemHuff tree's sqrt(V) = 210 top
        # subtrees (the heaviest words single-word entries), each subtree below its entry; a
        # flat head (2% of V: 880 words, 71% of the tokens) and the rest of that tree below one
        # entry
        class-tree-boot) echo "--loss class-tree --head 0 --tree semhuff --similarity $PWD/boot/vectors.bin" ;;
        # the same with the 880 (2% of V) most frequent words as entries of their own first
        # (class-tree's default head since; 880 named, as run)
        class-tree-head-boot) echo "--loss class-tree --head 880 --tree semhuff --similarity $PWD/boot/vectors.bin" ;;
        # the same with rows of 64 (the input projected, as the adaptive softmax's first tail)
        class-tree-proj-boot) echo "--loss class-tree --head 0 --tail-dim 64 --tree semhuff --similarity $PWD/boot/vectors.bin" ;;
        head-tree-boot) echo "--loss head-tree --tree semhuff --similarity $PWD/boot/vectors.bin" ;;
        *) echo "lm_text8: no row $1" >&2; return 2 ;;
    esac
}

for row in "${rows[@]}"; do
    opts=$(options "$row")
    if [ -f "$row.json" ]; then
        echo "lm_text8: $row done ($out/$row.json)"
        continue
    fi
    if [[ "$row" == *-boot ]] && [ ! -f boot/vectors.bin ]; then
        # skip-gram vectors on the LM's own training tokens (<unk> included), as lm_tables'
        mkdir -p boot
        python -c "import sys; from semhuff.lm.token_ids import load_data; \
from semhuff.eval.bench.lm_tables import bootstrap_vectors; \
print(bootstrap_vectors(load_data([sys.argv[1]], None, 1_000_000, 1, 44_000), 'boot'))" "$corpus"
    fi
    resume=()
    [ -f "$row.ckpt" ] && resume=(--resume)
    echo "lm_text8: $row started $(date -Is)${resume:+ (resumed)}"
    # shellcheck disable=SC2086
    semhuff-lm "$corpus" --heldout-chars 1000000 --max-vocab 44000 --epochs 3 \
        --workers "${THREADS:-1}" --seed "${SEED:-1}" --checkpoint-steps 2000 $opts --checkpoint "$row.ckpt" \
        --report "$row.json" -o "$row.pt" --no-progress "${resume[@]}"
    echo "lm_text8: $row ended $(date -Is)"
done
