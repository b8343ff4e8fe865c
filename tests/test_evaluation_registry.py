"""Evaluation tasks are registered objects (issue 33): a task written in one file outside the
package, imported with ``semhuff-eval --plugin``, is run by the command and its metric is in
the text report, the JSON and the plot; its flags come from its declarations, an option it does
not declare is refused in one line, and ``--check-data`` checks the data row it lists. The
built-in tasks go through the same registry (order, ranges, panels)."""
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff.errors import OptionError
from semhuff.eval import EVALUATION_TASKS, LoadedVectors, LoadReport, Score, SuiteConfig, run_suite
from semhuff.eval import report as report_module
from semhuff.eval.tasks import EvaluationTask, out_of_range, register_task

try:
    from semhuff.cli import evaluate as cli
except ImportError:  # not installed: the top-level cli/ folder is semhuff.cli once installed
    from cli import evaluate as cli

REPO = Path(__file__).resolve().parents[1]
PLUGIN = "odd_one_out_task"

# The whole task, as a user writes it: one file, nothing in the package edited. Its data row is
# declared in DATA (a task inside the package adds the same row to data/manifest.csv instead).
PLUGIN_SOURCE = '''
"""Odd one out: of the words on a line, the last does not belong; the model's answer is the
word least similar to the others."""
from functools import partial
from pathlib import Path

import numpy as np

from semhuff.data_paths import ManifestEntry
from semhuff.eval.datasets import require
from semhuff.eval.results import Score
from semhuff.eval.tasks import EvaluationTask, Panel, register_task
from semhuff.options import Option


def evaluate(lookup, questions, name):
    right = covered = 0
    for words in questions:
        ids = lookup.indices(words)
        if ids is None:
            continue
        covered += 1
        unit = lookup.unit[ids]
        right += int(np.argmin((unit @ unit.T).sum(axis=1))) == len(words) - 1
    value = right / covered if covered else float("nan")
    return [Score("oddoneout", name, "accuracy", value, covered=covered, total=len(questions))]


def read_job(path, name):
    questions = [line.split() for line in open(require(path, "odd-one-out file")) if line.strip()]
    return partial(evaluate, questions=questions, name=name)


@register_task("oddoneout")
class OddOneOut(EvaluationTask):
    title = "odd one out"
    OPTIONS = (Option("oddoneout_file", Path, flag="--oddoneout-file", metavar="PATH",
                      help="one question a line, the odd word last (default: <data>/oddoneout/)"),)
    METRICS = {"accuracy": (0.0, 1.0)}
    PANELS = (Panel("Odd one out accuracy", lambda s: s.dataset),)
    DATA = (ManifestEntry("oddoneout/questions.txt", "oddoneout", "questions", SIZE, "SHA256",
                          "written by the test", "CC0"),)

    def requested(self, given):
        return {Path(given["oddoneout_file"]).stem} if "oddoneout_file" in given else set()

    def plan(self, settings, root):
        path = settings["oddoneout_file"] or root / "oddoneout" / "questions.txt"
        return [(Path(path).stem, partial(read_job, path, Path(path).stem))]
'''

WORDS = [f"w{i}" for i in range(24)]


