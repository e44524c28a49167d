//! The List 1 (near-field) evaluation of a volume potential over a tree,
//! CPU float64: the definition the device evaluator is checked against
//! (`docs/design/list1.md`).
//!
//! ```text
//! u[B, t] = Σ_{S ∈ L1(B)} Σ_s f[S, s] · (scale(S) · T[case(B, S), s, t] + disp_s(S))
//! ```
//!
//! - `B` a target box, `t` one of its `q^d` nodes (the target points of a
//!   case are the target box's nodes, [`crate::nearfield::Cases::target_points`]);
//!   `S` a source box of `B`'s List 1, `f[S, s]` the source values at `S`'s
//!   nodes (the density at the nodes: the table integrates the Lagrange
//!   interpolant of the density against the kernel).
//! - `case(B, S)` by [`crate::nearfield::Cases::case_of_pair`] from the centres and
//!   sides `h = root_extent / 2^level`.
//! - One table that scales ([`List1Tables::Scaled`], extent `L`):
//!   `ρ = h_S / L` and the rule of [`ScalingRule::of`]: `scale = ρ^p`,
//!   `disp = 0`, except 2D Laplace: `scale = ρ²`,
//!   `disp_s = −ρ² ln ρ · N_s / (2π)` (`N_s` the mode normaliser at `L`).
//!   Applying the displacement per pair as `Σ_s f_s disp_s` is the same sum
//!   as scaling each entry first; only rounding differs.
//! - Per-level tables ([`List1Tables::PerLevel`], needed for Yukawa): the
//!   table of the source box's level, built at extent `h_S`; `scale = 1`,
//!   `disp = 0`.
//!
//! The sum over `S` runs in list order and the sum over `s` in mode order,
//! so the result does not depend on the thread count.
//!
//! Everything is validated before anything is computed: CSR offsets
//! (start at 0, monotone, end at the list length), box ids, levels,
//! centres, the tables, the source values (finite), and every pair (a pair
//! that is not a List 1 neighbour pair of a 2:1 tree is an error naming both
//! boxes).
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::Kernel;
use crate::nearfield::scaling::ScalingRule;
use crate::nearfield::table::NearFieldTable;
use crate::nearfield::tree::{BalancedTree, MAX_TREE_LEVEL};
use crate::runtime::{Error, Result};
use crate::threads::{map_on_threads, threads_for};
use std::f64::consts::PI;

/// Targets per thread at least when the pairs are classified: below this a
/// thread's start (~10 µs) costs more than its share (about 25 pairs a
/// target in 3D, ~10 ns a pair).
const PAIR_TARGETS_PER_THREAD: usize = 2048;

/// The tables a List 1 evaluation reads.
#[derive(Clone, Copy, Debug)]
pub enum List1Tables<'a> {
    /// One table of a kernel with a [`ScalingRule`] (Laplace, Constant and
    /// their derivatives), any extent: scaled per source box.
    Scaled(&'a NearFieldTable),
    /// One table per source level, `tables[l]` built at extent
    /// `root_extent / 2^l` (Yukawa). Levels that no source box has may hold
    /// any table of the same kernel and `q`.
    PerLevel(&'a [NearFieldTable]),
}

impl<'a> List1Tables<'a> {
    /// The table every level shares the kernel, `q` and dimension of.
    pub fn first(&self) -> Result<&'a NearFieldTable> {
        match self {
            List1Tables::Scaled(t) => Ok(t),
            List1Tables::PerLevel(ts) => ts
                .first()
                .ok_or_else(|| Error::InvalidInput("per-level tables: the list is empty".into())),
        }
    }
}

