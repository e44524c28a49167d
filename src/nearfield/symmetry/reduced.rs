//! Symmetry-reduced near-field tables: one value per orbit of the kernel's
//! group (seed `nearfield_symmetry.txt`, "Compact table storage").
//!
//! A [`ReducedTable`] stores `reduced_entry_ids` (the representatives: the
//! smallest full entry id of each orbit, ascending) and `reduced_data`
//! (their values); no dense buffer. A full entry is found from its id
//! alone ([`ReducedTable::representative_of`]): its images under every
//! allowed transform, the smallest id among them is the representative,
//! and the sign is that of the first transform reaching it, positive
//! transforms first (the fallback's tie rule). An orbit reached with both
//! signs is zero by symmetry and stored as exactly 0.
//!
//! # Construction from representatives only
//!
//! [`ReducedTable::build`] never builds the dense map or the union-find.
//! It finds the representatives by testing each full id against its own
//! images, and computes their values from one quadrature pass
//! ([`crate::nearfield::entries_at_point`], all source modes at once) per orbit of
//! (case, target point) pairs under the group: for a representative
//! `(c, s, t)` and a transform `g` taking `(c, t)` to the pair orbit's
//! representative `(c₀, t₀)`, `T[c, s, t] = sign(g) · T[c₀, g s, t₀]`. At
//! 3D q = 3 that is 127 passes instead of the dense table's 3753.
use crate::nearfield::cases::Cases;
use crate::nearfield::entry::{entries_at_point, EntryQuadrature};
use crate::nearfield::kernels::Kernel;
use crate::nearfield::limits::{check_finite, check_kernel_and_extent, check_table_size};
use crate::nearfield::quadrature::q_points;
use crate::nearfield::symmetry::{apply_to_entry, kernel_group, DenseOrbits, SignedPermutation};
use crate::nearfield::table::{entry_name, kernel_name, mode_normalizers, NearFieldTable};
use crate::runtime::{Error, Result};
use crate::threads::map_on_threads;
use std::collections::HashMap;

/// A symmetry-reduced table (module docs).
#[derive(Clone, Debug)]
pub struct ReducedTable {
    kernel: Kernel,
    q: usize,
    extent: f64,
    quad: EntryQuadrature,
    cases: Cases,
    group: Vec<(SignedPermutation, i8)>,
    q_points: Vec<f64>,
    mode_normalizers: Vec<f64>,
    reduced_entry_ids: Vec<u32>,
    reduced_data: Vec<f64>,
    zero_orbits: usize,
    quadrature_passes: usize,
}

/// The representative of a full entry and the sign from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Representative {
    /// Smallest full id of the orbit.
    pub id: usize,
    /// `T[entry] = sign · T[id]`; 0 when the orbit is zero by symmetry.
    pub sign: i8,
}

fn representative(
    group: &[(SignedPermutation, i8)],
    cases: &Cases,
    q: usize,
    id: usize,
) -> Representative {
    let mut best = usize::MAX;
    let mut sign = 0i8;
    let mut both = false;
    for (g, sg) in group {
        let f = apply_to_entry(g, cases, q, id);
        if f < best {
            best = f;
            sign = *sg;
            both = false;
        } else if f == best && *sg != sign {
            both = true;
        }
    }
    // T[f] = sg·T[id] and sg = ±1, so T[id] = sg·T[f].
    Representative {
        id: best,
        sign: if both { 0 } else { sign },
    }
}

impl ReducedTable {
    /// Builds the representatives only (module docs), with every core.
    pub fn build(kernel: &Kernel, q: usize, l: f64, quad: &EntryQuadrature) -> Result<Self> {
        let threads = crate::threads::machine_threads();
        ReducedTable::build_with_threads(kernel, q, l, quad, threads)
    }

