//! Force / virial assembly from per-edge gradients (`docs/design/force.md`).
//!
//! # The math
//!
//! Per edge `e` of `E`: the gradient `g_e = ∂E/∂(edge_vec_e)` (3 values),
//! the edge vector `edge_vec_e = r_src(e) − r_dst(e)` (3 values) and the
//! endpoints `src(e)`, `dst(e)` in `[0, N_ext)`. With `F_k = −∂E/∂r_k` and
//! `∂edge_vec_e/∂r_src(e) = +1`, `∂edge_vec_e/∂r_dst(e) = −1`:
//!
//! ```text
//! F_k = Σ_{e: dst(e)=k} g_e − Σ_{e: src(e)=k} g_e
//! ```
//!
//! The per-edge virial is `V_e = −g_e ⊗ edge_vec_e`, stored row-major
//! (3×3 → 9): `V_e[3a + b] = −g_e[a] · edge_vec_e[b]`, force component first.
//! The per-atom virial splits it between the endpoints ([`VirialSplit`]):
//!
//! ```text
//! Half (default):  W_k = ½ Σ_{e: dst(e)=k} V_e + ½ Σ_{e: src(e)=k} V_e
//! Src:             W_k =                         Σ_{e: src(e)=k} V_e
//! ```
//!
//! An edge with `src(e) = dst(e)` gives its whole `V_e` to that atom under
//! either split (and no force). Either way `Σ_k W_k = −Σ_e g_e ⊗ edge_vec_e`,
//! which, where the edge vectors are plain differences of the positions (no
//! periodic images), is `Σ_k F_k ⊗ r_k` (component `(a, b)` =
//! `F_k[a]·r_k[b]`; its trace is `Σ_k r_k · F_k`).
//!
//! With a [`GhostMapping`] every endpoint `k` is replaced by its owner
//! `mapping[k]` in `[0, N_local)` before the sums (ghosts folded into their
//! owners in the same pass), so the outputs have `N_local` rows. Several
//! frames are one larger `N_ext`; [`frame_virials`] sums `W_k` over the rows
//! of each frame in row order (`Frames::Size(s)`: row `k` is in frame
//! `⌊k/s⌋`), and [`voigt`] gives `(xx, yy, zz, xy, xz, yz)` = components
//! `(0, 4, 8, 1, 2, 5)`.
//!
//! # The plan (CSR) and the reduction
//!
//! A [`CsrPlan`] orders the edges by destination and by source:
//! `dst_order[dst_row_ptr[k]..dst_row_ptr[k+1]]` are the edges whose (mapped)
//! destination is `k`, in increasing edge id, and likewise `src_order` /
//! `src_row_ptr`; both `row_ptr` arrays have `N + 1` entries, from 0 to `E`.
//! It is built once per neighbour list by a stable sort of the edges by key,
//! on the host ([`CsrPlan::build`]: a counting sort, histogram of the keys,
//! exclusive scan, scatter in edge order) or on the device
//! ([`DevicePlan::build`]: a radix sort, a key set already in order taken
//! as it is; the same plan bit for bit). Its indices are int32: `E` and `N_ext` at most
//! [`MAX_PLAN_LEN`].
//!
//! The assembly is then an owner-computes segment reduction, no atomics:
//! each output row `k` is summed by one worker, the dst segment (`+g_e`,
//! weight ½ or 0 on `V_e`) and the src segment (`−g_e`, weight ½ or 1), 12
//! float64 accumulators (3 force + 9 virial), the outer product recomputed
//! per edge. The order of the additions is fixed by the plan, so every path
//! is bitwise reproducible run to run. The device splits a long row among
//! 1–32 lanes (a fixed butterfly adds their sums) and adds the src pass's
//! sums to the dst pass's, so the CPU reduction and the device agree to
//! rounding, not bit for bit. NaN or Inf in `g` or `edge_vec` propagate into
//! the atoms that edge touches, and only those (a zero split weight skips
//! the virial term rather than multiplying it by 0). `E = 0` and isolated
//! atoms give exact zeros.
//!
//! Every index, length and `row_ptr` is validated before any output is
//! written; the error names the array and the first bad position.
//!
//! # Paths
//!
//! The float64 reference ([`assemble_reference_f64`], a direct loop over
//! edges in edge order: the definition), the plan-based CPU reduction
//! ([`assemble_with_plan`], the CPU backend), the device assembly
//! ([`assemble_device`], `hip/force_assembly.hip`; float64 output or,
//! rounded once from the float64 sums, the input precision:
//! [`assemble_device_rounded_into`]), per-frame totals on the device
//! ([`frame_virials_device_into`]), and the device atomic reference
//! ([`assemble_atomic_device_into`]: materialised E×9 outer product and
//! atomic scatters in the input precision; the benchmarks' in-library peer,
//! not reproducible bit for bit). Inputs are f32 or f64, indices int32 or
//! int64. The `hipkern force` CLI reads and writes `.npy` files.
mod cpu;
mod device;

