"""Compile the numba.cuda kernels to PTX for an H100 (sm_90) without a GPU: Numba's real CUDA
type inference and code generation, which the simulator skips. Needs NVVM (the CUDA toolkit, e.g.
``pip install 'numba-cuda[cu12]'``), not a driver. Loads the kernel modules by path, so any
interpreter with numpy and numba-cuda can run it: the batched form's kernels and every
configuration of the sentence kernel (skip-gram and CBOW, HS, NS in both orders, HS + NS, the
mixed order, the saturated clip):

    python tests/gpu_ptx_check.py [REPO]

Exit 0: all compiled; 1: a kernel failed (the error is printed); 3: no CUDA toolkit here.
"""
import importlib.util
import os
import sys
import types

import numba
import numpy as np
from numba import cuda, typeof

REPO = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _H100:
    compute_capability = (9, 0)


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    import numba.cuda.dispatcher as dispatcher
    dispatcher.get_current_device = _H100  # device functions compile "for the current device"
    for name in ("semhuff", "semhuff.gpu", "semhuff.kernels"):
        package = types.ModuleType(name)
        package.__path__ = []
        sys.modules[name] = package
    _load("semhuff.version", os.path.join(REPO, "semhuff", "version.py"))
    _load("semhuff.numba_cache", os.path.join(REPO, "semhuff", "numba_cache.py"))
    _load("semhuff.kernels.common", os.path.join(REPO, "semhuff", "kernels", "common.py"))
    _load("semhuff.gpu.noise", os.path.join(REPO, "semhuff", "gpu", "noise.py"))
    nk = _load("semhuff.gpu.numba_kernels", os.path.join(REPO, "semhuff", "gpu", "numba_kernels.py"))
    sk = _load("semhuff.gpu.sentence_kernels",
               os.path.join(REPO, "semhuff", "gpu", "sentence_kernels.py"))
    a = {dt: {nd: typeof(np.zeros((2,) * nd, dt)) for nd in (1, 2)}
         for dt in (np.int8, np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64)}
    i32, f32 = a[np.int32], a[np.float32]
    i64, u64, b = numba.int64, numba.uint64, numba.boolean
    forward, update = nk.batch_kernels(100, 24)
    counters = (i32[1], i32[1], f32[1], f32[1])  # hits and curvature of output and input rows
    kernels = {
        "prepare_hs": (nk.prepare_hs, (i32[2], a[np.int8][2], i32[1], i32[1], i64, i64, i32[2],
                                       f32[2], i32[1], *counters)),
        "prepare_ns": (nk.prepare_ns, (a[np.uint32][1], i32[1], i64, i32[1], i64, i64, u64, u64,
                                       i32[2], f32[2], i32[1], *counters)),
        "forward": (forward, (f32[2], f32[2], i32[1], a[np.int64][1], b, b, f32[1], i64, i64,
                              i32[2], f32[2], i32[1], b, f32[2], f32[2], f32[2], *counters,
                              a[np.float64][1])),
        "update": (update, (f32[2], f32[2], i32[1], a[np.int64][1], b, b, i64, i64, i32[2],
                            i32[1], f32[2], f32[2], f32[2], *counters, b)),
    }
    sentence_args = (i32[1], a[np.int64][1], i32[1], a[np.uint64][1], f32[2], f32[2], i32[2],
                     a[np.int8][2], i32[1], f32[2], a[np.uint32][1], i32[1], f32[1],
                     a[np.float64][2], a[np.uint32][1], b, numba.float64, numba.float64, i64, i64,
                     a[np.float64][1], a[np.uint32][1], i32[2], i32[1])
    for sg, hs, negative, batched, top, saturate, mean, atomic in (
            (True, True, 0, False, 0, False, True, True), (True, True, 0, False, 4, True, True, True),
            (True, True, 0, False, 4, False, True, False),
            (True, False, 5, False, 0, False, True, True), (True, False, 5, True, 0, False, True, True),
            (True, True, 5, False, 4, False, True, True), (False, True, 0, False, 0, False, True, True),
            (False, False, 5, False, 0, False, False, False),
            (False, True, 5, False, 0, False, True, True)):
        name = (f"sentence {'sg' if sg else 'cbow' + ('' if mean else '-sum')} "
                f"{'hs' if hs else ''}{'+' if hs and negative else ''}{'ns' if negative else ''}"
                f"{' batched' if batched else ''}{f' top {top}' if top else ''}"
                f"{' saturate' if saturate else ''}{'' if atomic else ' plain stores'}")
        kernel = sk.sentence_kernel(sg, 100, 5, mean, hs, top, saturate, negative, batched,
                                    atomic=atomic, pick=hs and not negative and top == 4)
        kernels[name + (" picks" if hs and not negative and top == 4 else "")] = (kernel,
                                                                                  sentence_args)
    kernels["sentence cbow hs picks"] = (
        sk.sentence_kernel(False, 100, 5, True, True, 0, False, 0, False, pick=True),
        sentence_args)
    for sg, mean in ((True, True), (False, False)):
        kernels[f"observe {'sg' if sg else 'cbow-sum'}"] = (
            sk.observe_kernel(sg, 100, mean), (f32[2], f32[2], i32[2], i32[1], f32[2], f32[1],
                                               i32[1], i32[2], a[np.float64][2],
                                               a[np.float64][2]))
    kernels["copy_count"] = (sk.copy_count, (i32[1], a[np.float64][1]))
    failed = 0
    for name, (kernel, signature) in kernels.items():
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
        except Exception as exc:  # noqa: BLE001 - reported below
            text = " ".join(str(exc).split())
            if type(exc).__name__ in ("DynamicLibNotFoundError", "NvvmSupportError") or any(
                    lib in text.lower() for lib in ("libnvvm", "libnvrtc", "nvvm cannot")):
                print(f"no CUDA toolkit (NVVM/NVRTC) here: {text}")
                return 3
            print(f"{name}: FAILED {type(exc).__name__}: {text}")
            failed += 1
            continue
        print(f"{name}: {len(ptx):,} characters of PTX, {ptx.count('atom.') + ptx.count('red.')} atomics")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
