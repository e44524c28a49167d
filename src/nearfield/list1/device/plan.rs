//! What is checked and uploaded once per tree: a tree's boxes and lists
//! validated against the evaluator's tables, the kernel chosen for them
//! (`dispatch.rs`), and what that kernel needs uploaded (pairs, level
//! scalings; the grouped kernel's groups and chunks, or the tiled kernels'
//! tiles, their sources and the keys' case matrices).
use super::dispatch::{choose, choose_without_pairs, staged_source_bound, TileBusy};
use super::parts::{DeviceParts, Packing, Part};
use super::payload::{KeyMatrices, TableMeta};
use super::{bad, List1Contract, List1Evaluator, List1Kernel, List1Layout, MAX_TILED_MODES};
use crate::nearfield::list1::{check_list1_inputs, LevelScaling, List1Boxes};
use crate::nearfield::list1_grouping::{group_pairs, tile_capacity, GroupChunk};
use crate::nearfield::list1_tiling::{lanes_busy, Cut, KeyOrder, TargetTiling};
use crate::runtime::{check, DeviceBuffer, Result};
use crate::threads::map_on_threads;
use hipkern_sys as sys;

/// The validated pairs of an evaluation, host side.
#[derive(Clone, Debug)]
pub(super) struct HostPairs<'a> {
    starts: &'a [u32],
    sources: &'a [u32],
    cases: Vec<u8>,
    box_levels: Vec<u8>,
    scalings: Vec<LevelScaling>,
}

impl HostPairs<'_> {
    /// Pair `j`'s key, `table · n_cases + case` (the grouped and tiled
    /// kernels' unit of work: one case matrix).
    fn key(&self, j: usize, n_cases: usize) -> usize {
        let level = usize::from(self.box_levels[self.sources[j] as usize]);
        self.scalings[level].table * n_cases + usize::from(self.cases[j])
    }
}

// The tables' side of these checks, and `TableMeta` itself, are the
// payload's: payload.rs.
impl TableMeta {
    /// The CPU evaluator's checks, in its order: the dimension, the boxes
    /// and pairs, the source values (when given), the level scalings.
    pub(super) fn check<'a>(
        &self,
        boxes: &List1Boxes<'a>,
        values: Option<&[f64]>,
    ) -> Result<HostPairs<'a>> {
        let (pairs, scalings) = check_list1_inputs(boxes, &self.shapes, self.per_level, values)?;
        self.check_sizes(boxes, scalings.len())?;
        Ok(HostPairs {
            starts: boxes.source_starts,
            sources: boxes.source_boxes,
            cases: pairs.cases.iter().map(|&c| c as u8).collect(),
            box_levels: boxes.levels.iter().map(|&l| l as u8).collect(),
            scalings,
        })
    }
}

impl TableMeta {
    /// The device's own limits, checked after the CPU evaluator's checks:
    /// `n_levels` levels of scalings, the boxes' and targets' values.
    pub(super) fn check_sizes(&self, boxes: &List1Boxes<'_>, n_levels: usize) -> Result<()> {
        let n = boxes.n_boxes();
        let nq = self.nq;
        if n_levels > sys::HIPKERN_LIST1_MAX_LEVELS as usize {
            return bad(format!(
                "levels 0..={}: the device takes at most {} levels",
                n_levels - 1,
                sys::HIPKERN_LIST1_MAX_LEVELS
            ));
        }
        if n.checked_mul(nq).is_none() || boxes.target_boxes.len().checked_mul(nq).is_none() {
            return bad(format!("{n} boxes × {nq} values overflow"));
        }
        Ok(())
    }
}

