//! 2:1-balanced quadtrees/octrees with their List 1 lists, for tests,
//! benchmarks and the demo: the leaves of a uniform tree, or of a random
//! adaptive one, balanced so that leaves sharing any point (a face, an edge
//! or only a corner) are at most one level apart — the condition under
//! which every List 1 pair is one of the interaction cases of [`Cases`].
//!
//! A tree here is its leaves. Each leaf is a box of the root
//! `[root_lower, root_lower + root_extent]^d` at a level `l` (side
//! `root_extent / 2^l`) with an integer position `p ∈ [0, 2^l)^d`; leaves
//! tile the root without overlap. Leaves are numbered in Morton (Z) order
//! of their lower corners on the finest grid, coarser first at equal corners
//! (a locality order a GPU likes). The List 1 of a leaf is every leaf that
//! touches it, itself included, ascending by leaf id.
//!
//! [`Cases`]: crate::nearfield::Cases
use crate::nearfield::quadrature::gauss_legendre;
use crate::rng::SplitMix64;
use crate::runtime::{Error, Result};
use std::collections::{HashMap, HashSet};

/// The deepest level a tree may have (positions are `u32`, Morton keys of
/// `3·MAX_TREE_LEVEL` bits must fit a `u64`).
pub const MAX_TREE_LEVEL: u32 = 20;

/// A leaf: level and integer position per axis (unused axes 0).
type Cell = (u32, [u32; 3]);

/// The leaves of a 2:1-balanced tree and their List 1 lists (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct BalancedTree {
    dim: usize,
    root_lower: Vec<f64>,
    root_extent: f64,
    levels: Vec<u32>,
    positions: Vec<[u32; 3]>,
    centers: Vec<f64>,
    list1_starts: Vec<u32>,
    list1_sources: Vec<u32>,
}

/// How [`BalancedTree::random`] refines.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomTreeConfig {
    /// 2 or 3.
    pub dim: usize,
    /// Seed of the generator ([`SplitMix64`]).
    pub seed: u64,
    /// Deepest level (1..=[`MAX_TREE_LEVEL`]).
    pub max_level: u32,
    /// Every box above this level is refined (default 2, capped at
    /// `max_level`).
    pub min_level: u32,
    /// Random points the refinement gathers around (default 3): a box is
    /// refined when one lies within `1.5` box sides of its centre.
    pub attractors: usize,
    /// Probability that any other box is refined anyway (default 0.1).
    pub refine_probability: f64,
    /// Lower corner of the root box (`dim` components; default 0).
    pub root_lower: Vec<f64>,
    /// Side of the root box (default 1).
    pub root_extent: f64,
}

impl RandomTreeConfig {
    /// The defaults above for this dimension, seed and depth.
    pub fn new(dim: usize, seed: u64, max_level: u32) -> Self {
        RandomTreeConfig {
            dim,
            seed,
            max_level,
            min_level: 2,
            attractors: 3,
            refine_probability: 0.1,
            root_lower: vec![0.0; dim],
            root_extent: 1.0,
        }
    }
}

fn check_geometry(dim: usize, root_lower: &[f64], root_extent: f64) -> Result<()> {
    if !(dim == 2 || dim == 3) {
        return Err(Error::InvalidInput(format!(
            "tree dimension {dim}: must be 2 or 3"
        )));
    }
    if root_lower.len() != dim {
        return Err(Error::InvalidInput(format!(
            "root lower corner has {} components, dimension is {dim}",
            root_lower.len()
        )));
    }
    if let Some(x) = root_lower.iter().find(|x| !x.is_finite()) {
        return Err(Error::InvalidInput(format!(
            "root lower corner component {x} is not finite"
        )));
    }
    if !(root_extent.is_finite() && root_extent > 0.0) {
        return Err(Error::InvalidInput(format!(
            "root extent {root_extent}: must be finite and positive"
        )));
    }
    Ok(())
}

fn check_level(level: u32, what: &str) -> Result<()> {
    if level > MAX_TREE_LEVEL {
        return Err(Error::InvalidInput(format!(
            "{what} {level}: at most {MAX_TREE_LEVEL}"
        )));
    }
    Ok(())
}

/// The `2^d` children of a cell.
fn children(dim: usize, (l, p): Cell) -> impl Iterator<Item = Cell> {
    (0..1usize << dim).map(move |c| {
        let mut q = [0u32; 3];
        for k in 0..dim {
            q[k] = 2 * p[k] + ((c >> (dim - 1 - k)) & 1) as u32;
        }
        (l + 1, q)
    })
}

/// The neighbour offsets `{−1, 0, 1}^d` (the zero offset included), in a
/// fixed order.
fn offsets(dim: usize) -> Vec<[i64; 3]> {
    let n = 3usize.pow(dim as u32);
    (0..n)
        .map(|i| {
            let mut o = [0i64; 3];
            for (k, ok) in o.iter_mut().enumerate().take(dim) {
                *ok = ((i / 3usize.pow((dim - 1 - k) as u32)) % 3) as i64 - 1;
            }
            o
        })
        .collect()
}