    /// [`ReducedTable::build`] on `threads` threads; the result does not
    /// depend on `threads`.
    pub fn build_with_threads(
        kernel: &Kernel,
        q: usize,
        l: f64,
        quad: &EntryQuadrature,
        threads: usize,
    ) -> Result<Self> {
        let d = kernel.dim();
        // Refused before any work, as the dense build does: the size, the
        // extent, λ·L, a direction.
        check_table_size(d, q)?;
        check_kernel_and_extent(kernel, l)?;
        let cases = Cases::new(d)?;
        let qp = q_points(q, l, d)?;
        let normalizers = mode_normalizers(q, l, d)?;
        let group = kernel_group(kernel);
        let nq = q.pow(d as u32);
        let n = cases.len() * nq * nq;
        let mut reps = Vec::new();
        let mut signs = Vec::new();
        for e in 0..n {
            let r = representative(&group, &cases, q, e);
            if r.id == e {
                reps.push(e as u32);
                signs.push(r.sign);
            }
        }
        // Orbits of (case, target) pairs: the image of (c, t) under g is
        // read off the entry (c, 0, t)'s image.
        let pair_rep = |c: usize, t: usize| -> (usize, SignedPermutation, i8) {
            let e = (c * nq) * nq + t;
            let mut best = (usize::MAX, group[0].0, 1i8);
            for (g, sg) in &group {
                let f = apply_to_entry(g, &cases, q, e);
                let pair = (f / (nq * nq)) * nq + f % nq;
                if pair < best.0 {
                    best = (pair, *g, *sg);
                }
            }
            best
        };
        // Which pass each representative reads, and where.
        let mut passes: Vec<usize> = Vec::new();
        let mut pass_index: HashMap<usize, usize> = HashMap::new();
        let mut reads: Vec<(usize, usize, i8)> = Vec::with_capacity(reps.len());
        for (&e, &sign) in reps.iter().zip(&signs) {
            let e = e as usize;
            let (c, s, t) = (e / (nq * nq), (e / nq) % nq, e % nq);
            let (pair, g, sg) = pair_rep(c, t);
            let p = *pass_index.entry(pair).or_insert_with(|| {
                passes.push(pair);
                passes.len() - 1
            });
            let s0 = g.apply_node(s, q, d);
            reads.push((p, s0, if sign == 0 { 0 } else { sg }));
        }
        let mut targets = Vec::with_capacity(passes.len() * d);
        for &pair in &passes {
            let (c, t) = (pair / nq, pair % nq);
            targets.extend_from_slice(&cases.target_points(c, q, l)?[t * d..(t + 1) * d]);
        }
        // One pass a work item, on every thread (a refused thread leaves
        // its items to the others); the first failure in pass order.
        let values: Vec<Vec<f64>> = map_on_threads(threads, (0..passes.len()).collect(), |i| {
            entries_at_point(kernel, q, &targets[i * d..(i + 1) * d], l, quad)
        })
        .into_iter()
        .collect::<Result<_>>()?;
        let reduced_data: Vec<f64> = reads
            .iter()
            .map(|&(p, s0, sg)| {
                if sg == 0 {
                    0.0
                } else {
                    f64::from(sg) * values[p][s0]
                }
            })
            .collect();
        // Each pass checked its own values; this is the net behind it.
        check_finite(
            &format!("reduced table ({})", kernel_name(kernel)),
            &reduced_data,
            &|row| format!("row {row}, {}", entry_name(&cases, q, reps[row] as usize)),
        )?;
        let zero_orbits = signs.iter().filter(|&&s| s == 0).count();
        Ok(ReducedTable {
            kernel: kernel.clone(),
            q,
            extent: l,
            quad: *quad,
            cases,
            group,
            q_points: qp,
            mode_normalizers: normalizers,
            reduced_entry_ids: reps,
            reduced_data,
            zero_orbits,
            quadrature_passes: passes.len(),
        })
    }

    /// The reduction of a dense table through the dense oracle
    /// ([`DenseOrbits`]): the representatives' values taken from the table
    /// (zero-by-symmetry orbits stored as 0).
    pub fn from_dense(table: &NearFieldTable) -> Result<Self> {
        let o = DenseOrbits::build(table.kernel(), table.q())?;
        let reduced_data = o
            .representatives
            .iter()
            .zip(&o.zero_by_symmetry)
            .map(|(&r, &z)| if z { 0.0 } else { table.data()[r as usize] })
            .collect();
        Ok(ReducedTable {
            kernel: table.kernel().clone(),
            q: table.q(),
            extent: table.extent(),
            quad: *table.quadrature(),
            cases: table.cases().clone(),
            group: kernel_group(table.kernel()),
            q_points: table.q_points().to_vec(),
            mode_normalizers: table.mode_normalizers().to_vec(),
            zero_orbits: o.zero_by_symmetry.iter().filter(|&&z| z).count(),
            reduced_entry_ids: o.representatives,
            reduced_data,
            quadrature_passes: 0,
        })
    }