/// The validated boxes and lists of one tree for one evaluator, on its
/// device ([`List1Evaluator::plan`]), with the kernel chosen for them
/// ([`Self::kernel`], [`Self::reason`]) and what it needs: the grouped
/// kernel's groups (and, after its first evaluation, its scratch) or the
/// tiled kernels' tiles.
///
/// The grouped scratch is the plan's: evaluations of one grouped plan on
/// different streams must be ordered by the caller (an event between
/// them), or one overwrites the pair products the other is still summing.
/// Use one plan per stream to run them concurrently.
pub struct List1DevicePlan {
    pub(super) evaluator: u64,
    pub(super) device: usize,
    pub(super) n_targets: usize,
    pub(super) n_boxes: usize,
    pub(super) n_pairs: usize,
    pub(super) displacement_pairs: usize,
    pub(super) n_levels: usize,
    pub(super) nq: usize,
    pub(super) kernel: List1Kernel,
    pub(super) contract: List1Contract,
    pub(super) reason: String,
    /// Every array below, in one allocation (parts.rs).
    pub(super) parts: DeviceParts,
    pub(super) starts: Part<u32>,
    pub(super) sources: Part<u32>,
    pub(super) cases: Part<u8>,
    pub(super) box_levels: Part<u8>,
    pub(super) level_scale: Part<f64>,
    pub(super) level_displacement: Part<f64>,
    pub(super) level_table: Part<u32>,
    pub(super) bytes: usize,
    pub(super) groups: Option<DeviceGrouping>,
    pub(super) tiles: Option<DeviceTiling>,
    /// Whether the pairs were classified and grouped on the device
    /// (tree_plan.rs) rather than on the host.
    pub(super) built_on_device: bool,
}

/// A plan's arrays as the device holds them (for tests: `internals`).
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DownloadedPlan {
    /// Every pair's case id.
    pub cases: Vec<u8>,
    /// The grouped tiles' `n_tiles + 1` offsets into `tile_pairs` (empty
    /// for the other kernels).
    pub tile_offsets: Vec<u32>,
    /// Each tile's key.
    pub tile_keys: Vec<u32>,
    /// The pair ids of the tiles.
    pub tile_pairs: Vec<u32>,
    /// Each chunk's target range, pair range and tile range.
    pub chunks: Vec<[std::ops::Range<usize>; 3]>,
}

/// The tiled kernels' part of a plan.
pub(super) struct DeviceTiling {
    targets_per_tile: usize,
    n_tiles: usize,
    slots: usize,
    tile_targets: Part<u32>,
    tile_key_offsets: Part<u32>,
    keys: Part<u32>,
    key_pairs: Part<u32>,
    /// The staged kernel's: each tile's sources and each slot's row.
    max_tile_sources: usize,
    tile_source_offsets: Part<u32>,
    tile_sources: Part<u32>,
    key_source_slots: Part<u16>,
    /// The case matrices of the tiles' keys, for an ORBIT or fallback
    /// table (the tiled kernels read dense matrices alone).
    key_matrices: Option<KeyMatrices>,
}

/// The grouped kernel's part of a plan: the groups on the device, the
/// chunks on the host, the scratch (allocated at the first evaluation).
pub(super) struct DeviceGrouping {
    pub(super) chunks: Vec<GroupChunk>,
    pub(super) tile_offsets: Part<u32>,
    pub(super) tile_keys: Part<u32>,
    pub(super) tile_pairs: Part<u32>,
    pub(super) max_chunk_pairs: usize,
    pub(super) scratch: Option<DeviceBuffer<f64>>,
}

