"""The README's one test command tests the whole project, and CI runs exactly it (issue 48: the
README's `pip install -e '.[test]'` brought no torch, so every language-model test skipped,
while .ci/run installed the torch extra on the side)."""
import configparser
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# what a test module imports (or skips without) -> the requirement that brings it
PROVIDERS = {"torch": "torch", "triton": "torch",  # triton comes with torch's Linux wheels
             "distributed": "dask", "testfixtures": "testfixtures", "numba_cuda": "numba-cuda",
             "gensim": "gensim", "networkx": "networkx", "transformers": "transformers"}
# the CuPy backend is the cuda extra's alone: a test of it needs a GPU, so the test extra skips it
GPU_ONLY = {"cupy"}


def _requirement_names(block: str) -> set:
    return {re.split(r"[\[<>=!~; ]", line.strip(), maxsplit=1)[0].lower()
            for line in block.splitlines() if line.strip() and not line.strip().startswith("#")}


def _setup():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    commands = [line for block in blocks for line in block.splitlines() if "pytest" in line]
    assert len(commands) == 1, commands  # one test command, not a choice of them
    return commands[0]


def test_every_package_a_test_module_skips_without_is_in_the_test_extra():
    cfg = _setup()
    provided = (_requirement_names(cfg["options.extras_require"]["test"])
                | _requirement_names(cfg["options"]["install_requires"]))
    skipped_without = set()
    for path in sorted((ROOT / "tests").glob("*.py")):
        text = path.read_text()
        skipped_without |= set(re.findall(r"importorskip\(\s*[\"']([\w.]+)[\"']", text))
        skipped_without |= set(re.findall(r"find_spec\(\s*[\"']([\w.]+)[\"']", text))
    assert "torch" in skipped_without and "distributed" in skipped_without  # the scan works
    skipped_without = {name for name in skipped_without if name.split(".")[0] != "semhuff"}
    unknown = skipped_without - set(PROVIDERS) - GPU_ONLY
    assert not unknown, f"say which requirement brings {unknown} (PROVIDERS)"
    missing = {name: PROVIDERS[name] for name in skipped_without - GPU_ONLY
               if PROVIDERS[name] not in provided}
    assert not missing, f"test modules skip without {missing}: add them to the test extra"


def test_ci_runs_the_readme_test_command_and_installs_nothing_beside_it():
    command = _readme_test_command()
    install, _, test = command.partition(" && ")
    assert shlex.split(install) == ["pip", "install", "-e", ".[test]"]
    ci = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in ci.splitlines() if not line.strip().startswith(("#", "echo"))]
    installs = [shlex.split(line) for line in lines if "pip install" in line]
    installed = [args[-1] for args in installs]
    assert installed == ["pip", ".", ".[test]"], installs  # (pip upgrades itself first)
    assert test in lines, f"CI does not run the README's {test!r}"
    assert "exit 1" in ci.split(test, 1)[1] and '"$status" -eq 5' in ci  # no tests: a failure
