"""The device check of the layers' generation on CUDA against the CPU's whole distribution.

    python eval/bench/lm_generation_gpu.py   (prints one line per check; exit 1 on a failure)

The tree's pruned-beam top k (the form off the CPU) and its walk: top k equal to the CPU
log_prob's for every row called exact, the rest taken whole by ``topk``; the walk and the
top-k draw read nothing back to the host (``torch.cuda.set_sync_debug_mode("error")``); a
row's draws against its distribution (total variation over 40,000 draws); the class layer the
same; a speed line (V 50k, H 512, 256 rows) against the adaptive softmax.
"""
import sys
import time

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    from semhuff.lm import make_output_layer
    from semhuff.vocab import Vocab
    import numpy as np
    failures = 0

    def check(name, ok, detail=""):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}", flush=True)

    def vocab(V):
        counts = np.maximum((1e7 / np.arange(1, V + 1)).astype(np.int64), 1)
        return Vocab([f"w{i}" for i in range(V)], counts, int(counts.sum()))
    torch.manual_seed(0)
    for name in ("tree", "class", "self-organized-binary"):
        cpu = make_output_layer(name, 64, vocab(5000))
        with torch.no_grad():
            for p in cpu.parameters():
                p.normal_(0, 0.3)
        gpu = make_output_layer(name, 64, vocab(5000)).cuda()
        gpu.load_state_dict(cpu.state_dict())
        h = torch.randn(300, 64)
        ref = cpu.log_prob(h).detach().topk(10, dim=1).values
        values, _ = gpu.topk(h.cuda(), 10)
        check(f"{name} topk(10) on CUDA = CPU whole distribution's",
              torch.allclose(values.cpu().float(), ref, atol=1e-4),
              f"max diff {(values.cpu().float() - ref).abs().max():.2e}")
        hc = h.cuda()
        g = torch.Generator(device="cuda").manual_seed(1)
        try:
            torch.cuda.set_sync_debug_mode("error")
            gpu.walk_sample(hc, g)
            torch.cuda.set_sync_debug_mode(0)
            check(f"{name} walk_sample reads nothing back", True)
        except RuntimeError as exc:
            torch.cuda.set_sync_debug_mode(0)
            check(f"{name} walk_sample reads nothing back", False, str(exc).splitlines()[0])
        row = hc[:1].expand(40000, 64)
        p = cpu.log_prob(h[:1]).detach().double().exp()[0]
        for kw in ({}, {"top_k": 5, "temperature": 0.7}):
            draws = gpu.sample(row, generator=g, **kw).cpu()
            emp = torch.bincount(draws, minlength=p.numel()).double() / len(draws)
            want = p.clone()
            if kw:
                want = want ** (1 / 0.7)
                want[want.argsort(descending=True)[5:]] = 0
                want /= want.sum()
            tv = 0.5 * float((emp - want).abs().sum())
            check(f"{name} sample {kw} draws its distribution", tv < 0.03, f"TV {tv:.4f}")
    V, D = 50000, 512
    layers = {n: make_output_layer(n, D, vocab(V)).cuda() for n in ("adaptive", "tree")}
    h = torch.randn(256, D, device="cuda")
    for n, layer in layers.items():
        with torch.no_grad():
            for p in layer.parameters():
                p.normal_(0, 0.05)
        for what, call in (("predict", lambda: layer.predict(h)),
                           ("topk(10)", lambda: layer.topk(h, 10)),
                           ("sample", lambda: layer.sample(h)),
                           ("log_prob 1 row", lambda: layer.log_prob(h[:1]))):
            call()
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            print(f"time {n} {what}: {(time.perf_counter() - started) / 5 * 1e3:.2f} ms",
                  flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
