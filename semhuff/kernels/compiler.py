"""How the training loops are compiled: Numba's nopython pipeline with two changes that let LLVM
keep a row in registers.

* **No aliasing between array arguments** (Numba's ``noalias`` flag, which its parallel
  backend uses too). Without it LLVM must assume that writing an output row may change the
  input vector, so it reloads the input vector and the error accumulator from memory at every
  path node: ~6 row loads and 2 row stores per node. With it they stay in registers across the
  whole path: ~1 row load and 1 row store per node. The callers guarantee the promise: the
  input vectors, the output rows and every array of a layer's state are separate buffers
  (``devices.check_separate``, before every chunk ``CpuSession`` trains).
* **The vector width the CPU can do**: LLVM's tuning for many Intel CPUs with AVX-512 prefers
  256-bit vectors; a 100-float row is then 13 vector operations instead of 7, and the input
  vector, the error and the row no longer fit in the 32 vector registers together. The
  function attribute ``prefer-vector-width`` overrides the tuning for these functions only
  (not for the rest of the process). ``SEMHUFF_VECTOR_WIDTH`` (bits) changes it; CPUs without
  AVX-512 use what they have.

Measured on an Intel Xeon (AVX-512) guest, kernel only: docs/performance.md.
"""
from __future__ import annotations

import os

from llvmlite import ir
from numba.core import cgutils, lowering, types
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import register_pass
from numba.core.typed_passes import NativeLowering
from numba.extending import intrinsic
from numba.np import arrayobj

VECTOR_WIDTH = int(os.environ.get("SEMHUFF_VECTOR_WIDTH", "512"))


class _WideLower(lowering.Lower):
    def pre_lower(self):
        super().pre_lower()
        # llvmlite validates attribute names against a fixed list that lacks LLVM's string
        # attributes; the set underneath takes it and prints it verbatim into the IR.
        set.add(self.builder.function.attributes, f'"prefer-vector-width"="{VECTOR_WIDTH}"')


@register_pass(mutates_CFG=True, analysis_only=False)
class _WideNativeLowering(NativeLowering):
    _name = "semhuff_native_lowering"

    @property
    def lowering_class(self):
        return _WideLower


class KernelCompiler(CompilerBase):
    """``numba.njit(pipeline_class=KernelCompiler)``: only for kernels whose array arguments
    never overlap."""

    def define_pipelines(self):
        self.state.flags.noalias = True
        pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pm.passes = [(_WideNativeLowering, "native lowering, wide vectors") if cls is NativeLowering
                     else (cls, what) for cls, what in pm.passes]
        pm.finalize()
        return [pm]


@intrinsic
def stack_row(typingctx, size):
    """``stack_row(D)``: an uninitialised float32 array of the compile-time constant ``D`` on
    the calling kernel's stack (one slot in its entry block, however often it is called).
    Unlike ``np.empty``, whose memory the runtime owns and any call could touch, LLVM sees
    that nothing else can reach it, so a row accumulated across a loop (the input's error
    along a path) can stay in registers even when the loop may call ``exp``."""
    if not isinstance(size, types.IntegerLiteral):
        return None
    n = size.literal_value
    arrty = types.Array(types.float32, 1, "C")

    def codegen(context, builder, signature, args):
        data = cgutils.alloca_once(builder, context.get_value_type(types.float32), size=n)
        intp = context.get_value_type(types.intp)
        row = arrayobj.make_array(arrty)(context, builder)
        arrayobj.populate_array(row, data=data, shape=[intp(n)], strides=[intp(4)],
                                itemsize=intp(4), meminfo=None)
        return row._getvalue()

    return arrty(size), codegen


@intrinsic
def prefetch_row(typingctx, rows, row):
    """``prefetch_row(a, i)``: ask the cache for every 64-byte line of row ``i`` of the 2-D
    array ``a`` (for writing, keep in all levels); no effect on any value."""
    if not isinstance(rows, types.Array) or rows.ndim != 2 or not isinstance(row, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        arrty, rowty = signature.args
        arr = context.make_array(arrty)(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        i32 = ir.IntType(32)
        start = builder.mul(context.cast(builder, args[1], rowty, types.intp),
                            cgutils.unpack_tuple(builder, arr.strides)[0])
        start = builder.add(builder.ptrtoint(arr.data, intp), start)
        width = builder.mul(cgutils.unpack_tuple(builder, arr.shape)[1],
                            intp(arrty.dtype.bitwidth // 8))
        fnty = ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        with cgutils.for_range_slice(builder, intp(0), width, intp(64)) as (offset, _):
            line = builder.inttoptr(builder.add(start, offset), cgutils.voidptr_t)
            builder.call(fn, [line, i32(1), i32(3), i32(1)])  # write, keep, data cache
        return context.get_dummy_value()

    return types.void(rows, row), codegen