/// The boxes of a List 1 evaluation (the inputs of `docs/design/list1.md#inputs`
/// but the values).
#[derive(Clone, Copy, Debug)]
pub struct List1Boxes<'a> {
    /// 2 or 3.
    pub dim: usize,
    /// Side of the root box (level 0).
    pub root_extent: f64,
    /// Box centres, `n_boxes × dim`, row-major.
    pub centers: &'a [f64],
    /// Box levels (`n_boxes`); a box's side is `root_extent / 2^level`.
    pub levels: &'a [u32],
    /// The target boxes (box ids), one output row each.
    pub target_boxes: &'a [u32],
    /// CSR offsets into `source_boxes`, `target_boxes.len() + 1`.
    pub source_starts: &'a [u32],
    /// The source boxes of each target box (box ids), concatenated.
    pub source_boxes: &'a [u32],
}

impl BalancedTree {
    /// The tree as List 1 input: every leaf a target box, in leaf order,
    /// with its List 1 list.
    pub fn list1_boxes<'a>(&'a self, target_boxes: &'a [u32]) -> List1Boxes<'a> {
        List1Boxes {
            dim: self.dim(),
            root_extent: self.root_extent(),
            centers: self.centers(),
            levels: self.levels(),
            target_boxes,
            source_starts: self.list1_starts(),
            source_boxes: self.list1_sources(),
        }
    }

    /// `0..n_boxes` as `u32`: the target boxes of [`Self::list1_boxes`].
    pub fn all_boxes(&self) -> Vec<u32> {
        (0..self.n_boxes() as u32).collect()
    }
}

/// The validated pairs of a List 1 evaluation: the case id of every
/// (target box, source box) pair, in the order of `source_boxes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List1Pairs {
    /// Case id per pair (`source_boxes.len()`).
    pub cases: Vec<u16>,
}

fn invalid(msg: String) -> Error {
    Error::InvalidInput(format!("list 1: {msg}"))
}

fn bad<T>(msg: String) -> Result<T> {
    Err(invalid(msg))
}

impl<'a> List1Boxes<'a> {
    /// Number of boxes (`levels.len()`).
    pub fn n_boxes(&self) -> usize {
        self.levels.len()
    }

    /// Side of box `b`.
    pub fn extent(&self, b: usize) -> f64 {
        self.side_at_level(self.levels[b])
    }

    /// Side of a box at `level` (at most [`MAX_TREE_LEVEL`]).
    fn side_at_level(&self, level: u32) -> f64 {
        self.root_extent / f64::from(1u32 << level)
    }

    /// Checks the boxes and lists and finds every pair's case (module
    /// docs); nothing about tables or values.
    pub fn pairs(&self) -> Result<List1Pairs> {
        self.pairs_and_levels().map(|(pairs, _)| pairs)
    }

    /// [`Self::pairs`], and per level `0..=MAX_TREE_LEVEL` whether some
    /// pair's source box is at it (found in the same pass).
    pub(crate) fn pairs_and_levels(&self) -> Result<(List1Pairs, SourceLevels)> {
        self.check_boxes()?;
        self.classify_pairs()
    }

    /// [`Self::pairs_and_levels`] of boxes [`Self::check_boxes`] accepted.
    fn classify_pairs(&self) -> Result<(List1Pairs, SourceLevels)> {
        let d = self.dim;
        let n = self.n_boxes();
        let nt = self.target_boxes.len();
        let st = self.source_starts;
        let cases = Cases::new(d)?;
        // Every pair is checked and classified on its own, so the targets
        // are split among threads. A source box out of range is named
        // before any pair that is not a List 1 pair, and within each kind
        // the first in pair order, as one pass of each over all pairs
        // would name them.
        let mut out = vec![0u16; self.source_boxes.len()];
        let threads = threads_for(nt, PAIR_TARGETS_PER_THREAD);
        let per = nt.div_ceil(threads).max(1);
        let mut chunks = Vec::with_capacity(threads);
        let mut rest = out.as_mut_slice();
        for t in 0..threads {
            let (a, b) = ((t * per).min(nt), ((t + 1) * per).min(nt));
            let (mine, tail) = rest.split_at_mut((st[b] - st[a]) as usize);
            chunks.push((a..b, mine));
            rest = tail;
        }
        let cases = &cases;
        let runs = map_on_threads(threads, chunks, |(range, mine)| {
            self.classify_targets(cases, range, mine)
        });
        if let Some(j) = runs.iter().find_map(|r| r.out_of_range) {
            return bad(format!(
                "source_boxes[{j}] = {} is out of range [0, n_boxes = {n})",
                self.source_boxes[j]
            ));
        }
        let mut levels = SourceLevels::default();
        for run in runs {
            if let Some(e) = run.refusal {
                return Err(e);
            }
            for (u, r) in levels.0.iter_mut().zip(run.levels.0) {
                *u |= r;
            }
        }
        Ok((List1Pairs { cases: out }, levels))
    }

