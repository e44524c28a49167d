//! CPU paths: the float64 reference (a direct loop over edges, the
//! definition of the result) and the plan-based segment reduction (the
//! device algorithm on the host, also the CPU backend).
use super::{validated_keys, Assembly, CsrPlan, EdgeIndex, GhostMapping, VirialSplit};
use crate::host_memory::filled_vec;
use crate::runtime::{Error, Result};
use crate::threads::map_on_threads;

/// Stable counting sort of `keys` in `[0, n_rows)`: (order, row_ptr).
/// Fails (nothing allocated) when the machine cannot hold the row offsets.
pub(crate) fn counting_sort(keys: &[i32], n_rows: usize) -> Result<(Vec<i32>, Vec<i32>)> {
    let mut row_ptr = filled_vec(n_rows + 1, 0i32, &|| {
        format!("the plan's row offsets for {n_rows} rows")
    })?;
    for &k in keys {
        row_ptr[k as usize + 1] += 1;
    }
    for i in 0..n_rows {
        row_ptr[i + 1] += row_ptr[i];
    }
    let mut cursor = row_ptr[..n_rows].to_vec();
    let mut order = vec![0i32; keys.len()];
    // Increasing edge id within each row: stable.
    for (e, &k) in keys.iter().enumerate() {
        let c = &mut cursor[k as usize];
        order[*c as usize] = e as i32;
        *c += 1;
    }
    Ok((order, row_ptr))
}

/// Zeroed force (`3 × n_rows`) and virial (`9 × n_rows`) float64 outputs,
/// or the machine's failure when they do not fit.
fn zeroed_outputs(n_rows: usize) -> Result<(Vec<f64>, Vec<f64>)> {
    // 12 float64 per row: checked together, so a run that cannot hold both
    // fails before either is allocated.
    crate::host_memory::check_available(
        crate::host_memory::bytes_of::<f64>(12 * n_rows as u128, &|| {
            format!("the force and virial of {n_rows} rows")
        })?,
        &|| format!("the force and virial of {n_rows} rows"),
    )?;
    Ok((
        filled_vec(3 * n_rows, 0.0, &|| format!("the force of {n_rows} rows"))?,
        filled_vec(9 * n_rows, 0.0, &|| format!("the virial of {n_rows} rows"))?,
    ))
}

/// Input element types: f32 or f64.
pub trait Real: Copy + Send + Sync {
    /// Widened to float64.
    fn to_f64(self) -> f64;
}
impl Real for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl Real for f64 {
    fn to_f64(self) -> f64 {
        self
    }
}

fn check_edge_arrays<T>(g: &[T], edge_vec: &[T], n_edges: usize) -> Result<()> {
    for (name, a) in [("g", g), ("edge_vec", edge_vec)] {
        if a.len() != 3 * n_edges {
            return Err(Error::InvalidInput(format!(
                "{name} has {} values but {n_edges} edges need {} (E×3)",
                a.len(),
                3 * n_edges
            )));
        }
    }
    Ok(())
}

/// The float64 reference: a direct loop over edges in edge order, no plan.
pub fn assemble_reference_f64<T: Real, I: EdgeIndex>(
    g: &[T],
    edge_vec: &[T],
    src: &[I],
    dst: &[I],
    n_ext: usize,
    ghosts: Option<GhostMapping<'_>>,
    split: VirialSplit,
) -> Result<Assembly> {
    let (dst_keys, src_keys, n_rows) = validated_keys(src, dst, n_ext, ghosts)?;
    check_edge_arrays(g, edge_vec, src.len())?;
    let (mut force, mut virial) = zeroed_outputs(n_rows)?;
    let (w_dst, w_src) = match split {
        VirialSplit::Half => (0.5, 0.5),
        VirialSplit::Src => (0.0, 1.0),
    };
    for e in 0..src.len() {
        let (d, s) = (dst_keys[e] as usize, src_keys[e] as usize);
        for a in 0..3 {
            let ga = g[3 * e + a].to_f64();
            force[3 * d + a] += ga;
            force[3 * s + a] -= ga;
            for b in 0..3 {
                let w = -ga * edge_vec[3 * e + b].to_f64();
                // Skipped rather than multiplied by 0, so a NaN edge does not
                // reach an endpoint that gets no share of its virial.
                if w_dst != 0.0 {
                    virial[9 * d + 3 * a + b] += w_dst * w;
                }
                virial[9 * s + 3 * a + b] += w_src * w;
            }
        }
    }
    Ok(Assembly { force, virial })
}

/// The segment reduction over a plan, in the device's structure: per row,
/// the dst segment then the src segment, 12 float64 accumulators, the outer
/// product recomputed per edge. It agrees with the device to rounding, not
/// bit for bit: the device splits a long row among up to 32 lanes and adds
/// the src sum to the dst sum at the end. Parallel over rows with std threads;
/// bitwise identical for any thread count (each row is summed by one thread
/// in a fixed order).
pub fn assemble_with_plan<T: Real>(
    plan: &CsrPlan,
    g: &[T],
    edge_vec: &[T],
    split: VirialSplit,
) -> Result<Assembly> {
    check_edge_arrays(g, edge_vec, plan.n_edges())?;
    let n = plan.n_rows();
    let (mut force, mut virial) = zeroed_outputs(n)?;
    let (w_dst, w_src) = match split {
        VirialSplit::Half => (0.5, 0.5),
        VirialSplit::Src => (0.0, 1.0),
    };
    let row = |k: usize, f: &mut [f64], w: &mut [f64]| {
        let mut acc = [0.0f64; 12];
        let pass = |order: &[i32], row_ptr: &[i32], sign: f64, wv: f64, acc: &mut [f64; 12]| {
            for &e in &order[row_ptr[k] as usize..row_ptr[k + 1] as usize] {
                let e = e as usize;
                let gv = [
                    g[3 * e].to_f64(),
                    g[3 * e + 1].to_f64(),
                    g[3 * e + 2].to_f64(),
                ];
                let rv = [
                    edge_vec[3 * e].to_f64(),
                    edge_vec[3 * e + 1].to_f64(),
                    edge_vec[3 * e + 2].to_f64(),
                ];
                for a in 0..3 {
                    acc[a] += sign * gv[a];
                    if wv != 0.0 {
                        for b in 0..3 {
                            acc[3 + 3 * a + b] += wv * (-gv[a] * rv[b]);
                        }
                    }
                }
            }
        };
        pass(plan.dst_order(), plan.dst_row_ptr(), 1.0, w_dst, &mut acc);
        pass(plan.src_order(), plan.src_row_ptr(), -1.0, w_src, &mut acc);
        f.copy_from_slice(&acc[..3]);
        w.copy_from_slice(&acc[3..]);
    };
    let threads = crate::threads::machine_threads().min(64);
    let chunk = n.div_ceil(threads.max(1)).max(1);
    // A refused thread leaves its chunks to the others (map_on_threads).
    let chunks: Vec<_> = force
        .chunks_mut(3 * chunk)
        .zip(virial.chunks_mut(9 * chunk))
        .enumerate()
        .collect();
    map_on_threads(threads, chunks, |(ci, (fc, wc))| {
        for (j, (f, w)) in fc.chunks_mut(3).zip(wc.chunks_mut(9)).enumerate() {
            row(ci * chunk + j, f, w);
        }
    });
    Ok(Assembly { force, virial })
}