impl std::fmt::Debug for List1DevicePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List1DevicePlan")
            .field("device", &self.device)
            .field("kernel", &self.kernel)
            .field("reason", &self.reason)
            .field("n_targets", &self.n_targets)
            .field("n_boxes", &self.n_boxes)
            .field("n_pairs", &self.n_pairs)
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl List1DevicePlan {
    /// The kernel this plan runs (chosen when it was made: `dispatch.rs`).
    pub fn kernel(&self) -> List1Kernel {
        self.kernel
    }

    /// The contract it was made under (its kernel keeps it:
    /// [`List1Kernel::contract`] is this or [`List1Contract::Exact`]).
    pub fn contract(&self) -> List1Contract {
        self.contract
    }

    /// Whether the device classified and grouped the pairs (a plan whose
    /// kernel needs no host tiling: `grouped`, `per-target`), rather than
    /// the host.
    pub fn built_on_device(&self) -> bool {
        self.built_on_device
    }

    /// Why the kernel was chosen, in a line (the rule and the numbers it
    /// compared).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Chunks of a grouped plan (each one pair of launches; the
    /// evaluator's scratch bound when the plan was made sets how many);
    /// 0 for the other kernels.
    pub fn grouped_chunks(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.chunks.len())
    }

    /// Bytes of a grouped plan's scratch: the pair products of the largest
    /// chunk (allocated at the first evaluation); 0 for the other kernels.
    pub fn pair_scratch_bytes(&self) -> usize {
        self.groups
            .as_ref()
            .map_or(0, |g| g.max_chunk_pairs * self.nq * 8)
    }

    /// The pairs as the C ABI's `hipkern_list1_evaluate*` entry points take
    /// them: device pointers into this plan's buffers, valid while it lives.
    pub(crate) fn raw_pairs(&self) -> sys::hipkern_list1_pairs {
        sys::hipkern_list1_pairs {
            n_targets: self.n_targets as i64,
            n_boxes: self.n_boxes as i64,
            n_pairs: self.n_pairs as i64,
            n_levels: self.n_levels as i32,
            source_starts: self.parts.ptr(self.starts),
            source_boxes: self.parts.ptr(self.sources),
            pair_cases: self.parts.ptr(self.cases),
            box_levels: self.parts.ptr(self.box_levels),
            level_scale: self.parts.ptr(self.level_scale),
            level_displacement: self.parts.ptr(self.level_displacement),
            level_table: self.parts.ptr(self.level_table),
        }
    }

    /// The tiles as `hipkern_list1_evaluate_tiled` takes them, for the
    /// plan's kernel: device pointers into this plan's buffers, valid while
    /// it lives; `None` for a plan of another kernel.
    pub(crate) fn raw_tiles(&self) -> Option<sys::hipkern_list1_tiles> {
        let tl = self.tiles.as_ref()?;
        let kernel = self.kernel.raw_tiled()?;
        Some(sys::hipkern_list1_tiles {
            targets_per_tile: tl.targets_per_tile as i32,
            kernel: kernel as i32,
            n_tiles: tl.n_tiles as i64,
            tile_targets: self.parts.ptr(tl.tile_targets),
            tile_key_offsets: self.parts.ptr(tl.tile_key_offsets),
            keys: self.parts.ptr(tl.keys),
            key_pairs: self.parts.ptr(tl.key_pairs),
            max_tile_sources: tl.max_tile_sources as i32,
            tile_source_offsets: self.parts.ptr(tl.tile_source_offsets),
            tile_sources: self.parts.ptr(tl.tile_sources),
            key_source_slots: self.parts.ptr(tl.key_source_slots),
            key_matrices: tl
                .key_matrices
                .as_ref()
                .map_or(std::ptr::null(), |m| m.values.as_ptr()),
            key_matrix_index: tl
                .key_matrices
                .as_ref()
                .map_or(std::ptr::null(), |m| m.index.as_ptr()),
            n_key_matrices: tl.key_matrices.as_ref().map_or(0, |m| m.count as i64),
        })
    }

    /// Case matrices the plan holds (a tiled plan of an ORBIT or fallback
    /// table: one per distinct key of its tiles, expanded once on the
    /// device from the layout; else 0).
    pub fn key_matrices(&self) -> usize {
        self.tiles
            .as_ref()
            .and_then(|t| t.key_matrices.as_ref())
            .map_or(0, |m| m.count)
    }

    /// Device bytes of those matrices (`key_matrices() × q^{2d} × 8`).
    pub fn key_matrix_bytes(&self) -> usize {
        self.key_matrices() * self.nq * self.nq * 8
    }

    /// The plan's arrays, downloaded (`internals::download_plan`).
    pub(super) fn download(&self) -> Result<DownloadedPlan> {
        let mut cases = vec![0u8; self.n_pairs];
        self.parts.read(self.cases, &mut cases)?;
        let Some(g) = &self.groups else {
            return Ok(DownloadedPlan {
                cases,
                ..DownloadedPlan::default()
            });
        };
        let n_tiles = g.chunks.last().map_or(0, |c| c.tiles.end);
        let mut offsets = vec![0u32; n_tiles + 1];
        let mut keys = vec![0u32; n_tiles];
        let mut pairs = vec![0u32; self.n_pairs];
        self.parts.read(g.tile_offsets, &mut offsets)?;
        self.parts.read(g.tile_keys, &mut keys)?;
        self.parts.read(g.tile_pairs, &mut pairs)?;
        let chunks = g
            .chunks
            .iter()
            .map(|c| [c.targets.clone(), c.pairs.clone(), c.tiles.clone()])
            .collect();
        Ok(DownloadedPlan {
            cases,
            tile_offsets: offsets,
            tile_keys: keys,
            tile_pairs: pairs,
            chunks,
        })
    }

    /// Tiles of a tiled plan (0 for the other kernels).
    pub fn target_tiles(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.n_tiles)
    }

    /// Target boxes per tile of a tiled plan (0 for the other kernels).
    pub fn targets_per_tile(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.targets_per_tile)
    }

    /// `n_pairs() / lane slots` of a tiled plan: the share of the tiles'
    /// lane slots (keys × lanes) that hold a pair (1 for a uniform tree's
    /// interior; what the dispatch compares); 0 for the other kernels.
    pub fn tiled_lanes_busy(&self) -> f64 {
        self.tiles
            .as_ref()
            .map_or(0.0, |t| lanes_busy(self.n_pairs, t.slots))
    }

    /// The most distinct source boxes of one tile of a staged plan (0 for
    /// the other kernels).
    pub fn max_tile_sources(&self) -> usize {
        match (&self.tiles, self.kernel) {
            (Some(t), List1Kernel::Staged) => t.max_tile_sources,
            _ => 0,
        }
    }

    /// Target boxes (output rows of `q^d` values).
    pub fn n_targets(&self) -> usize {
        self.n_targets
    }

    /// Boxes (source value rows of `q^d` values).
    pub fn n_boxes(&self) -> usize {
        self.n_boxes
    }

    /// (target box, source box) pairs.
    pub fn n_pairs(&self) -> usize {
        self.n_pairs
    }

    /// Pairs whose source level has a nonzero displacement (2D Laplace).
    pub fn displacement_pairs(&self) -> usize {
        self.displacement_pairs
    }

    /// Bytes of the plan's one allocation and its key matrices' index:
    /// pairs, levels, per-level scalings and the kernel's groups or tiles
    /// (a plan built on the device also holds the centres, targets and
    /// case lookup it classified from, and the groups it wrote itself);
    /// not the key matrices' values, which the device expands.
    pub fn upload_bytes(&self) -> usize {
        self.bytes
    }
}

