"""Loading vectors of every kind (and bad ones), the report, and the semhuff-eval command."""
import json

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff.eval import VectorsError, load_vectors
from semhuff.eval.report import COVERAGE_NOTE

try:
    from semhuff.cli import evaluate as cli
except ImportError:  # not installed: the top-level cli/ folder is semhuff.cli once installed
    from cli import evaluate as cli

WORDS = ["king", "queen", "man", "woman", "paris", "france", "rome", "italy", "apple", "pear"]


def small_kv(seed=0, dim=8):
    rng = np.random.default_rng(seed)
    kv = KeyedVectors(vector_size=dim)
    kv.add_vectors(WORDS, rng.normal(size=(len(WORDS), dim)).astype(np.float32))
    return kv


@pytest.fixture
def datasets(tmp_path):
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("king\tqueen\t8\nman\twoman\t7\napple\tpear\t6\nparis\tfrance\t5\nking\tapple\t1\n"
                     "broken line\nking\tunknownword\t3\n")
    questions = tmp_path / "questions.txt"
    questions.write_text(": capital-common-countries\nparis france rome italy\nrome italy paris france\n"
                         ": gram-family\nking queen man woman\nman woman king queen\nman woman zzz queen\n")
    synonyms = tmp_path / "syn.txt"
    synonyms.write_text("# pairs\nking\tqueen\napple\tpear\nfoo\tbar\n")
    return {"--pairs": f"tiny={pairs}", "--analogy-file": str(questions), "--synonyms": str(synonyms)}


