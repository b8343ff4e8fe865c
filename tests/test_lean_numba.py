"""semhuff-train's start skips what Numba would import for BLAS (semhuff.lean_numba): no
``scipy.linalg`` in a training process, the same vectors, and ``import scipy.linalg`` still works
afterwards; a library import of semhuff leaves Numba alone."""
import json
import subprocess
import sys
import textwrap

from gensim.test.utils import datapath

TRAIN_AND_REPORT = textwrap.dedent("""
    import json, sys
    from semhuff.cli import train
    rc = train.main([sys.argv[1], "-o", sys.argv[2], "-q", "--no-progress", "--epochs", "1",
                     "--dim", "16", "--workers", "1", *sys.argv[3:]])
    had_linalg = "scipy.linalg" in sys.modules
    from numba.np import arraymath
    import scipy.linalg  # still importable
    print(json.dumps({"rc": rc, "linalg": had_linalg, "blas": arraymath._HAVE_BLAS,
                      "norm": float(scipy.linalg.norm([3.0, 4.0]))}))
""")


def _train(tmp_path, out, *extra):
    proc = subprocess.run([sys.executable, "-c", TRAIN_AND_REPORT, datapath("lee_background.cor"),
                           str(tmp_path / out), *extra], capture_output=True, text=True,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_training_process_never_imports_scipy_linalg(tmp_path):
    for loss in ("hs", "ns"):
        report = _train(tmp_path, f"{loss}.bin", "--loss", loss)
        assert report == {"rc": 0, "linalg": False, "blas": False, "norm": 5.0}, loss


def test_vectors_are_the_same_as_a_process_that_probed_blas(tmp_path):
    """The skipped probe changes no kernel: one worker, same seed, the same bytes as a run in a
    process where SciPy's linear algebra was imported before Numba started."""
    _train(tmp_path, "lean.bin")
    probed = textwrap.dedent("""
        import sys, scipy.linalg
        from semhuff.cli import train
        sys.exit(train.main([sys.argv[1], "-o", sys.argv[2], "-q", "--no-progress", "--epochs",
                             "1", "--dim", "16", "--workers", "1"]))
    """)
    subprocess.run([sys.executable, "-c", probed, datapath("lee_background.cor"),
                    str(tmp_path / "probed.bin")], check=True, cwd=str(tmp_path))
    assert (tmp_path / "lean.bin").read_bytes() == (tmp_path / "probed.bin").read_bytes()


def test_library_import_leaves_numba_alone():
    code = ("import semhuff, numpy as np\n"
            "from semhuff import Word2Vec\n"
            "import numba\n"
            "f = numba.njit(lambda a, b: np.dot(a, b))\n"
            "print(f(np.ones(3), np.ones(3)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "3.0"