/// The cell at offset `o` from `(l, p)` at the same level, if inside the
/// root.
fn shifted(dim: usize, (l, p): Cell, o: &[i64; 3]) -> Option<Cell> {
    let side = 1i64 << l;
    let mut q = [0u32; 3];
    for k in 0..dim {
        let x = i64::from(p[k]) + o[k];
        if !(0..side).contains(&x) {
            return None;
        }
        q[k] = x as u32;
    }
    Some((l, q))
}

/// The leaf covering cell `c` (itself or an ancestor), if any.
fn covering_leaf(leaves: &HashSet<Cell>, dim: usize, (l, p): Cell) -> Option<Cell> {
    (0..=l).rev().find_map(|k| {
        let mut q = [0u32; 3];
        for a in 0..dim {
            q[a] = p[a] >> (l - k);
        }
        leaves.get(&(k, q)).copied()
    })
}

impl BalancedTree {
    /// The uniform tree: every leaf at `level` (`2^{d·level}` leaves).
    pub fn uniform(dim: usize, level: u32, root_lower: &[f64], root_extent: f64) -> Result<Self> {
        check_geometry(dim, root_lower, root_extent)?;
        check_level(level, "tree level")?;
        let n = 1u64 << (dim as u32 * level);
        if n > 1 << 24 {
            return Err(Error::InvalidInput(format!(
                "uniform tree of {n} leaves (dimension {dim}, level {level}): at most 2^24"
            )));
        }
        let side = 1u32 << level;
        let leaves: HashSet<Cell> = (0..n as u32)
            .map(|i| {
                let mut p = [0u32; 3];
                for (k, pk) in p.iter_mut().enumerate().take(dim) {
                    *pk = (i / side.pow((dim - 1 - k) as u32)) % side;
                }
                (level, p)
            })
            .collect();
        BalancedTree::from_leaves(dim, root_lower, root_extent, leaves)
    }