    /// The checks of [`Self::pairs`] before the pairs themselves, in its
    /// order: the dimension and root extent, the centres, the levels, the
    /// target boxes and the offsets. What is left is per pair (a source
    /// box in range, a List 1 pair): the device plan checks those there.
    pub(crate) fn check_boxes(&self) -> Result<()> {
        let d = self.dim;
        if !(d == 2 || d == 3) {
            return bad(format!("dimension {d}: must be 2 or 3"));
        }
        if !(self.root_extent.is_finite() && self.root_extent > 0.0) {
            return bad(format!(
                "root extent {}: must be finite and positive",
                self.root_extent
            ));
        }
        let n = self.n_boxes();
        if self.centers.len() != n * d {
            return bad(format!(
                "centers has {} values, expected n_boxes × dim = {n} × {d}",
                self.centers.len()
            ));
        }
        if let Some(i) = self.centers.iter().position(|x| !x.is_finite()) {
            return bad(format!(
                "centre of box {} is not finite ({:?})",
                i / d,
                &self.centers[i / d * d..i / d * d + d]
            ));
        }
        if let Some(b) = self.levels.iter().position(|&l| l > MAX_TREE_LEVEL) {
            return bad(format!(
                "box {b} has level {}, at most {MAX_TREE_LEVEL}",
                self.levels[b]
            ));
        }
        let nt = self.target_boxes.len();
        if let Some(i) = self.target_boxes.iter().position(|&b| b as usize >= n) {
            return bad(format!(
                "target_boxes[{i}] = {} is out of range [0, n_boxes = {n})",
                self.target_boxes[i]
            ));
        }
        let st = self.source_starts;
        if st.len() != nt + 1 {
            return bad(format!(
                "source_starts has {} offsets, expected n_targets + 1 = {}",
                st.len(),
                nt + 1
            ));
        }
        if st[0] != 0 {
            return bad(format!("source_starts[0] = {}, must be 0", st[0]));
        }
        if let Some(i) = (0..nt).find(|&i| st[i + 1] < st[i]) {
            return bad(format!(
                "source_starts is not monotone: source_starts[{}] = {} < source_starts[{i}] = {}",
                i + 1,
                st[i + 1],
                st[i]
            ));
        }
        if st[nt] as usize != self.source_boxes.len() {
            return bad(format!(
                "source_starts ends at {}, source_boxes has {} entries",
                st[nt],
                self.source_boxes.len()
            ));
        }
        Ok(())
    }

