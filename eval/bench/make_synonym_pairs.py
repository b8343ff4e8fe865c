"""Write a synonym pairs file (``word<TAB>word`` lines) for the MR/MRR task from a thesaurus.

The SemHuff paper's protocol (§4.1): pairs come from synonym sets of at most 10 members. Sources:
Princeton WordNet dict files (one set per synset; default ``$SEMHUFF_DATA/wordnet``) or a MyThes
``th_*.dat`` file (``--mythes``). Any other thesaurus only needs to become the same plain file.

    python -m semhuff.eval.bench.make_synonym_pairs -o wordnet_pairs.tsv      # installed
    python -m semhuff.eval.bench.make_synonym_pairs --mythes th_en_US_v2.dat --sample 3000 -o mythes_3000.tsv  # checkout
    semhuff-eval vectors.bin --tasks synonyms --synonyms wordnet_pairs.tsv
"""
from __future__ import annotations

import argparse
import io
import logging
import random
import sys
from pathlib import Path

from semhuff.data_paths import data_path
from semhuff.errors import SemhuffError
from semhuff.eval import thesaurus
from semhuff.io_utils import atomic_output

PROG = "make_synonym_pairs"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    source = p.add_mutually_exclusive_group()
    source.add_argument("--wordnet", type=Path, help="WordNet dict folder (default: $SEMHUFF_DATA/wordnet)")
    source.add_argument("--mythes", type=Path, help="MyThes th_*.dat file")
    p.add_argument("--pos", default="nvar", help="WordNet parts of speech: some of n, v, a, r (default nvar)")
    p.add_argument("--max-set-size", type=int, default=thesaurus.DEFAULT_MAX_SET_SIZE,
                   help="skip synonym sets with more members (default 10, as in the paper; 0 = no limit)")
    p.add_argument("--sample", type=int, default=0, help="keep a random sample of this many pairs (0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", type=Path, required=True, help="pairs file to write")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(message)s")
    try:
        if args.mythes:
            source_text, synsets = f"MyThes {args.mythes}", thesaurus.mythes_synsets(args.mythes)
        else:
            folder = args.wordnet or data_path("wordnet")
            source_text, synsets = f"WordNet {folder} (pos {args.pos})", thesaurus.wordnet_synsets(folder, args.pos)
        pairs = thesaurus.synonym_pairs(synsets, args.max_set_size or None)
        if args.sample and args.sample < len(pairs):
            pairs = random.Random(args.seed).sample(pairs, args.sample)
        header = [f"synonym pairs from {source_text}",
                  f"sets of at most {args.max_set_size or 'any'} members; single-word members, lowercased; "
                  "each unordered pair once" + (f"; random sample (seed {args.seed})" if args.sample else "")]
        with atomic_output(str(args.output), "wb") as raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
            count = thesaurus.write_pairs(fh, pairs, header)
    except (SemhuffError, OSError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    print(f"{count} pairs written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