def run_cli(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def ok_code(out):
    """0, or 1 when the MC-30 that task_args asks for by name was skipped (no shared data)."""
    return 1 if "SKIPPED (requested): similarity/mc30" in out else 0


FLAG_TASK = {"--pairs": "similarity", "--analogy-file": "analogy", "--synonyms": "synonyms"}


def task_args(datasets, tasks="similarity,analogy,synonyms"):
    """The flags of the chosen tasks (another task's flag is refused)."""
    args = ["--tasks", tasks, "-q"] + (["--similarity-sets", "mc30"] if "similarity" in tasks else [])
    for option, value in datasets.items():
        if FLAG_TASK[option] in tasks.split(","):
            args += [option, value]
    return args


# ---------------------------------------------------------------- loading

def test_text_binary_and_kv_round_trip(tmp_path):
    kv = small_kv()
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    kv.save_word2vec_format(str(tmp_path / "v.vectors"), binary=True)  # binary without a telling name
    kv.save(str(tmp_path / "v.kv"))
    for name in ("v.txt", "v.bin", "v.vectors", "v.kv"):
        loaded = load_vectors(tmp_path / name)
        assert loaded.vectors.index_to_key == WORDS, name
        np.testing.assert_allclose(loaded.vectors.vectors, kv.vectors, atol=1e-5)
    assert load_vectors(kv, name="mem").vectors is kv


def test_whole_gensim_models_give_their_vectors(tmp_path):
    from gensim.models import Word2Vec

    model = Word2Vec([WORDS] * 5, vector_size=4, min_count=1, workers=1, epochs=1)
    model.save(str(tmp_path / "w2v.model"))
    assert load_vectors(tmp_path / "w2v.model").vectors.index_to_key == model.wv.index_to_key
    assert load_vectors(model).vectors is model.wv
    with pytest.raises(VectorsError, match="not word vectors"):
        load_vectors({"a": 1})


def test_bad_lines_are_counted_not_fatal(tmp_path):
    # without a header (GloVe); with one, a bad line is an error (test_new_user_files.py)
    path = tmp_path / "messy.txt"
    path.write_text("king 1 2 3\nqueen 1 2\nman 1 x 3\nking 4 5 6\n\nwoman 0 1 0\njustaword\n")
    loaded = load_vectors(path)
    assert loaded.vectors.index_to_key == ["king", "woman"]
    report = loaded.report
    assert (report.wrong_dimension_lines, report.malformed_lines, report.duplicate_words) == (1, 2, 1)


@pytest.mark.parametrize("content, message", [("", "empty"), ("2 3\n\n", "no usable vectors")])
def test_unusable_files_raise_a_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(VectorsError, match=message):
        load_vectors(path)
    with pytest.raises(VectorsError, match="not found"):
        load_vectors(tmp_path / "missing.bin")


def test_unreadable_semhuff_model_file_is_a_clear_error(tmp_path):
    path = tmp_path / "model.npz"
    np.savez(path, something_else=np.zeros((2, 2)))
    with pytest.raises(VectorsError, match="cannot read npz vectors"):
        load_vectors(path)


# ---------------------------------------------------------------- the command

def test_cli_two_models_side_by_side_with_all_outputs(tmp_path, capsys, datasets):
    small_kv(0).save_word2vec_format(str(tmp_path / "a.bin"), binary=True)
    small_kv(1).save_word2vec_format(str(tmp_path / "b.txt"))
    out_json, out_md, out_png = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.png"
    code, out, err = run_cli(capsys, f"first={tmp_path / 'a.bin'}", tmp_path / "b.txt",
                             *task_args(datasets), "--json", out_json, "--markdown", out_md, "--plot", out_png)
    report = json.loads(out_json.read_text())
    # mc30 is asked for by name: exit 1 when the shared data folder is absent (issue 23.8)
    assert code == (1 if report["skipped_requested"] else 0), err
    header = out.splitlines()[0].split()
    assert header[-2:] == ["first", "b"]
    assert [m["name"] for m in report["models"]] == ["first", "b"]
    scores = {(s["task"], s["dataset"], s["metric"]): s for s in report["models"][0]["scores"]}
    tiny = scores[("similarity", "tiny", "spearman")]
    assert (tiny["covered"], tiny["total"], tiny["details"]["malformed_lines"]) == (5, 6, 1)
    assert scores[("analogy", "google", "3CosAdd")]["total"] == 5
    assert scores[("synonyms", "syn", "MR")]["covered"] == 2
    assert any("mc30" in s for s in report["skipped"]) or ("similarity", "mc30", "spearman") in scores
    assert "| first | b |" in out_md.read_text()
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temp files


def test_cli_missing_dataset_is_skipped_with_a_message(tmp_path, capsys, datasets):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    datasets["--analogy-file"] = str(tmp_path / "nope.txt")
    (tmp_path / "empty.tsv").write_text("# only a comment\n")
    datasets["--synonyms"] = str(tmp_path / "empty.tsv")
    code, out, err = run_cli(capsys, tmp_path / "v.txt", *task_args(datasets), "--data-dir", tmp_path / "nodata")
    assert code == 1  # each was asked for by name (issue 23.8: a default one would give 0)
    assert "SKIPPED (requested): analogy/google" in out and "nope.txt" in out
    assert "SKIPPED (requested): synonyms/empty" in out and "no usable lines" in out
    assert "SKIPPED (requested): similarity/mc30" in out  # no data folder, gensim has no MC-30


@pytest.mark.parametrize("argv", [
    ["--tasks", "similarity,cooking"],
    ["--pairs", "no-equals-sign"],
    ["--restrict-vocab", "-3"],
    ["--pos-files", "x=only-one-file"],
])
def test_cli_bad_options_exit_2_with_one_line(tmp_path, capsys, argv):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    code, out, err = run_cli(capsys, tmp_path / "v.txt", *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("semhuff-eval: error:")
    assert "Traceback" not in err


def test_cli_unloadable_model_is_reported_and_others_still_run(tmp_path, capsys, datasets):
    small_kv().save_word2vec_format(str(tmp_path / "good.txt"))
    (tmp_path / "empty.txt").write_text("")
    code, out, err = run_cli(capsys, tmp_path / "good.txt", tmp_path / "empty.txt", *task_args(datasets))
    assert code == 2
    assert "vectors file is empty" in err and "Traceback" not in err
    assert out.splitlines()[0].split()[-1] == "good"
    code, out, err = run_cli(capsys, tmp_path / "empty.txt")
    assert code == 2 and out == ""


def test_cli_unwritable_output_fails_before_evaluating(tmp_path, capsys):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    code, out, err = run_cli(capsys, tmp_path / "v.txt", "--json", tmp_path / "no" / "such" / "dir.json")
    assert code == 2 and "does not exist" in err and out == ""


def test_cli_scores_nothing_gracefully_and_json_has_no_nan(tmp_path, capsys, datasets):
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["zebra", "yak", "xylophone"], np.eye(3, dtype=np.float32))
    kv.save_word2vec_format(str(tmp_path / "other.txt"))
    out_json = tmp_path / "r.json"
    code, out, err = run_cli(capsys, tmp_path / "other.txt", *task_args(datasets), "--json", out_json)
    report = json.loads(out_json.read_text())
    assert code == (1 if report["skipped_requested"] else 0), err
    scores = report["models"][0]["scores"]  # strict JSON: NaN would not parse
    spearman = next(s for s in scores if s["dataset"] == "tiny" and s["metric"] == "spearman")
    assert spearman["value"] is None and spearman["covered"] == 0
    assert "n/a" in out


def test_cli_own_pos_split_and_case_sensitivity(tmp_path, capsys):
    kv = small_kv()
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    nouns, verbs = ["king", "queen", "man", "woman", "apple"], ["paris", "france", "rome", "italy", "pear"]
    lines = []
    for i in range(60):
        lines += [f"{nouns[i % 5]} NN", f"{verbs[(i * 3) % 5]} VB", ""]
    (tmp_path / "train.txt").write_text("\n".join(lines))
    (tmp_path / "test.txt").write_text("\n".join(lines[:30]))
    pairs = tmp_path / "pairs.txt"
    pairs.write_text("KING\tqueen\t8\nman\twoman\t7\napple\tpear\t6\nparis\tfrance\t5\n")
    common = ["--tasks", "similarity,pos", "--similarity-sets", "none", "--pairs", f"p={pairs}",
              "--pos-corpora", "none", "--pos-files", f"own={tmp_path / 'train.txt'},{tmp_path / 'test.txt'}", "-q"]
    code, out, err = run_cli(capsys, tmp_path / "v.txt", *common)
    assert code == 0, err
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in out.splitlines()[2:] if line.strip()}
    assert rows[("pos", "own", "accuracy")] == ["1.0000"]  # each word has one tag here
    assert len(rows[("similarity", "p", "spearman")]) == 1  # no coverage note: KING found as king
    code, out, err = run_cli(capsys, tmp_path / "v.txt", *common, "--case-sensitive")
    assert "(75%)" in out  # KING is unknown once case matters


