"""How the LM output layers compute (``semhuff.lm.layers`` uses them; they know no layer class):
a tree's paths (``paths``: torch, ``paths_triton``: CUDA, ``path_gradients``: the weights'
gradient both share), a class softmax's in-cluster part (``clusters``: the torch loop and the
choice of form, ``clusters_numba``: the CPU, ``clusters_triton``: CUDA), the dtypes they add up
in (``precision``) and the optimizer's state of rows that move (``optimizer_state``, with
``clip_grad_norm`` and ``check_optimizer`` for sparse gradients). A module is named for what it
computes, then the backend."""
