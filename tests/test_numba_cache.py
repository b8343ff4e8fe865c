"""Numba's cache of semhuff's kernels lives in a per-user folder, never inside the installed
package: a cache folder left in site-packages/semhuff by pip's uninstall turned the package
into a namespace package and broke every console script after `pip install -e` (issue 12.1).
The README's own install sequence is run end to end by .ci/run."""
import importlib
import os
import subprocess
import sys
import textwrap

import semhuff
from semhuff import numba_cache

PACKAGE = os.path.dirname(os.path.abspath(semhuff.__file__))

PROBE = textwrap.dedent("""
    import json, numpy as np
    from semhuff.kernels.common import mix_seed
    from semhuff.trees import huffman
    mix_seed(1, 2, 3)
    huffman.build_huffman(np.array([5, 3, 2, 1]))
    fns = [mix_seed, huffman._huffman_parents]
    print(json.dumps({"paths": [f._cache._cache_path for f in fns],
                      "hits": [sum(f.stats.cache_hits.values()) for f in fns],
                      "misses": [sum(f.stats.cache_misses.values()) for f in fns]}))
""")


def _probe(cache_dir):
    import json
    env = dict(os.environ, SEMHUFF_NUMBA_CACHE=str(cache_dir))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         check=True, cwd=str(cache_dir))
    return {**json.loads(out.stdout.strip().splitlines()[-1]),
            "notices": [line for line in out.stderr.splitlines() if "compiling kernels" in line]}


def _nbi_files(root):
    return {os.path.join(d, f) for d, _, files in os.walk(root) for f in files
            if f.endswith((".nbi", ".nbc"))}


def test_kernels_cache_outside_the_package_and_hit_in_a_new_process(tmp_path):
    before = _nbi_files(PACKAGE)
    first = _probe(tmp_path)
    for path in first["paths"]:
        assert os.path.commonpath([path, str(tmp_path)]) == str(tmp_path), path
        assert os.path.commonpath([path, PACKAGE]) != PACKAGE
    assert first["misses"] == [1, 1]
    # the first compilation says so, once for both (issue 48: 13 s of silence in the API)
    assert len(first["notices"]) == 1 and "(first run only" in first["notices"][0], first
    assert str(tmp_path) in first["notices"][0]
    second = _probe(tmp_path)  # a fresh process loads what the first one compiled
    assert second["hits"] == [1, 1] and second["misses"] == [0, 0]
    assert second["notices"] == []  # loading from the cache is not compiling
    assert _nbi_files(PACKAGE) == before  # nothing new written into the package
    assert _nbi_files(tmp_path)
    # one folder per installed copy and version
    assert os.listdir(tmp_path) == [numba_cache.copy_tag()]


def test_other_packages_keep_numbas_own_locator(tmp_path, monkeypatch):
    (tmp_path / "other_pkg_mod.py").write_text(
        "import numba\n@numba.njit(cache=True)\ndef f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("other_pkg_mod")
    locator = mod.f._cache._impl.locator
    assert not isinstance(locator, numba_cache.SemhuffCacheLocator)
    assert numba_cache.SemhuffCacheLocator.from_function(mod.f.py_func, str(tmp_path / "other_pkg_mod.py")) is None


def test_the_console_scripts_show_the_compile_notice_with_v_only():
    import logging
    from semhuff.cli.common import setup_logging
    notice = logging.getLogger("semhuff.numba_cache")
    before = notice.level
    try:
        setup_logging(0)
        assert not notice.isEnabledFor(logging.WARNING)
        setup_logging(1)
        assert notice.isEnabledFor(logging.WARNING)
    finally:
        notice.setLevel(before)