def clustered_kv():
    """Three clusters of eight words, with noise enough that some questions are answered wrong."""
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(3, 6))
    rows = [centres[i // 8] + 1.1 * rng.normal(size=6) for i in range(len(WORDS))]
    kv = KeyedVectors(vector_size=6)
    kv.add_vectors(WORDS, np.asarray(rows, dtype=np.float32))
    return kv


QUESTIONS = ["w0 w1 w2 w9", "w3 w4 w5 w17", "w8 w10 w12 w1", "w16 w18 w20 w6", "w1 w6 w7 w20",
             "w9 w11 w13 w22", "w17 w19 w21 w2", "w2 w4 w6 w14", "w0 w3 w5 w23", "w0 w1 w2 unknownword"]


def cos(u, v):
    return sum(a * b for a, b in zip(u, v)) / math.sqrt(sum(a * a for a in u) * sum(b * b for b in v))


def naive_odd_one_out(kv, lines):
    """Accuracy by hand: the word whose summed cosine to the others is lowest, over the
    questions whose words are all known."""
    right = covered = 0
    for line in lines:
        words = line.split()
        if any(w not in kv.key_to_index for w in words):
            continue
        covered += 1
        vectors = [kv[w].tolist() for w in words]
        totals = [sum(cos(v, u) for u in vectors if u is not v) for v in vectors]
        right += totals.index(min(totals)) == len(words) - 1
    return right / covered, covered


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """The plugin file in a folder on sys.path and PYTHONPATH, its data under a data root; the
    registration is undone afterwards (other tests see the four built-in tasks only)."""
    root = tmp_path / "data"
    (root / "oddoneout").mkdir(parents=True)
    data = root / "oddoneout" / "questions.txt"
    data.write_text("\n".join(QUESTIONS) + "\n")
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE.replace("SIZE", str(data.stat().st_size)).replace(
        "SHA256", hashlib.sha256(data.read_bytes()).hexdigest()))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), str(REPO)]))
    clustered_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    yield {"root": root, "data": data, "folder": folder, "vectors": tmp_path / "v.txt"}
    EVALUATION_TASKS.pop("oddoneout", None)
    sys.modules.pop(PLUGIN, None)


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_task_from_one_file_is_run_and_reported(plugin, capsys, tmp_path):
    expected, covered = naive_odd_one_out(clustered_kv(), QUESTIONS)
    assert 0 < expected < 1 and covered == 9  # the check can fail both ways
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    code, out, err = run(capsys, plugin["vectors"], "--plugin", PLUGIN, "--tasks", "oddoneout,similarity",
                         "--similarity-sets", "none", "--pairs", f"own={tmp_path / 'pairs.txt'}",
                         "--data-dir", plugin["root"], "--json", out_json, "--plot", out_png, "-q")
    # the similarity file is missing and asked for by name: skipped, exit 1; the plugin's row is there
    assert code == 1 and "requested but skipped: similarity/own" in err
    row = next(line.split() for line in out.splitlines() if line.startswith("oddoneout"))
    assert row[:3] == ["oddoneout", "questions", "accuracy"]
    assert row[3] == f"{expected:.4f}" and row[4] == f"({math.floor(100 * covered / 10)}%)"
    report = json.loads(out_json.read_text())
    score = next(s for s in report["models"][0]["scores"] if s["task"] == "oddoneout")
    assert score["value"] == pytest.approx(expected) and (score["covered"], score["total"]) == (9, 10)
    assert report["settings"]["tasks"] == ["oddoneout", "similarity"]
    assert report["settings"]["oddoneout_file"] is None  # its setting, at its default
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_its_flag_is_made_from_its_declaration_and_its_panel_is_drawn(plugin, capsys, tmp_path):
    own = tmp_path / "mine.txt"
    own.write_text("\n".join(QUESTIONS[:4]) + "\n")
    code, out, err = run(capsys, plugin["vectors"], "--plugin", PLUGIN, "--tasks", "oddoneout",
                         "--oddoneout-file", own, "-q")
    assert code == 0, err
    expected, _ = naive_odd_one_out(clustered_kv(), QUESTIONS[:4])
    row = next(line.split() for line in out.splitlines() if line.startswith("oddoneout"))
    assert row[1:4] == ["mine", "accuracy", f"{expected:.4f}"]
    # a file it was given by name and cannot read is a requested skip (its `requested`)
    code, out, err = run(capsys, plugin["vectors"], "--plugin", PLUGIN, "--tasks", "oddoneout",
                         "--oddoneout-file", tmp_path / "none.txt", "-q")
    assert code == 1 and "SKIPPED (requested): oddoneout/none" in out
    help_text = " ".join(cli.build_parser().format_help().split())
    assert "odd one out: --oddoneout-file PATH one question a line" in help_text
    kv = clustered_kv()
    result = run_suite([LoadedVectors("m", kv, LoadReport("mem", len(kv), 6))],
                       SuiteConfig(tasks=("oddoneout",), data_dir=plugin["root"]))
    assert report_module._panels(result) == {"Odd one out accuracy": {"questions": [pytest.approx(
        naive_odd_one_out(kv, QUESTIONS)[0])]}}