def test_markdown_marks_the_best_model(tmp_path, capsys, datasets):
    for seed in (0, 1):
        small_kv(seed).save_word2vec_format(str(tmp_path / f"m{seed}.txt"))
    out_md = tmp_path / "r.md"
    code, out, err = run_cli(capsys, tmp_path / "m0.txt", tmp_path / "m1.txt", tmp_path / "m0.txt",
                             *task_args(datasets, "similarity"), "--markdown", out_md)
    assert code == ok_code(out), err
    text = out_md.read_text()
    assert "| m0 | m1 | m0#2 |" in text  # repeated names get their own column
    row = next(line for line in text.splitlines() if line.startswith("| similarity | tiny | spearman"))
    assert row.count("**") in (2, 4)  # the best value, or the two equal m0 columns, in bold


def test_make_synonym_pairs_script(tmp_path, capsys):
    from semhuff.eval.bench import make_synonym_pairs
    for pos, line in (("noun", "00000001 03 n 03 car 0 auto 0 motor_car 0 000 | a vehicle\n"),
                      ("verb", "00000002 29 v 02 run 0 race 0 000 | go fast\n"),
                      ("adj", ""), ("adv", "")):
        (tmp_path / f"data.{pos}").write_text(line)
    out = tmp_path / "pairs.tsv"
    assert make_synonym_pairs.main(["--wordnet", str(tmp_path), "-o", str(out)]) == 0
    lines = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["car\tauto", "run\trace"]
    assert make_synonym_pairs.main(["--wordnet", str(tmp_path / "none"), "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip().endswith(f"not found at {tmp_path / 'none'}")


# ---------------------------------------------------------------- failures are failures (issue 12.2)

def nan_kv(rows=slice(3, 4)):
    kv = small_kv()
    kv.vectors[rows] = np.nan
    return kv


def test_cli_refuses_non_finite_vectors(tmp_path, capsys, datasets):
    nan_kv().save_word2vec_format(str(tmp_path / "nan.bin"), binary=True)
    small_kv().save_word2vec_format(str(tmp_path / "good.txt"))
    code, out, err = run_cli(capsys, tmp_path / "nan.bin", *task_args(datasets))
    assert code == 2 and out == ""
    assert "1 of 10 vectors are not finite" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, tmp_path / "good.txt", tmp_path / "nan.bin", *task_args(datasets))
    assert code == 2 and out.splitlines()[0].split()[-1] == "good"  # the good one still runs


def test_suite_flags_non_finite_vectors_given_in_memory(datasets):
    from semhuff.eval import LoadedVectors, LoadReport, SuiteConfig, run_suite
    from semhuff.eval.synonyms import evaluate_synonyms, read_synonym_pairs
    from semhuff.eval.vectors import Lookup

    # what the scorer alone makes of NaN vectors: an MRR no ranking can have
    pairs = read_synonym_pairs(datasets["--synonyms"])
    mrr = evaluate_synonyms(Lookup(nan_kv(slice(None))), pairs)[1].value
    assert mrr > 1  # the 1.17
    kv = nan_kv()
    report = run_suite([LoadedVectors("nan", kv, LoadReport("mem", len(kv), 8))],
                       SuiteConfig(tasks=("synonyms",), synonym_file=datasets["--synonyms"]))
    assert report.models[0].scores == [] and "not finite" in report.failed[0]


def test_an_impossible_value_is_a_failure_not_a_number(tmp_path, capsys, datasets, monkeypatch):
    from semhuff.eval import synonyms
    from semhuff.eval.results import Score
    from semhuff.eval.tasks import out_of_range

    real = synonyms.evaluate_synonyms

    def broken(*args, **kwargs):
        scores = real(*args, **kwargs)
        scores[1].value = 1.17
        return scores

    monkeypatch.setattr(synonyms, "evaluate_synonyms", broken)
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    code, out, err = run_cli(capsys, tmp_path / "v.txt", *task_args(datasets, "synonyms,similarity"))
    assert code == 1
    assert "synonyms/syn failed for v: impossible value MRR = 1.17 outside [0, 1]" in err
    assert "MRR" not in out.split("FAILED")[0] and "spearman" in out
    assert out_of_range(Score("similarity", "x", "spearman", 0.5)) is None
    assert out_of_range(Score("synonyms", "x", "MR", 0.5))
    assert out_of_range(Score("pos", "x", "accuracy", float("nan"))) is None


def test_a_task_that_fails_makes_the_exit_code_non_zero(tmp_path, capsys):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    (tmp_path / "train.txt").write_text("king NN\nqueen NN\n\nman NN\n")  # one tag: cannot train
    (tmp_path / "test.txt").write_text("king NN\n")
    code, out, err = run_cli(capsys, tmp_path / "v.txt", "--tasks", "pos", "--pos-corpora", "none",
                             "--pos-files", f"own={tmp_path / 'train.txt'},{tmp_path / 'test.txt'}", "-q")
    assert code == 1 and "pos/own failed for v" in err and "FAILED" in out


def test_columns_are_named_so_they_can_be_told_apart(tmp_path, capsys, datasets):
    kv = small_kv()
    kv.save_word2vec_format(str(tmp_path / "v.bin"), binary=True)
    kv.save_word2vec_format(str(tmp_path / "v.txt"))
    kv.save(str(tmp_path / "v.kv"))
    code, out, err = run_cli(capsys, tmp_path / "v.bin", tmp_path / "v.kv", tmp_path / "v.txt",
                             *task_args(datasets, "similarity"))
    assert code == ok_code(out), err
    assert out.splitlines()[0].split()[3:] == ["v.bin", "v.kv", "v.txt"]
    (tmp_path / "a").mkdir()
    kv.save_word2vec_format(str(tmp_path / "a" / "v.txt"))
    code, out, err = run_cli(capsys, tmp_path / "v.txt", tmp_path / "a" / "v.txt", "named=" + str(tmp_path / "v.bin"),
                             *task_args(datasets, "similarity"))
    assert out.splitlines()[0].split()[3:] == [str(tmp_path / "v.txt"), str(tmp_path / "a" / "v.txt"), "named"]


def test_eval_into_a_closed_pipe_ends_quietly(tmp_path, datasets):
    import os
    import subprocess
    import sys
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: `| head -0`
    proc = subprocess.run([sys.executable, "-m", "semhuff.cli.evaluate", str(tmp_path / "v.txt"),
                           *task_args(datasets)], stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    assert proc.returncode == 141  # as a process killed by SIGPIPE
    assert "Broken pipe" not in proc.stderr and "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr


def test_progress_lines_where_stderr_is_no_terminal_and_the_coverage_explained(tmp_path, capsys,
                                                                              datasets):
    """Issue 48: nothing on stderr for two minutes, and "(83%)" in the table unexplained."""
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    argv = [tmp_path / "v.txt", "--tasks", "similarity,analogy", "--similarity-sets", "none",
            "--pairs", datasets["--pairs"], "--analogy-file", datasets["--analogy-file"]]
    code, out, err = run_cli(capsys, *argv)  # capsys's stderr is no terminal: step lines
    assert code == 0, err
    lines = err.strip().splitlines()
    assert lines[0] == f"semhuff-eval: loading v ({tmp_path / 'v.txt'})"
    steps = [line for line in lines if line.startswith("semhuff-eval: [")]
    # two data sets read, then both evaluated: four steps, numbered, each saying what it does
    assert [s.split("]")[0].split("[")[1].split(",")[0] for s in steps] == ["1/4", "2/4", "3/4", "4/4"]
    assert steps[0].endswith("reading similarity/tiny") and steps[3].endswith("v analogy/google")
    # the pairs file has a word out of the vocabulary: its cell shows a share, and a note says what
    assert "(80%)" in out and COVERAGE_NOTE in out
    code, out, err = run_cli(capsys, *argv, "-q")
    assert code == 0 and err == ""


def test_no_coverage_note_when_every_item_was_found(tmp_path, capsys):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    pairs = tmp_path / "all.txt"
    pairs.write_text("king\tqueen\t8\nman\twoman\t7\napple\tpear\t6\n")
    code, out, _ = run_cli(capsys, tmp_path / "v.txt", "--tasks", "similarity",
                           "--similarity-sets", "none", "--pairs", f"all={pairs}", "-q")
    assert code == 0 and "%)" not in out and COVERAGE_NOTE not in out