    /// A random adaptive tree (see [`RandomTreeConfig`]), then balanced 2:1
    /// across faces, edges and corners. The same config gives the same
    /// tree on every platform.
    pub fn random(config: &RandomTreeConfig) -> Result<Self> {
        let d = config.dim;
        check_geometry(d, &config.root_lower, config.root_extent)?;
        check_level(config.max_level, "maximum level")?;
        if config.max_level == 0 {
            return Err(Error::InvalidInput(
                "maximum level 0: a random tree needs at least one refinement".into(),
            ));
        }
        let p = config.refine_probability;
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidInput(format!(
                "refine probability {p}: must be in [0, 1]"
            )));
        }
        let mut rng = SplitMix64::new(config.seed);
        let unit = |rng: &mut SplitMix64| 0.5 * (rng.uniform_pm1() + 1.0);
        let attractors: Vec<[f64; 3]> = (0..config.attractors)
            .map(|_| {
                let mut a = [0.0; 3];
                for x in a.iter_mut().take(d) {
                    *x = unit(&mut rng);
                }
                a
            })
            .collect();
        let min_level = config.min_level.min(config.max_level);
        // Refine depth-first in a fixed order, one draw per box, so the tree
        // depends on the config only.
        let mut leaves = HashSet::new();
        let mut frontier = vec![(0u32, [0u32; 3])];
        while let Some(cell) = frontier.pop() {
            let (l, pos) = cell;
            let h = 1.0 / f64::from(1u32 << l);
            let near = attractors.iter().any(|a| {
                (0..d)
                    .map(|k| (a[k] - (f64::from(pos[k]) + 0.5) * h).abs())
                    .fold(0.0f64, f64::max)
                    < 1.5 * h
            });
            let draw = unit(&mut rng);
            let refine = l < config.max_level && (l < min_level || near || draw < p);
            if refine {
                frontier.extend(children(d, cell));
            } else {
                leaves.insert(cell);
            }
        }
        balance(d, &mut leaves);
        BalancedTree::from_leaves(d, &config.root_lower, config.root_extent, leaves)
    }

    /// Numbers the leaves (module docs), computes centres and List 1.
    fn from_leaves(
        dim: usize,
        root_lower: &[f64],
        root_extent: f64,
        leaves: HashSet<Cell>,
    ) -> Result<Self> {
        let max_level = leaves.iter().map(|c| c.0).max().unwrap_or(0);
        let morton = |&(l, p): &Cell| {
            let mut key = 0u64;
            for bit in (0..max_level).rev() {
                for &x in p.iter().take(dim) {
                    let a = u64::from(x) << (max_level - l);
                    key = (key << 1) | ((a >> bit) & 1);
                }
            }
            (key, l)
        };
        let mut order: Vec<Cell> = leaves.iter().copied().collect();
        order.sort_by_key(morton);
        let id: HashMap<Cell, u32> = order
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        let offs = offsets(dim);
        let mut starts = Vec::with_capacity(order.len() + 1);
        let mut sources = Vec::new();
        starts.push(0u32);
        for &cell in &order {
            let mut list: Vec<u32> = Vec::new();
            for o in &offs {
                let Some(nb) = shifted(dim, cell, o) else {
                    continue;
                };
                if let Some(leaf) = covering_leaf(&leaves, dim, nb) {
                    list.push(id[&leaf]);
                    continue;
                }
                // `nb` is refined: its children on our side touch us; in a
                // balanced tree they are leaves.
                for child in children(dim, nb) {
                    let touches = (0..dim).all(|k| match o[k] {
                        -1 => child.1[k] % 2 == 1,
                        1 => child.1[k] % 2 == 0,
                        _ => true,
                    });
                    if touches {
                        let Some(&c) = id.get(&child) else {
                            return Err(Error::InvalidInput(format!(
                                "tree is not 2:1 balanced: leaf at level {} position {:?} \
                                 touches boxes two levels finer",
                                cell.0,
                                &cell.1[..dim]
                            )));
                        };
                        list.push(c);
                    }
                }
            }
            list.sort_unstable();
            list.dedup();
            sources.extend_from_slice(&list);
            starts
                .push(u32::try_from(sources.len()).map_err(|_| {
                    Error::InvalidInput("List 1 has more than 2^32 entries".into())
                })?);
        }
        let mut centers = Vec::with_capacity(order.len() * dim);
        for &(l, p) in &order {
            let h = root_extent / f64::from(1u32 << l);
            for k in 0..dim {
                centers.push(root_lower[k] + (f64::from(p[k]) + 0.5) * h);
            }
        }
        Ok(BalancedTree {
            dim,
            root_lower: root_lower.to_vec(),
            root_extent,
            levels: order.iter().map(|c| c.0).collect(),
            positions: order.iter().map(|c| c.1).collect(),
            centers,
            list1_starts: starts,
            list1_sources: sources,
        })
    }

    /// 2 or 3.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of leaves.
    pub fn n_boxes(&self) -> usize {
        self.levels.len()
    }

    /// Lower corner of the root box.
    pub fn root_lower(&self) -> &[f64] {
        &self.root_lower
    }

    /// Side of the root box.
    pub fn root_extent(&self) -> f64 {
        self.root_extent
    }

    /// Level of each leaf.
    pub fn levels(&self) -> &[u32] {
        &self.levels
    }

    /// Integer position of leaf `b` on the grid of its level (`dim` values).
    pub fn position(&self, b: usize) -> &[u32] {
        &self.positions[b][..self.dim]
    }

    /// Centres, `n_boxes × dim`, row-major.
    pub fn centers(&self) -> &[f64] {
        &self.centers
    }

    /// Side of leaf `b`: `root_extent / 2^level`.
    pub fn box_extent(&self, b: usize) -> f64 {
        self.root_extent / f64::from(1u32 << self.levels[b])
    }

    /// CSR offsets of the List 1 lists (`n_boxes + 1`).
    pub fn list1_starts(&self) -> &[u32] {
        &self.list1_starts
    }

    /// The List 1 lists, concatenated (leaf ids, ascending per list, each
    /// list holding its own box).
    pub fn list1_sources(&self) -> &[u32] {
        &self.list1_sources
    }

    /// Deepest level.
    pub fn max_level(&self) -> u32 {
        self.levels.iter().copied().max().unwrap_or(0)
    }

    /// The `q^d` Gauss–Legendre nodes of every leaf (`n_boxes × q^d × dim`,
    /// row-major; per box in the order of [`crate::nearfield::q_points`]): where a
    /// table's target points and source modes sit in this tree.
    pub fn box_points(&self, q: usize) -> Result<Vec<f64>> {
        let d = self.dim;
        let nq = q.pow(d as u32);
        let mut out = Vec::with_capacity(self.n_boxes() * nq * d);
        for b in 0..self.n_boxes() {
            let h = self.box_extent(b);
            let (x, _) = gauss_legendre(q, h)?;
            for m in 0..nq {
                for k in 0..d {
                    let mk = (m / q.pow((d - 1 - k) as u32)) % q;
                    out.push(self.centers[b * d + k] - 0.5 * h + x[mk]);
                }
            }
        }
        Ok(out)
    }
}

/// Refines leaves until no two touching leaves are more than one level
/// apart (faces, edges and corners).
fn balance(dim: usize, leaves: &mut HashSet<Cell>) {
    let offs = offsets(dim);
    let mut work: Vec<Cell> = leaves.iter().copied().collect();
    work.sort_unstable();
    while let Some(cell) = work.pop() {
        if !leaves.contains(&cell) || cell.0 < 2 {
            continue;
        }
        for o in &offs {
            let Some(nb) = shifted(dim, cell, o) else {
                continue;
            };
            if let Some(big) = covering_leaf(leaves, dim, nb) {
                if big.0 + 1 < cell.0 {
                    leaves.remove(&big);
                    for c in children(dim, big) {
                        leaves.insert(c);
                        work.push(c);
                    }
                    // The cell itself may need another look after this.
                    work.push(cell);
                }
            }
        }
    }
}