/// The per-level arrays of `hipkern_list1_pairs`: each level's factor,
/// displacement factor and table.
pub(super) fn level_arrays(scalings: &[LevelScaling]) -> (Vec<f64>, Vec<f64>, Vec<u32>) {
    (
        scalings.iter().map(|s| s.scale).collect(),
        scalings.iter().map(|s| s.displacement).collect(),
        scalings.iter().map(|s| s.table as u32).collect(),
    )
}

/// The width of `kernel`'s tiles (the C ABI's `hipkern_list1_tile_targets`)
/// and the sources a tile may stage: staged tiles are cut at their source
/// bound, the others only by width.
fn tile_shape(kernel: List1Kernel, nq: usize) -> Result<(usize, usize)> {
    let raw = kernel.raw_tiled().expect("a tiled kernel");
    let mut width = 0i32;
    // SAFETY: a valid out-pointer; the call reads its arguments only.
    check("hipkern_list1_tile_targets", unsafe {
        sys::hipkern_list1_tile_targets(raw as i32, &mut width)
    })?;
    let width = width as usize;
    let bound = if kernel == List1Kernel::Staged {
        staged_source_bound(nq, width)
    } else {
        usize::MAX
    };
    Ok((width, bound))
}

impl List1Evaluator {
    /// Validates `boxes` as the CPU evaluator does (module docs), chooses
    /// the kernel for this evaluator's contract ([`List1DevicePlan::kernel`])
    /// and uploads what it needs (synchronously).
    ///
    /// Where the kernel is chosen without the pairs (`grouped` under the
    /// exact contract, `per-target` for `q^d >` [`MAX_TILED_MODES`]), the
    /// device classifies and groups the pairs
    /// ([`List1DevicePlan::built_on_device`]); the tiled kernels' plans are
    /// built on the host.
    pub fn plan(&self, boxes: &List1Boxes<'_>) -> Result<List1DevicePlan> {
        self.plan_checked(boxes, None, None)
    }

