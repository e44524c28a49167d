"""Force/virial assembly from PyTorch: hipkern.torch.build_plan and
edge_force_assembly (DeePMD-kit's signature) on a random edge list, on the
GPU when torch sees one and hipkern has device code, else on the CPU;
checked against a float64 index_add_ reference.

    python python/examples/force_torch.py
"""
import torch

import hipkern
import hipkern.torch as ht

use_gpu = torch.cuda.is_available() and hipkern.platform() != "cpu"
device = "cuda" if use_gpu else "cpu"
n_atoms, n_edges = 2_000, 100_000
gen = torch.Generator().manual_seed(7)
src = torch.randint(0, n_atoms, (n_edges,), generator=gen).to(device)
dst = torch.randint(0, n_atoms, (n_edges,), generator=gen).to(device)
g = torch.randn(n_edges, 3, generator=gen).to(device)         # dE/d(edge_vec), float32
edge_vec = torch.randn(n_edges, 3, generator=gen).to(device)

plan = ht.build_plan(src, dst, n_atoms)                        # 4 int32 tensors
force, virial = ht.edge_force_assembly(g, edge_vec, *plan)     # (N, 3), (N, 9), float32

# The float64 reference: four index_add_ scatters.
g64, r64 = g.double(), edge_vec.double()
outer = -(g64[:, :, None] * r64[:, None, :]).reshape(-1, 9)
want_f = torch.zeros(n_atoms, 3, dtype=torch.float64, device=device)
want_w = torch.zeros(n_atoms, 9, dtype=torch.float64, device=device)
want_f.index_add_(0, dst, g64).index_add_(0, src, -g64)
want_w.index_add_(0, dst, 0.5 * outer).index_add_(0, src, 0.5 * outer)
err_f = ((force.double() - want_f).abs().max() / want_f.abs().max()).item()
err_w = ((virial.double() - want_w).abs().max() / want_w.abs().max()).item()
print(f"hipkern {hipkern.platform()} build, {device}: {n_edges} edges, {n_atoms} atoms; "
      f"max rel error force {err_f:.1e}, virial {err_w:.1e} (float32 outputs)")
if not (err_f < 1e-6 and err_w < 1e-6):
    raise SystemExit("force assembly: MISMATCH")
