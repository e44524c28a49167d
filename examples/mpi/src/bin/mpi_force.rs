//! Force assembly with a spatial domain decomposition, as LAMMPS runs a
//! machine-learned potential: a periodic box of atoms cut into slabs along
//! x, one per rank. Each rank takes the edges of the atoms it owns (the
//! centre, `dst`), and their neighbours (`src`) as extended atoms: a
//! periodic image of one of its own atoms is a ghost folded into its owner
//! through `mapping`; an atom of another rank is a ghost with a row of its
//! own, whose force and virial go back to their owner (reverse
//! communication, MPI all-to-all). Rank 0 gathers every atom's force and
//! per-atom virial and compares them with one rank assembling the whole
//! system (float64: within rounding, 1e-12 of the largest value).
//!
//!     mpirun -np 4 mpi_force [--cpu]
use hipkern::force::{
    assemble_device, assemble_with_plan, CsrPlan, DevicePlan, GhostMapping, VirialSplit,
};
use hipkern::rng::SplitMix64;
use hipkern::Result;
use hipkern_mpi_examples::{all_to_all, compare, fail, gather, verdict, Backend};
use mpi::traits::*;
use std::collections::HashMap;

const N: usize = 6_000;
const CELLS: usize = 8; // cell side 1/8 ≥ the cutoff
const CUTOFF: f64 = 0.117; // about 40 neighbours an atom

/// Positions in the unit box, the same on every rank.
fn atoms() -> Vec<[f64; 3]> {
    let mut rng = SplitMix64::new(7);
    (0..N)
        .map(|_| {
            [0, 1, 2]
                .map(|_| 0.5 * (1.0 + rng.uniform_pm1()))
                .map(|x| x.min(1.0 - 1e-15))
        })
        .collect()
}

/// Directed edges (src j → dst i, both directions) within the cutoff under
/// the minimum image, with the periodic image of j that i sees.
struct Edge {
    src: usize,
    dst: usize,
    image: [i8; 3],
    vec: [f64; 3],
}