    /// The plan of `boxes` for `forced` or the dispatch's kernel, with
    /// `values` checked in the CPU's order when given: on the device where
    /// that kernel needs no host tiling, else on the host.
    pub(super) fn plan_checked(
        &self,
        boxes: &List1Boxes<'_>,
        values: Option<&[f64]>,
        forced: Option<(List1Kernel, String)>,
    ) -> Result<List1DevicePlan> {
        let on_device = match &forced {
            Some((k @ (List1Kernel::Grouped | List1Kernel::PerTarget), reason)) => {
                self.check_kernel(*k)?;
                Some((*k, reason.clone()))
            }
            Some(_) => None,
            None => choose_without_pairs(self.contract, self.meta.nq),
        };
        let _scope = self.device.enter()?;
        match on_device {
            Some((kernel, reason)) => self.plan_on_device(boxes, values, kernel, reason),
            None => self.plan_on_host(boxes, values, forced),
        }
    }

    /// The plan of `boxes` built on the host (the CPU's checks, then the
    /// host's classification and grouping or tiling). The device must be
    /// entered.
    pub(super) fn plan_on_host(
        &self,
        boxes: &List1Boxes<'_>,
        values: Option<&[f64]>,
        forced: Option<(List1Kernel, String)>,
    ) -> Result<List1DevicePlan> {
        let hp = self.meta.check(boxes, values)?;
        self.upload_plan(&hp, forced)
    }

    /// Whether this evaluator's device and table can run `kernel`: the
    /// grouped and tiled kernels take `q^d ≤` [`MAX_TILED_MODES`], `tiled`
    /// and `staged` need the tensor cores.
    pub(crate) fn check_kernel(&self, kernel: List1Kernel) -> Result<()> {
        let nq = self.meta.nq;
        if kernel != List1Kernel::PerTarget && nq > MAX_TILED_MODES {
            return bad(format!(
                "the {kernel} kernel takes q^d ≤ {MAX_TILED_MODES}; this table has q^d = {nq}"
            ));
        }
        if matches!(kernel, List1Kernel::Tiled | List1Kernel::Staged)
            && !self.tensor_cores_available
        {
            return bad(format!(
                "the {kernel} kernel needs NVIDIA's FP64 tensor cores (sm_80 and later), which \
                 this device or build lacks"
            ));
        }
        Ok(())
    }