pub use cpu::{assemble_reference_f64, assemble_with_plan, Real};
pub use device::{
    assemble_atomic_device_into, assemble_device, assemble_device_into,
    assemble_device_rounded_into, frame_virials_device_into, DeviceEdges, DeviceFrames,
    DeviceGhostMapping, DeviceIndex, DevicePlan, DeviceReal,
};

use crate::runtime::{Error, Result};

/// Where the per-edge virial `−g ⊗ edge_vec` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VirialSplit {
    /// Half to each endpoint (DeePMD's convention; the default of
    /// `docs/design/force.md#virial-split`).
    #[default]
    Half,
    /// All to the source atom.
    Src,
}

/// Folding of extended (ghost) atoms into their owners.
#[derive(Clone, Copy, Debug)]
pub struct GhostMapping<'a> {
    /// `mapping[k]` is the local owner of extended atom `k` (length `N_ext`).
    pub mapping: &'a [i64],
    /// Number of local atoms: every `mapping[k]` is in `[0, n_local)`.
    pub n_local: usize,
}

/// Force (N×3) and per-atom virial (N×9, row-major 3×3), float64.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembly {
    /// Row-major N×3.
    pub force: Vec<f64>,
    /// Row-major N×9.
    pub virial: Vec<f64>,
}

/// Index arrays may be int32 or int64 (as neighbour lists come).
pub trait EdgeIndex: Copy {
    /// The value as i64.
    fn to_i64(self) -> i64;
}
impl EdgeIndex for i32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
}
impl EdgeIndex for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}
impl EdgeIndex for u32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
}

/// Edges ordered by destination and by source: `dst_order[dst_row_ptr[k]..
/// dst_row_ptr[k+1]]` are the edges whose (mapped) destination is `k`, in
/// increasing edge id (stable), and likewise for sources. Built once per
/// neighbour list; both row_ptr arrays have `n_rows + 1` entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsrPlan {
    n_rows: usize,
    dst_order: Vec<i32>,
    dst_row_ptr: Vec<i32>,
    src_order: Vec<i32>,
    src_row_ptr: Vec<i32>,
}

/// The largest edge count / atom count the plan's int32 indices hold.
pub const MAX_PLAN_LEN: usize = i32::MAX as usize;

impl CsrPlan {
    /// Builds the plan on the host (stable counting sort: histogram,
    /// exclusive scan, scatter). Keys are `dst`/`src`, or
    /// `mapping[dst]`/`mapping[src]` with a [`GhostMapping`]. Every index is
    /// validated first; the error names the array and the first bad position.
    pub fn build<I: EdgeIndex>(
        src: &[I],
        dst: &[I],
        n_ext: usize,
        ghosts: Option<GhostMapping<'_>>,
    ) -> Result<CsrPlan> {
        let (dst_keys, src_keys, n_rows) = validated_keys(src, dst, n_ext, ghosts)?;
        let (dst_order, dst_row_ptr) = cpu::counting_sort(&dst_keys, n_rows)?;
        let (src_order, src_row_ptr) = cpu::counting_sort(&src_keys, n_rows)?;
        Ok(CsrPlan {
            n_rows,
            dst_order,
            dst_row_ptr,
            src_order,
            src_row_ptr,
        })
    }