    /// Rebuilds a reduced table from stored arrays (a cache payload),
    /// checking them: as many values as ids, ids the representatives of
    /// this kernel and `q` in ascending order, every value finite, and
    /// exactly 0 on the orbits that are zero by symmetry.
    pub fn from_parts(
        kernel: &Kernel,
        q: usize,
        l: f64,
        quad: &EntryQuadrature,
        reduced_entry_ids: Vec<u32>,
        reduced_data: Vec<f64>,
    ) -> Result<Self> {
        let d = kernel.dim();
        let cases = Cases::new(d)?;
        let qp = q_points(q, l, d)?;
        let normalizers = mode_normalizers(q, l, d)?;
        let group = kernel_group(kernel);
        let bad = |m: String| Err(Error::InvalidInput(format!("reduced table: {m}")));
        if reduced_entry_ids.len() != reduced_data.len() {
            return bad(format!(
                "{} representative ids but {} values",
                reduced_entry_ids.len(),
                reduced_data.len()
            ));
        }
        let n = cases.n_entries(q);
        let mut expected = 0usize;
        let mut zero_orbits = 0;
        let mut k = 0usize;
        for e in 0..n {
            let r = representative(&group, &cases, q, e);
            if r.id != e {
                continue;
            }
            if k >= reduced_entry_ids.len() || reduced_entry_ids[k] as usize != e {
                return bad(format!(
                    "reduced_entry_ids[{k}] = {:?}, the representative is {e}",
                    reduced_entry_ids.get(k)
                ));
            }
            let v = reduced_data[k];
            if !v.is_finite() {
                return bad(format!("reduced_data[{k}] = {v} is not finite"));
            }
            if r.sign == 0 {
                zero_orbits += 1;
                if v != 0.0 {
                    return bad(format!(
                        "reduced_data[{k}] = {v}: entry {e} is zero by symmetry"
                    ));
                }
            }
            k += 1;
            expected += 1;
        }
        if expected != reduced_entry_ids.len() {
            return bad(format!(
                "{} representative ids, this kernel and q have {expected}",
                reduced_entry_ids.len()
            ));
        }
        Ok(ReducedTable {
            kernel: kernel.clone(),
            q,
            extent: l,
            quad: *quad,
            cases,
            group,
            q_points: qp,
            mode_normalizers: normalizers,
            reduced_entry_ids,
            reduced_data,
            zero_orbits,
            quadrature_passes: 0,
        })
    }

    /// The representative of full entry `id` and its sign (module docs).
    pub fn representative_of(&self, id: usize) -> Result<Representative> {
        let n = self.n_full_entries();
        if id >= n {
            return Err(Error::InvalidInput(format!(
                "full entry id {id} out of range 0..{n}"
            )));
        }
        Ok(representative(&self.group, &self.cases, self.q, id))
    }

    /// The value of full entry `id`: `sign · reduced_data[row of its
    /// representative]` (the dense adapter).
    pub fn get_entry_data(&self, id: usize) -> Result<f64> {
        let r = self.representative_of(id)?;
        let row = self
            .reduced_entry_ids
            .binary_search(&(r.id as u32))
            .expect("every representative has a row");
        Ok(f64::from(r.sign) * self.reduced_data[row])
    }

    /// Every full entry in id order (the dense adapter; the caller keeps
    /// the array, the table does not).
    pub fn reconstruct_full_table_from_symmetry(&self) -> Vec<f64> {
        (0..self.n_full_entries())
            .map(|id| self.get_entry_data(id).expect("id in range"))
            .collect()
    }

    /// The dense table these representatives expand to (same kernel, q,
    /// extent and quadrature; every entry from
    /// [`ReducedTable::reconstruct_full_table_from_symmetry`]).
    pub fn to_dense(&self) -> Result<NearFieldTable> {
        NearFieldTable::from_parts(
            &self.kernel,
            self.q,
            self.extent(),
            self.quadrature(),
            self.reconstruct_full_table_from_symmetry(),
        )
    }

    /// The kernel.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.q
    }

    /// The source box extent `L`.
    pub fn extent(&self) -> f64 {
        self.extent
    }

    /// The quadrature orders the values were computed with.
    pub fn quadrature(&self) -> &EntryQuadrature {
        &self.quad
    }

    /// The cases.
    pub fn cases(&self) -> &Cases {
        &self.cases
    }

    /// The source box's nodes.
    pub fn q_points(&self) -> &[f64] {
        &self.q_points
    }

    /// `∫ φ_s` per mode.
    pub fn mode_normalizers(&self) -> &[f64] {
        &self.mode_normalizers
    }

    /// Full entry count `n_cases · q^{2d}`.
    pub fn n_full_entries(&self) -> usize {
        self.cases.n_entries(self.q)
    }

    /// The representatives (ascending full ids).
    pub fn reduced_entry_ids(&self) -> &[u32] {
        &self.reduced_entry_ids
    }

    /// Their values.
    pub fn reduced_data(&self) -> &[f64] {
        &self.reduced_data
    }

    /// Orbits that are zero by symmetry (self-conflicting).
    pub fn zero_orbits(&self) -> usize {
        self.zero_orbits
    }

    /// Quadrature passes the build made (0 when not built by
    /// [`ReducedTable::build`]).
    pub fn quadrature_passes(&self) -> usize {
        self.quadrature_passes
    }
}