    /// The cases of the pairs of targets `targets` into `out` (their pairs,
    /// in order), the levels of their sources, and the first source out of
    /// range and the first refusal among them. After a refusal the pairs
    /// are only range-checked, so that a later source out of range is
    /// still found.
    fn classify_targets(
        &self,
        cases: &Cases,
        targets: std::ops::Range<usize>,
        out: &mut [u16],
    ) -> ClassifiedRun {
        let n = self.n_boxes();
        let mut run = ClassifiedRun {
            out_of_range: None,
            refusal: None,
            levels: SourceLevels::default(),
        };
        let d = self.dim;
        let st = self.source_starts;
        let base = st[targets.start] as usize;
        // Every box's side is one of these (`extent`'s values): the levels
        // were checked against MAX_TREE_LEVEL, the centres for finiteness.
        let sides: Vec<f64> = (0..=MAX_TREE_LEVEL)
            .map(|l| self.side_at_level(l))
            .collect();
        for i in targets {
            let tb = self.target_boxes[i] as usize;
            let center_t = &self.centers[tb * d..tb * d + d];
            let h_t = sides[self.levels[tb] as usize];
            for j in st[i] as usize..st[i + 1] as usize {
                let sb = self.source_boxes[j] as usize;
                if sb >= n {
                    run.out_of_range = Some(j);
                    return run;
                }
                if run.refusal.is_some() {
                    continue;
                }
                let level_s = self.levels[sb] as usize;
                run.levels.0[level_s] = true;
                let center_s = &self.centers[sb * d..sb * d + d];
                let h_s = sides[level_s];
                // The accepted path first; a pair it does not accept gets
                // case_of_pair's verdict (and its message).
                if let Some(c) = cases.aligned_case(center_t, h_t, center_s, h_s) {
                    out[j - base] = c as u16;
                    continue;
                }
                match cases.case_of_pair(center_t, h_t, center_s, h_s) {
                    Ok(c) => out[j - base] = c as u16,
                    Err(e) => {
                        run.refusal = Some(invalid(format!(
                            "target box {tb} (target_boxes[{i}], level {}) and source \
                             box {sb} (source_boxes[{j}], level {}) are not a List 1 pair: {}",
                            self.levels[tb],
                            self.levels[sb],
                            match e {
                                Error::InvalidInput(m) => m,
                                other => other.to_string(),
                            }
                        )))
                    }
                }
            }
        }
        run
    }
}

/// Per level `0..=MAX_TREE_LEVEL`, whether some pair's source box is at it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SourceLevels(pub [bool; MAX_TREE_LEVEL as usize + 1]);

/// What one thread's share of the pairs gave ([`List1Boxes::classify_targets`]).
struct ClassifiedRun {
    /// The first pair whose source box is out of range.
    out_of_range: Option<usize>,
    /// The first pair that is not a List 1 pair, named.
    refusal: Option<Error>,
    levels: SourceLevels,
}

/// How the entries of a table are scaled for one source level.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelScaling {
    /// Index into the tables (0 for [`List1Tables::Scaled`]).
    pub table: usize,
    /// Factor on every entry.
    pub scale: f64,
    /// Factor on `Σ_s f_s N_s` added to every target of the pair (2D
    /// Laplace: `−ρ² ln ρ/(2π)`; else 0).
    pub displacement: f64,
}

/// What the level scalings and the input checks read of a table: its
/// kernel, order and extent (the values play no part).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TableShape {
    pub kernel: Kernel,
    pub q: usize,
    pub extent: f64,
}

impl TableShape {
    pub(crate) fn of(t: &NearFieldTable) -> TableShape {
        TableShape {
            kernel: t.kernel().clone(),
            q: t.q(),
            extent: t.extent(),
        }
    }
}

impl List1Tables<'_> {
    fn shapes(&self) -> Vec<TableShape> {
        match self {
            List1Tables::Scaled(t) => vec![TableShape::of(t)],
            List1Tables::PerLevel(ts) => ts.iter().map(TableShape::of).collect(),
        }
    }
}

/// The scaling of every level `0..=max_level` for these tables (module
/// docs); errors for tables that do not fit (kernel without a scaling rule
/// under `Scaled`, per-level tables of other kernels, `q`, dimension or
/// extent, a level without a table).
pub fn level_scalings(
    tables: &List1Tables<'_>,
    root_extent: f64,
    levels_used: &[bool],
) -> Result<Vec<LevelScaling>> {
    let per_level = matches!(tables, List1Tables::PerLevel(_));
    tables.first()?;
    shape_scalings(&tables.shapes(), per_level, root_extent, levels_used)
}