    /// A plan from arrays the caller already has (e.g. torch argsort +
    /// searchsorted). Validated: row_ptr lengths agree, start at 0, never
    /// decrease and end at E; each order is a permutation of `0..E` and
    /// lists, within every row, edges whose ids increase (any order is
    /// accepted as long as each edge appears once; only increasing ids give
    /// results identical to [`CsrPlan::build`]).
    pub fn from_parts(
        n_edges: usize,
        dst_order: Vec<i32>,
        dst_row_ptr: Vec<i32>,
        src_order: Vec<i32>,
        src_row_ptr: Vec<i32>,
    ) -> Result<CsrPlan> {
        if n_edges > MAX_PLAN_LEN {
            return Err(Error::InvalidInput(format!(
                "{n_edges} edges exceed the plan's int32 limit"
            )));
        }
        if dst_row_ptr.is_empty() {
            return Err(Error::InvalidInput(
                "dst_row_ptr is empty (it needs N + 1 entries)".into(),
            ));
        }
        if dst_row_ptr.len() != src_row_ptr.len() {
            return Err(Error::InvalidInput(format!(
                "dst_row_ptr has {} entries but src_row_ptr has {}",
                dst_row_ptr.len(),
                src_row_ptr.len()
            )));
        }
        for (name, order, row_ptr) in [
            ("dst", &dst_order, &dst_row_ptr),
            ("src", &src_order, &src_row_ptr),
        ] {
            check_row_ptr(name, row_ptr, n_edges)?;
            check_permutation(name, order, n_edges)?;
        }
        Ok(CsrPlan {
            n_rows: dst_row_ptr.len() - 1,
            dst_order,
            dst_row_ptr,
            src_order,
            src_row_ptr,
        })
    }

    /// Output rows (N_ext, or N_local with ghost folding).
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Number of edges.
    pub fn n_edges(&self) -> usize {
        self.dst_order.len()
    }
    /// Edge ids by destination.
    pub fn dst_order(&self) -> &[i32] {
        &self.dst_order
    }
    /// Row offsets into `dst_order` (n_rows + 1).
    pub fn dst_row_ptr(&self) -> &[i32] {
        &self.dst_row_ptr
    }
    /// Edge ids by source.
    pub fn src_order(&self) -> &[i32] {
        &self.src_order
    }
    /// Row offsets into `src_order` (n_rows + 1).
    pub fn src_row_ptr(&self) -> &[i32] {
        &self.src_row_ptr
    }
}

fn check_row_ptr(name: &str, row_ptr: &[i32], n_edges: usize) -> Result<()> {
    if row_ptr[0] != 0 {
        return Err(Error::InvalidInput(format!(
            "{name}_row_ptr[0] = {} (must be 0)",
            row_ptr[0]
        )));
    }
    if let Some(i) = row_ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::InvalidInput(format!(
            "{name}_row_ptr is not monotone: {name}_row_ptr[{}] = {} < {name}_row_ptr[{i}] = {}",
            i + 1,
            row_ptr[i + 1],
            row_ptr[i]
        )));
    }
    let last = *row_ptr.last().unwrap();
    if last as i64 != n_edges as i64 {
        return Err(Error::InvalidInput(format!(
            "{name}_row_ptr ends at {last} but there are {n_edges} edges"
        )));
    }
    Ok(())
}

fn check_permutation(name: &str, order: &[i32], n_edges: usize) -> Result<()> {
    if order.len() != n_edges {
        return Err(Error::InvalidInput(format!(
            "{name}_order has {} entries but there are {n_edges} edges",
            order.len()
        )));
    }
    let mut seen = vec![false; n_edges];
    for (i, &e) in order.iter().enumerate() {
        if e < 0 || e as usize >= n_edges {
            return Err(Error::InvalidInput(format!(
                "{name}_order[{i}] = {e} is out of range [0, {n_edges})"
            )));
        }
        if std::mem::replace(&mut seen[e as usize], true) {
            return Err(Error::InvalidInput(format!(
                "{name}_order[{i}] = {e} lists edge {e} a second time"
            )));
        }
    }
    Ok(())
}