fn edges(x: &[[f64; 3]]) -> Vec<Edge> {
    let cell = |p: &[f64; 3]| p.map(|v| ((v * CELLS as f64) as usize).min(CELLS - 1));
    let mut cells: HashMap<[usize; 3], Vec<usize>> = HashMap::new();
    for (i, p) in x.iter().enumerate() {
        cells.entry(cell(p)).or_default().push(i);
    }
    let mut out = Vec::new();
    for (i, p) in x.iter().enumerate() {
        let c = cell(p);
        for dz in 0..3 {
            for dy in 0..3 {
                for dx in 0..3 {
                    let nc = [
                        (c[0] + CELLS + dx - 1) % CELLS,
                        (c[1] + CELLS + dy - 1) % CELLS,
                        (c[2] + CELLS + dz - 1) % CELLS,
                    ];
                    for &j in cells.get(&nc).map(Vec::as_slice).unwrap_or(&[]) {
                        if j == i {
                            continue;
                        }
                        let mut image = [0i8; 3];
                        let mut v = [0.0; 3];
                        for a in 0..3 {
                            let d = x[j][a] - p[a];
                            let s = (-d).round(); // the image of j nearest i
                            image[a] = s as i8;
                            v[a] = d + s;
                        }
                        if v.iter().map(|t| t * t).sum::<f64>() < CUTOFF * CUTOFF {
                            out.push(Edge {
                                src: j,
                                dst: i,
                                image,
                                vec: v,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// g = dE/d(edge_vec) of E = Σ (1 − r/rc)².
fn gradient(v: &[f64; 3]) -> [f64; 3] {
    let r = v.iter().map(|t| t * t).sum::<f64>().sqrt();
    let d = -2.0 * (1.0 - r / CUTOFF) / CUTOFF;
    v.map(|t| d * t / r)
}

/// (force, virial) of one plan on the rank's backend, float64.
fn assemble(
    backend: &Backend,
    src: &[i64],
    dst: &[i64],
    n_ext: usize,
    ghosts: Option<GhostMapping<'_>>,
    g: &[f64],
    r: &[f64],
) -> Result<(Vec<f64>, Vec<f64>)> {
    match backend {
        Backend::Cpu => {
            let plan = CsrPlan::build(src, dst, n_ext, ghosts)?;
            let a = assemble_with_plan(&plan, g, r, VirialSplit::Half)?;
            Ok((a.force, a.virial))
        }
        Backend::Device(d) => {
            let stream = d.new_stream()?;
            let plan = DevicePlan::build_from_host(&stream, src, dst, n_ext, ghosts)?;
            let (g_d, r_d) = (d.htod_copy(g)?, d.htod_copy(r)?);
            let (f, w) = assemble_device(&stream, &plan, &g_d, &r_d, VirialSplit::Half)?;
            stream.synchronize()?;
            Ok((f.to_vec()?, w.to_vec()?))
        }
    }
}

fn main() {
    let universe = mpi::initialize().expect("MPI");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let backend = Backend::choose(world.rank());
    let x = atoms();
    let all = edges(&x);
    let owner = |i: usize| ((x[i][0] * size as f64) as usize).min(size - 1);

    // The rank's part: its atoms (local rows first), then ghosts.
    let own: Vec<usize> = (0..N).filter(|&i| owner(i) == rank).collect();
    let local: HashMap<usize, usize> = own.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut ext: HashMap<(usize, [i8; 3]), usize> = HashMap::new();
    let mut remote_row: HashMap<usize, usize> = HashMap::new();
    let mut remote_atoms: Vec<usize> = Vec::new();
    let mut mapping: Vec<i64> = (0..own.len() as i64).collect();
    let (mut src, mut dst, mut g, mut r) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut folded, mut remote_ghosts) = (0usize, 0usize);
    for e in all.iter().filter(|e| owner(e.dst) == rank) {
        let s = match (local.get(&e.src), e.image == [0; 3]) {
            (Some(&k), true) => k,
            _ => *ext.entry((e.src, e.image)).or_insert_with(|| {
                let row = match local.get(&e.src) {
                    Some(&k) => {
                        folded += 1; // a periodic image of an atom of this rank
                        k
                    }
                    None => {
                        remote_ghosts += 1;
                        let next = own.len() + remote_atoms.len();
                        *remote_row.entry(e.src).or_insert_with(|| {
                            remote_atoms.push(e.src);
                            next
                        })
                    }
                };
                mapping.push(row as i64);
                mapping.len() - 1
            }),
        };
        src.push(s as i64);
        dst.push(local[&e.dst] as i64);
        g.extend(gradient(&e.vec));
        r.extend(e.vec);
    }
    let n_ext = mapping.len();
    let n_rows = own.len() + remote_atoms.len();
    let ghosts = GhostMapping {
        mapping: &mapping,
        n_local: n_rows,
    };
    let (force, virial) = assemble(&backend, &src, &dst, n_ext, Some(ghosts), &g, &r)
        .unwrap_or_else(|e| fail(&world, e));

    // Reverse communication: each remote row to its owner, 12 values an atom.
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); size];
    let mut vals: Vec<Vec<f64>> = vec![Vec::new(); size];
    for (k, &atom) in remote_atoms.iter().enumerate() {
        let row = own.len() + k;
        ids[owner(atom)].push(atom as u64);
        vals[owner(atom)].extend(&force[3 * row..3 * row + 3]);
        vals[owner(atom)].extend(&virial[9 * row..9 * row + 9]);
    }
    let (got_ids, got_vals) = (all_to_all(&world, &ids), all_to_all(&world, &vals));
    let mut mine = vec![0.0; 12 * own.len()];
    for (k, _) in own.iter().enumerate() {
        mine[12 * k..12 * k + 3].copy_from_slice(&force[3 * k..3 * k + 3]);
        mine[12 * k + 3..12 * k + 12].copy_from_slice(&virial[9 * k..9 * k + 9]);
    }
    for (p_ids, p_vals) in got_ids.iter().zip(&got_vals) {
        for (k, &atom) in p_ids.iter().enumerate() {
            let row = local[&(atom as usize)];
            for c in 0..12 {
                mine[12 * row + c] += p_vals[12 * k + c];
            }
        }
    }

    let own_ids: Vec<u64> = own.iter().map(|&i| i as u64).collect();
    let (all_ids, all_vals) = (gather(&world, &own_ids), gather(&world, &mine));
    let summary = gather(
        &world,
        &[
            own.len() as u64,
            all.iter().filter(|e| owner(e.dst) == rank).count() as u64,
            folded as u64,
            remote_ghosts as u64,
        ],
    );
    let check = match (all_ids, all_vals, summary) {
        (Some(ids), Some(vals), Some(summary)) => {
            let mut got_f = vec![f64::NAN; 3 * N];
            let mut got_w = vec![f64::NAN; 9 * N];
            for (k, &i) in ids.iter().enumerate() {
                let i = i as usize;
                got_f[3 * i..3 * i + 3].copy_from_slice(&vals[12 * k..12 * k + 3]);
                got_w[9 * i..9 * i + 9].copy_from_slice(&vals[12 * k + 3..12 * k + 12]);
            }
            let src: Vec<i64> = all.iter().map(|e| e.src as i64).collect();
            let dst: Vec<i64> = all.iter().map(|e| e.dst as i64).collect();
            let g: Vec<f64> = all.iter().flat_map(|e| gradient(&e.vec)).collect();
            let r: Vec<f64> = all.iter().flat_map(|e| e.vec).collect();
            let (want_f, want_w) =
                assemble(&backend, &src, &dst, N, None, &g, &r).unwrap_or_else(|e| fail(&world, e));
            let (ef, _) = compare(&got_f, &want_f);
            let (ew, _) = compare(&got_w, &want_w);
            for (p, s) in summary.chunks(4).enumerate() {
                println!("  rank {p}: {} atoms, {} edges, {} periodic ghosts folded by mapping, {} ghosts of other ranks", s[0], s[1], s[2], s[3]);
            }
            Some((
                ef <= 1e-12 && ew <= 1e-12,
                format!("{size} ranks ({}), {N} atoms, {} edges: force rel err {ef:.1e}, virial {ew:.1e} vs one rank", backend.name(), all.len()),
            ))
        }
        _ => None,
    };
    let status = verdict(&world, "mpi_force", check);
    drop(universe); // MPI_Finalize before the exit status
    std::process::exit(status);
}