/// [`level_scalings`] of tables known by their shapes (`shapes` not empty;
/// one shape unless `per_level`).
pub(crate) fn shape_scalings(
    shapes: &[TableShape],
    per_level: bool,
    root_extent: f64,
    levels_used: &[bool],
) -> Result<Vec<LevelScaling>> {
    let Some(first) = shapes.first() else {
        return bad("per-level tables: the list is empty".into());
    };
    if !per_level {
        let t = first;
        let rule = ScalingRule::of(&t.kernel).map_err(|e| match e {
            Error::InvalidInput(m) => {
                Error::InvalidInput(format!("list 1: {m} (pass List1Tables::PerLevel)"))
            }
            other => other,
        })?;
        return Ok((0..levels_used.len())
            .map(|l| {
                let rho = root_extent / f64::from(1u32 << l) / t.extent;
                let (scale, displacement) = match rule {
                    ScalingRule::Power(p) => (rho.powi(p), 0.0),
                    ScalingRule::LogShift2d => (rho * rho, -rho * rho * rho.ln() / (2.0 * PI)),
                };
                LevelScaling {
                    table: 0,
                    scale,
                    displacement,
                }
            })
            .collect());
    }
    for (l, t) in shapes.iter().enumerate() {
        if t.kernel != first.kernel || t.q != first.q {
            return bad(format!(
                "per-level table {l} has kernel {:?}, q = {}; table 0 has {:?}, q = {}",
                t.kernel, t.q, first.kernel, first.q
            ));
        }
    }
    let mut out = Vec::with_capacity(levels_used.len());
    for (l, &used) in levels_used.iter().enumerate() {
        if used {
            let h = root_extent / f64::from(1u32 << l);
            let Some(t) = shapes.get(l) else {
                return bad(format!(
                    "source boxes at level {l} but only {} per-level tables",
                    shapes.len()
                ));
            };
            if ((t.extent - h) / h).abs() > 1e-12 {
                return bad(format!(
                    "per-level table {l} has extent {}, the boxes of level {l} have {h}",
                    t.extent
                ));
            }
        }
        out.push(LevelScaling {
            table: l.min(shapes.len() - 1),
            scale: 1.0,
            displacement: 0.0,
        });
    }
    Ok(out)
}

/// The source values check of an evaluation: `n_boxes × nq` finite values.
pub(crate) fn check_source_values(source_values: &[f64], n: usize, nq: usize) -> Result<()> {
    if source_values.len() != n * nq {
        return bad(format!(
            "source_values has {} values, expected n_boxes × q^d = {n} × {nq}",
            source_values.len()
        ));
    }
    if let Some(i) = source_values.iter().position(|x| !x.is_finite()) {
        return bad(format!(
            "source value {} of box {} is not finite ({})",
            i % nq,
            i / nq,
            source_values[i]
        ));
    }
    Ok(())
}

/// The checks of [`check_list1_inputs`] before the pairs: the tables'
/// dimension against the boxes', then [`List1Boxes::check_boxes`]. Returns
/// the first shape.
pub(crate) fn check_list1_boxes<'s>(
    boxes: &List1Boxes<'_>,
    shapes: &'s [TableShape],
) -> Result<&'s TableShape> {
    let Some(first) = shapes.first() else {
        return bad("per-level tables: the list is empty".into());
    };
    let d = boxes.dim;
    let table_dim = first.kernel.dim();
    if table_dim != d {
        return bad(format!("the table is {table_dim}D, the boxes {d}D"));
    }
    boxes.check_boxes()?;
    Ok(first)
}