/// Validates src/dst (and mapping) and returns the sort keys and row count.
pub(crate) fn validated_keys<I: EdgeIndex>(
    src: &[I],
    dst: &[I],
    n_ext: usize,
    ghosts: Option<GhostMapping<'_>>,
) -> Result<(Vec<i32>, Vec<i32>, usize)> {
    if src.len() != dst.len() {
        return Err(Error::InvalidInput(format!(
            "src has {} entries but dst has {}",
            src.len(),
            dst.len()
        )));
    }
    if src.len() > MAX_PLAN_LEN || n_ext > MAX_PLAN_LEN {
        return Err(Error::InvalidInput(format!(
            "{} edges / {n_ext} atoms exceed the plan's int32 limit",
            src.len()
        )));
    }
    for (name, idx) in [("src", src), ("dst", dst)] {
        if let Some(i) = idx
            .iter()
            .position(|v| v.to_i64() < 0 || v.to_i64() >= n_ext as i64)
        {
            return Err(Error::InvalidInput(format!(
                "{name}[{i}] = {} is out of range [0, n_ext = {n_ext})",
                idx[i].to_i64()
            )));
        }
    }
    let n_rows = match ghosts {
        None => n_ext,
        Some(g) => {
            if g.mapping.len() != n_ext {
                return Err(Error::InvalidInput(format!(
                    "mapping has {} entries but n_ext = {n_ext}",
                    g.mapping.len()
                )));
            }
            if g.n_local > n_ext {
                return Err(Error::InvalidInput(format!(
                    "n_local = {} exceeds n_ext = {n_ext}",
                    g.n_local
                )));
            }
            if let Some(i) = g
                .mapping
                .iter()
                .position(|&m| m < 0 || m >= g.n_local as i64)
            {
                return Err(Error::InvalidInput(format!(
                    "mapping[{i}] = {} is out of range [0, n_local = {})",
                    g.mapping[i], g.n_local
                )));
            }
            g.n_local
        }
    };
    let key = |v: i64| -> i32 {
        match ghosts {
            None => v as i32,
            Some(g) => g.mapping[v as usize] as i32,
        }
    };
    let dst_keys = dst.iter().map(|v| key(v.to_i64())).collect();
    let src_keys = src.iter().map(|v| key(v.to_i64())).collect();
    Ok((dst_keys, src_keys, n_rows))
}

/// Which frame each atom belongs to, for per-frame totals.
#[derive(Clone, Copy, Debug)]
pub enum Frames<'a> {
    /// Every frame has this many rows (the row count must be a multiple).
    Size(usize),
    /// `frame_of[k]` for every row `k`, in `[0, n_frames)`.
    Ids {
        /// Frame id per row.
        frame_of: &'a [i64],
        /// Number of frames.
        n_frames: usize,
    },
}

/// Total virial per frame (9 components, row-major 3×3), summed in row order.
pub fn frame_virials(virial: &[f64], frames: Frames<'_>) -> Result<Vec<[f64; 9]>> {
    if virial.len() % 9 != 0 {
        return Err(Error::InvalidInput(format!(
            "virial has {} values, not a multiple of 9",
            virial.len()
        )));
    }
    let n = virial.len() / 9;
    let (n_frames, frame_of): (usize, Box<dyn Fn(usize) -> usize + '_>) = match frames {
        Frames::Size(0) => return Err(Error::InvalidInput("frame size 0".into())),
        Frames::Size(s) => {
            if n % s != 0 {
                return Err(Error::InvalidInput(format!(
                    "{n} rows are not a whole number of frames of {s}"
                )));
            }
            (n / s, Box::new(move |k| k / s))
        }
        Frames::Ids { frame_of, n_frames } => {
            if frame_of.len() != n {
                return Err(Error::InvalidInput(format!(
                    "frame_of has {} entries but there are {n} rows",
                    frame_of.len()
                )));
            }
            if let Some(i) = frame_of
                .iter()
                .position(|&f| f < 0 || f as usize >= n_frames)
            {
                return Err(Error::InvalidInput(format!(
                    "frame_of[{i}] = {} is out of range [0, {n_frames})",
                    frame_of[i]
                )));
            }
            (n_frames, Box::new(move |k| frame_of[k] as usize))
        }
    };
    let mut out = crate::host_memory::filled_vec(n_frames, [0.0f64; 9], &|| {
        format!("the virial totals of {n_frames} frames")
    })?;
    for k in 0..n {
        let f = frame_of(k);
        for c in 0..9 {
            out[f][c] += virial[9 * k + c];
        }
    }
    Ok(out)
}

/// The 6-component Voigt form LAMMPS uses: (xx, yy, zz, xy, xz, yz).
pub fn voigt(w: &[f64; 9]) -> [f64; 6] {
    [w[0], w[4], w[8], w[1], w[2], w[5]]
}