def test_an_option_the_task_does_not_declare_is_refused_in_one_line(plugin, capsys):
    for argv, message in (
            (["--pos-window", "3"], "semhuff-eval: error: --pos-window (the pos task's): not used by "
                                    "--tasks oddoneout (they take: --oddoneout-file)"),
            (["--oddoneout-size", "3"], "semhuff-eval: error: unrecognized arguments: --oddoneout-size 3")):
        code, out, err = run(capsys, plugin["vectors"], "--plugin", PLUGIN, "--tasks", "oddoneout", *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert err.startswith(message), err
    with pytest.raises(OptionError, match="^no evaluation task takes oddoneout_size ") as info:
        SuiteConfig(tasks=("oddoneout",), oddoneout_size=3)
    assert "\n" not in str(info.value)
    with pytest.raises(OptionError, match="unknown evaluation task 'nosuch'"):
        SuiteConfig(tasks=("nosuch",))


def test_its_metric_range_is_checked_and_its_data_row_is_checked(plugin, capsys):
    code, out, err = run(capsys, "--plugin", PLUGIN, "--check-data", "--data-dir", plugin["root"])
    assert code == 1  # the package's manifest files are not in this data root
    assert any(line.split()[:2] == ["ok", "oddoneout/questions.txt"] for line in out.splitlines())
    with open(plugin["data"], "a") as handle:
        handle.write("w1 w2 w3 w20\n")
    code, out, err = run(capsys, "--plugin", PLUGIN, "--check-data", "--data-dir", plugin["root"])
    assert any(line.startswith("size differs") and "oddoneout/questions.txt" in line for line in out.splitlines())
    assert out_of_range(Score("oddoneout", "q", "accuracy", 1.25)) == "accuracy = 1.25 outside [0, 1]"
    assert out_of_range(Score("oddoneout", "q", "accuracy", 0.5)) is None


def test_the_command_imports_the_plugin_from_pythonpath(plugin, tmp_path):
    # the real command line: the plugin's folder on PYTHONPATH, nothing else
    command = [sys.executable, "-m", "semhuff.cli.evaluate", str(plugin["vectors"]), "--tasks", "oddoneout",
               "--data-dir", str(plugin["root"]), "-q"]
    result = subprocess.run(command + ["--plugin", PLUGIN], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert f"{naive_odd_one_out(clustered_kv(), QUESTIONS)[0]:.4f}" in result.stdout
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "'oddoneout' not among: similarity, analogy, synonyms, pos" in result.stderr


# ---------------------------------------------------------------- the built-in tasks, registered

def test_builtin_tasks_are_registered_in_report_order_with_their_ranges():
    assert list(EVALUATION_TASKS)[:4] == ["similarity", "analogy", "synonyms", "pos"]
    for task in EVALUATION_TASKS.values():
        assert type(task).__module__ == f"semhuff.eval.{task.name}"  # each in its own module
    cases = [("similarity", "spearman", -1.0, True), ("similarity", "pearson", -1.01, False),
             ("analogy", "3CosAdd", 1.0, True), ("analogy", "3CosMul", -0.1, False),
             ("synonyms", "MR", 0.99, False), ("synonyms", "MR", 1e6, True), ("synonyms", "MRR", 1.2, False),
             ("pos", "accuracy-oov", 1.0, True), ("pos", "accuracy", 1.5, False)]
    for task, metric, value, possible in cases:
        assert (out_of_range(Score(task, "d", metric, value)) is None) == possible, (task, metric, value)
    assert out_of_range(Score("unregistered", "d", "x", 1e9)) is None  # no declared range
    assert out_of_range(Score("unregistered", "d", "x", math.inf))


def _report(scores):
    from semhuff.eval.suite import ModelResult, Report
    models = [ModelResult(name, name, 10, 4, {}, [Score(t, d, m, v + i, **kw) for t, d, m, v, kw in scores])
              for i, name in enumerate(("a", "b"))]
    return Report(models, [], {})


def test_builtin_panels_come_from_the_registry():
    result = _report([("synonyms", "wordnet", "MR", 50.0, {"higher_is_better": False}),
                      ("synonyms", "wordnet", "MRR", 0.1, {}),
                      ("pos", "conll2000", "accuracy", 0.5, {}), ("pos", "conll2000", "accuracy-oov", 0.2, {}),
                      ("analogy", "google:family", "3CosAdd", 0.1, {}), ("analogy", "google:semantic", "3CosAdd", 0.2, {}),
                      ("analogy", "google", "3CosMul", 0.3, {}),
                      ("similarity", "ws353", "spearman", 0.4, {}), ("similarity", "ws353", "pearson", 0.4, {})])
    # by hand: one panel per kind of score in the report's fixed order, sections and pearson left out
    assert report_module._panels(result) == {
        "Word-pair similarity (Spearman)": {"ws353": [0.4, 1.4]},
        "Analogy accuracy": {"semantic 3CosAdd": [0.2, 1.2], "google 3CosMul": [0.3, 1.3]},
        "POS tagging accuracy": {"conll2000": [0.5, 1.5]},
        "Synonym MRR": {"wordnet": [0.1, 1.1]},
        "Synonym mean rank (lower is better)": {"wordnet": [50.0, 51.0]},
    }
    assert report_module._log_scale_titles() == {"Synonym mean rank (lower is better)"}


def test_a_second_task_of_the_same_name_or_option_is_refused():
    class Other(EvaluationTask):
        pass

    with pytest.raises(ValueError, match="'pos' is taken"):
        register_task("pos")(Other)

    from semhuff.options import Option

    class Clash(EvaluationTask):
        OPTIONS = (Option("pos_window", int),)

    with pytest.raises(ValueError, match="option 'pos_window' is declared by the pos task"):
        register_task("clash")(Clash)
    assert "clash" not in EVALUATION_TASKS