/// Every check of an evaluation before anything is computed, in this
/// order: the dimension, the boxes and pairs, the source values (when
/// given), the level scalings. Shared by the CPU and device evaluators so
/// that both refuse the same inputs with the same messages.
pub(crate) fn check_list1_inputs(
    boxes: &List1Boxes<'_>,
    shapes: &[TableShape],
    per_level: bool,
    source_values: Option<&[f64]>,
) -> Result<(List1Pairs, Vec<LevelScaling>)> {
    let first = check_list1_boxes(boxes, shapes)?;
    let d = boxes.dim;
    let (pairs, source_levels) = boxes.classify_pairs()?;
    if let Some(v) = source_values {
        check_source_values(v, boxes.n_boxes(), first.q.pow(d as u32))?;
    }
    let max_level = boxes.levels.iter().copied().max().unwrap_or(0) as usize;
    // The levels some pair's source is at came with the pairs.
    let used = &source_levels.0[..=max_level];
    let scalings = shape_scalings(shapes, per_level, boxes.root_extent, used)?;
    Ok((pairs, scalings))
}

/// List 1 of `source_values` (`n_boxes × q^d`, per box in node order) over
/// `boxes` with `tables`: `n_targets × q^d` values, per target box in node
/// order (module docs). Uses every core.
pub fn evaluate_list1(
    boxes: &List1Boxes<'_>,
    tables: &List1Tables<'_>,
    source_values: &[f64],
) -> Result<Vec<f64>> {
    let threads = crate::threads::machine_threads();
    evaluate_list1_with_threads(boxes, tables, source_values, threads)
}

/// [`evaluate_list1`] on `threads` threads (at least 1); the result does
/// not depend on `threads`.
pub fn evaluate_list1_with_threads(
    boxes: &List1Boxes<'_>,
    tables: &List1Tables<'_>,
    source_values: &[f64],
    threads: usize,
) -> Result<Vec<f64>> {
    let first = tables.first()?;
    let (pairs, scalings) = check_list1_inputs(
        boxes,
        &tables.shapes(),
        matches!(tables, List1Tables::PerLevel(_)),
        Some(source_values),
    )?;
    let nq = first.n_modes();
    let table_of = |l: usize| match tables {
        List1Tables::Scaled(t) => *t,
        List1Tables::PerLevel(ts) => &ts[scalings[l].table],
    };
    let normalizers = first.mode_normalizers();

    let nt = boxes.target_boxes.len();
    let mut out = vec![0.0f64; nt * nq];
    let threads = threads.clamp(1, nt.max(1));
    let rows_per = nt.div_ceil(threads).max(1);
    // Each thread's rows are its own; a refused thread leaves its rows
    // to the others (map_on_threads).
    let chunks: Vec<_> = out.chunks_mut(rows_per * nq).enumerate().collect();
    map_on_threads(threads, chunks, |(chunk, rows)| {
        let mut acc = vec![0.0f64; nq];
        for (r, row) in rows.chunks_exact_mut(nq).enumerate() {
            let i = chunk * rows_per + r;
            let (a, b) = (
                boxes.source_starts[i] as usize,
                boxes.source_starts[i + 1] as usize,
            );
            for j in a..b {
                let sb = boxes.source_boxes[j] as usize;
                let level = boxes.levels[sb] as usize;
                let sc = scalings[level];
                let data = table_of(level).data();
                let case = usize::from(pairs.cases[j]);
                let f = &source_values[sb * nq..(sb + 1) * nq];
                acc.fill(0.0);
                for (s, &fs) in f.iter().enumerate() {
                    let entries = &data[(case * nq + s) * nq..(case * nq + s + 1) * nq];
                    for (a, &e) in acc.iter_mut().zip(entries) {
                        *a += fs * e;
                    }
                }
                let disp = if sc.displacement != 0.0 {
                    sc.displacement * f.iter().zip(normalizers).map(|(a, b)| a * b).sum::<f64>()
                } else {
                    0.0
                };
                for (u, &a) in row.iter_mut().zip(&acc) {
                    *u += sc.scale * a + disp;
                }
            }
        }
    });
    Ok(out)
}