    /// The plan of `hp` for the kernel `forced`, or the one the dispatch
    /// chooses under the evaluator's contract.
    pub(super) fn upload_plan(
        &self,
        hp: &HostPairs<'_>,
        forced: Option<(List1Kernel, String)>,
    ) -> Result<List1DevicePlan> {
        let nq = self.meta.nq;
        let n_cases = self.meta.n_cases;
        let tensor = self.tensor_cores_available;
        // The targets ordered by their key lists: every tiling shares it.
        let key_order = || KeyOrder::new(hp.starts, |j| hp.key(j, n_cases) as u32);
        let source = |j: usize| hp.sources[j];
        let mut tiling: Option<TargetTiling> = None;
        let (kernel, reason) = match forced {
            Some((k, reason)) => {
                self.check_kernel(k)?;
                (k, reason)
            }
            None => {
                // The fast contract compares the lanes busy of its tilings'
                // cuts (one order, the cuts side by side); only the
                // winner's key rows are built.
                let mut cuts: Vec<(List1Kernel, Cut)> = Vec::new();
                let mut order = None;
                let choice = choose(self.contract, nq, tensor, || {
                    let per_key_kernel = if tensor {
                        List1Kernel::Tiled
                    } else {
                        List1Kernel::TiledFma
                    };
                    let kernels = if tensor {
                        vec![per_key_kernel, List1Kernel::Staged]
                    } else {
                        vec![per_key_kernel]
                    };
                    let shapes = kernels
                        .iter()
                        .map(|&k| tile_shape(k, nq))
                        .collect::<Result<Vec<_>>>()?;
                    let ko = order.insert(key_order());
                    let pairs = hp.sources.len();
                    let ko = &*ko;
                    let cut_and_count = |(k, (width, bound)): (List1Kernel, (usize, usize))| {
                        let cut = ko.cut(&source, width, bound);
                        let busy = lanes_busy(pairs, ko.slots(&cut));
                        (k, cut, busy)
                    };
                    let mut busy = TileBusy {
                        per_key: 0.0,
                        staged: None,
                    };
                    for (k, cut, b) in
                        map_on_threads(2, kernels.into_iter().zip(shapes).collect(), cut_and_count)
                    {
                        if k == List1Kernel::Staged {
                            busy.staged = Some(b);
                        } else {
                            busy.per_key = b;
                        }
                        cuts.push((k, cut));
                    }
                    Ok(busy)
                })?;
                if let (Some(ko), Some((_, cut))) = (
                    order.as_ref(),
                    cuts.into_iter().find(|(k, _)| *k == choice.0),
                ) {
                    tiling = Some(ko.rows(cut, &source));
                }
                choice
            }
        };
        // A forced tiled kernel (the fast contract's choice is cut above).
        if kernel.raw_tiled().is_some() && tiling.is_none() {
            let (width, bound) = tile_shape(kernel, nq)?;
            tiling = Some(key_order().tile(source, width, bound));
        }
        let d = &self.device;
        let (scale, disp, table) = level_arrays(&hp.scalings);
        // Counted only where some level has a displacement (2D Laplace).
        let displacement_pairs = if disp.iter().all(|&x| x == 0.0) {
            0
        } else {
            hp.sources
                .iter()
                .filter(|&&s| disp[usize::from(hp.box_levels[s as usize])] != 0.0)
                .count()
        };
        // Everything host side first, then one packing and one upload.
        let grouping = if kernel == List1Kernel::Grouped {
            Some(group_pairs(
                hp.starts,
                self.n_tables * n_cases,
                |j| hp.key(j, n_cases),
                (self.pair_scratch_bytes / (8 * nq)).max(1),
                tile_capacity(nq),
            ))
        } else {
            None
        };
        let mut pack = Packing::default();
        let starts = pack.add(hp.starts);
        let sources = pack.add(hp.sources);
        let cases = pack.add(&hp.cases);
        let box_levels = pack.add(&hp.box_levels);
        let level_scale = pack.add(&scale);
        let level_displacement = pack.add(&disp);
        let level_table = pack.add(&table);
        let groups = grouping.as_ref().map(|g| DeviceGrouping {
            tile_offsets: pack.add(&g.tile_offsets),
            tile_keys: pack.add(&g.tile_keys),
            tile_pairs: pack.add(&g.tile_pairs),
            chunks: g.chunks.clone(),
            max_chunk_pairs: g.max_chunk_pairs,
            scratch: None,
        });
        let mut tiles = tiling.as_ref().map(|t| DeviceTiling {
            targets_per_tile: t.targets_per_tile,
            n_tiles: t.n_tiles(),
            slots: t.slots(),
            tile_targets: pack.add(&t.tile_targets),
            tile_key_offsets: pack.add(&t.tile_key_offsets),
            keys: pack.add(&t.keys),
            key_pairs: pack.add(&t.key_pairs),
            max_tile_sources: t.max_tile_sources,
            tile_source_offsets: pack.add(&t.tile_source_offsets),
            tile_sources: pack.add(&t.tile_sources),
            key_source_slots: pack.add(&t.key_source_slots),
            key_matrices: None,
        });
        let parts = pack.upload(d, &self.plan_staging)?;
        if let (Some(tl), Some(t)) = (tiles.as_mut(), &tiling) {
            // The tiled kernels read dense case matrices: the dense
            // table's own, or each key's expanded once from the layout.
            // A tiling without keys (no pairs) still names one (key 0,
            // never read): the C ABI wants matrices with every compact
            // table.
            tl.key_matrices = match (self.layout, t.keys.is_empty()) {
                (List1Layout::Dense, _) => None,
                (_, false) => Some(self.expand_keys(&t.keys)?),
                (_, true) => Some(self.expand_keys(&[0])?),
            };
        }
        // The arrays (alignment gaps included) and the key matrices' index.
        let bytes = parts.bytes()
            + tiles
                .as_ref()
                .and_then(|t| t.key_matrices.as_ref())
                .map_or(0, |m| 4 * (m.count + m.index.len()));
        Ok(List1DevicePlan {
            evaluator: self.id,
            device: d.ordinal(),
            n_targets: hp.starts.len() - 1,
            n_boxes: hp.box_levels.len(),
            n_pairs: hp.sources.len(),
            displacement_pairs,
            n_levels: scale.len(),
            nq,
            kernel,
            contract: self.contract,
            reason,
            parts,
            starts,
            sources,
            cases,
            box_levels,
            level_scale,
            level_displacement,
            level_table,
            bytes,
            groups,
            tiles,
            built_on_device: false,
        })
    }
}
