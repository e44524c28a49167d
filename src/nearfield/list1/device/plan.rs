//! What is checked and uploaded once per tree: a tree's boxes and lists
//! validated against the evaluator's tables, and the device plan cut from
//! them (pairs, level scalings, the case-grouped tiles and chunks, the
//! target tiles and, for the source-staged kernel, their sources and key
//! matrices).
use super::payload::{KeyMatrices, TableMeta};
use super::{
    bad, prefer_source_staged, tile_source_bound, upload, List1Evaluator, List1Layout,
    List1SourceStaging, MAX_TILED_MODES,
};
use crate::nearfield::list1::{check_list1_inputs, LevelScaling, List1Boxes};
use crate::nearfield::list1_grouping::{group_pairs, tile_capacity, GroupChunk, PairGrouping};
use crate::nearfield::list1_tiling::{lanes_busy, tile_targets};
use crate::runtime::{DeviceBuffer, Result};
use hipkern_sys as sys;

/// The validated pairs of an evaluation, host side.
#[derive(Clone, Debug)]
pub(super) struct HostPairs {
    starts: Vec<u32>,
    sources: Vec<u32>,
    cases: Vec<u8>,
    box_levels: Vec<u8>,
    scalings: Vec<LevelScaling>,
}

// The tables' side of these checks, and `TableMeta` itself, are the
// payload's: payload.rs.
impl TableMeta {
    /// The CPU evaluator's checks, in its order: the dimension, the boxes
    /// and pairs, the source values (when given), the level scalings.
    pub(super) fn check(
        &self,
        boxes: &List1Boxes<'_>,
        values: Option<&[f64]>,
    ) -> Result<HostPairs> {
        let (pairs, scalings) = check_list1_inputs(boxes, &self.shapes, self.per_level, values)?;
        let n = boxes.n_boxes();
        let nq = self.nq;
        let max_level = scalings.len().saturating_sub(1);
        if scalings.len() > sys::HIPKERN_LIST1_MAX_LEVELS as usize {
            return bad(format!(
                "levels 0..={max_level}: the device takes at most {} levels",
                sys::HIPKERN_LIST1_MAX_LEVELS
            ));
        }
        if n.checked_mul(nq).is_none() || boxes.target_boxes.len().checked_mul(nq).is_none() {
            return bad(format!("{n} boxes × {nq} values overflow"));
        }
        Ok(HostPairs {
            starts: boxes.source_starts.to_vec(),
            sources: boxes.source_boxes.to_vec(),
            cases: pairs.cases.iter().map(|&c| c as u8).collect(),
            box_levels: boxes.levels.iter().map(|&l| l as u8).collect(),
            scalings,
        })
    }
}

/// The validated boxes and lists of one tree for one evaluator, on its
/// device ([`List1Evaluator::plan`]), with the case-grouped schedule's
/// tiles and, after its first grouped evaluation, its scratch.
///
/// The scratch is the plan's: evaluations of one plan in the grouped
/// schedule on different streams must be ordered by the caller (an event
/// between them), or one overwrites the pair products the other is still
/// summing. Use one plan per stream to run them concurrently.
pub struct List1DevicePlan {
    pub(super) evaluator: u64,
    pub(super) device: usize,
    pub(super) n_targets: usize,
    pub(super) n_boxes: usize,
    pub(super) n_pairs: usize,
    displacement_pairs: usize,
    n_levels: usize,
    pub(super) nq: usize,
    starts: DeviceBuffer<u32>,
    sources: DeviceBuffer<u32>,
    cases: DeviceBuffer<u8>,
    box_levels: DeviceBuffer<u8>,
    level_scale: DeviceBuffer<f64>,
    level_displacement: DeviceBuffer<f64>,
    level_table: DeviceBuffer<u32>,
    bytes: usize,
    pub(super) groups: DeviceGrouping,
    tiles: Option<DeviceTiling>,
}

/// The target-tiled schedule's part of a plan (`q^d ≤` [`MAX_TILED_MODES`]).
struct DeviceTiling {
    targets_per_tile: usize,
    n_tiles: usize,
    slots: usize,
    tile_targets: DeviceBuffer<u32>,
    tile_key_offsets: DeviceBuffer<u32>,
    keys: DeviceBuffer<u32>,
    key_pairs: DeviceBuffer<u32>,
    /// Cut at [`tile_source_bound`] for the source-staged kernel (else only
    /// at the width, as the other tiled kernels want).
    source_staged: bool,
    max_tile_sources: usize,
    tile_source_offsets: DeviceBuffer<u32>,
    tile_sources: DeviceBuffer<u32>,
    key_source_slots: DeviceBuffer<u16>,
    /// The case matrices of the tiles' keys, for a source-staged plan of
    /// an ORBIT or fallback table ([`List1Evaluator::set_tiled_key_matrices`]).
    key_matrices: Option<KeyMatrices>,
}

/// The case-grouped schedule's part of a plan: the tiles on the device,
/// the chunks on the host, the scratch (allocated at the first grouped
/// evaluation).
pub(super) struct DeviceGrouping {
    pub(super) chunks: Vec<GroupChunk>,
    pub(super) tile_offsets: DeviceBuffer<u32>,
    pub(super) tile_keys: DeviceBuffer<u32>,
    pub(super) tile_pairs: DeviceBuffer<u32>,
    pub(super) max_chunk_pairs: usize,
    pub(super) scratch: Option<DeviceBuffer<f64>>,
}

impl std::fmt::Debug for List1DevicePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("List1DevicePlan")
            .field("device", &self.device)
            .field("n_targets", &self.n_targets)
            .field("n_boxes", &self.n_boxes)
            .field("n_pairs", &self.n_pairs)
            .field("bytes", &self.bytes)
            .field("chunks", &self.groups.chunks.len())
            .finish()
    }
}

impl List1DevicePlan {
    /// Chunks of the case-grouped schedule (each one pair of launches; the
    /// evaluator's scratch bound when the plan was made sets how many).
    pub fn grouped_chunks(&self) -> usize {
        self.groups.chunks.len()
    }

    /// Bytes of the case-grouped schedule's scratch: the pair products of
    /// the largest chunk (allocated at the first grouped evaluation).
    pub fn pair_scratch_bytes(&self) -> usize {
        self.groups.max_chunk_pairs * self.nq * 8
    }

    /// The pairs as the C ABI's `hipkern_list1_evaluate*` entry points take
    /// them: device pointers into this plan's buffers, valid while it lives.
    pub fn raw_pairs(&self) -> sys::hipkern_list1_pairs {
        sys::hipkern_list1_pairs {
            n_targets: self.n_targets as i64,
            n_boxes: self.n_boxes as i64,
            n_pairs: self.n_pairs as i64,
            n_levels: self.n_levels as i32,
            source_starts: self.starts.as_ptr(),
            source_boxes: self.sources.as_ptr(),
            pair_cases: self.cases.as_ptr(),
            box_levels: self.box_levels.as_ptr(),
            level_scale: self.level_scale.as_ptr(),
            level_displacement: self.level_displacement.as_ptr(),
            level_table: self.level_table.as_ptr(),
        }
    }

    /// The tiles of the target-tiled schedule as `hipkern_list1_evaluate_tiled`
    /// takes them, with `arithmetic` (a `HIPKERN_LIST1_TILED_*`): device
    /// pointers into this plan's buffers, valid while it lives; `None` where
    /// the schedule does not apply (`q^d >` [`MAX_TILED_MODES`]).
    pub fn raw_tiles(&self, arithmetic: u32) -> Option<sys::hipkern_list1_tiles> {
        let tl = self.tiles.as_ref()?;
        Some(sys::hipkern_list1_tiles {
            targets_per_tile: tl.targets_per_tile as i32,
            arithmetic: arithmetic as i32,
            n_tiles: tl.n_tiles as i64,
            tile_targets: tl.tile_targets.as_ptr(),
            tile_key_offsets: tl.tile_key_offsets.as_ptr(),
            keys: tl.keys.as_ptr(),
            key_pairs: tl.key_pairs.as_ptr(),
            max_tile_sources: tl.max_tile_sources as i32,
            tile_source_offsets: tl.tile_source_offsets.as_ptr(),
            tile_sources: tl.tile_sources.as_ptr(),
            key_source_slots: tl.key_source_slots.as_ptr(),
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

    /// Case matrices the plan holds for the source-staged kernel (its
    /// tiles' distinct keys; 0 where it holds none: see
    /// [`List1Evaluator::set_tiled_key_matrices`]).
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

    /// Tiles of the target-tiled schedule (0 where it does not apply).
    pub fn target_tiles(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.n_tiles)
    }

    /// The target-tiled schedule's lane slots (keys × lanes summed over the
    /// tiles): its work in units of one pair ([`Self::tiled_lanes_busy`]).
    pub fn tile_slots(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.slots)
    }

    /// `n_pairs() / tile_slots()`: the share of the tiled schedule's lane
    /// slots that hold a pair (1 for a uniform tree's interior; what
    /// [`List1SourceStaging::Auto`] compares).
    pub fn tiled_lanes_busy(&self) -> f64 {
        lanes_busy(self.n_pairs, self.tile_slots())
    }

    /// The most distinct source boxes of one tile of the tiled schedule
    /// (the tensor-core kernel's shared source rows; 0 where it does not
    /// apply).
    pub fn max_tile_sources(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.max_tile_sources)
    }

    /// Whether the tiles were cut for the source-staged kernel (by the
    /// evaluator's [`List1Evaluator::set_tiled_source_staging`] when the
    /// plan was made; false where the tiled schedule does not apply). The
    /// tiled schedule runs a plan on the kernel it was cut for, where the
    /// tensor cores are taken.
    pub fn tiled_for_source_staging(&self) -> bool {
        self.tiles.as_ref().is_some_and(|t| t.source_staged)
    }

    /// Target boxes per tile of the tiled schedule (0 where it does not
    /// apply).
    pub fn targets_per_tile(&self) -> usize {
        self.tiles.as_ref().map_or(0, |t| t.targets_per_tile)
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

    /// Bytes the plan uploaded (offsets, source boxes, cases, levels,
    /// per-level scalings).
    pub fn upload_bytes(&self) -> usize {
        self.bytes
    }
}

impl List1Evaluator {
    /// Validates `boxes` as the CPU evaluator does (module docs) and
    /// uploads them for this evaluator (synchronously).
    pub fn plan(&self, boxes: &List1Boxes<'_>) -> Result<List1DevicePlan> {
        let hp = self.meta.check(boxes, None)?;
        let _scope = self.device.enter()?;
        self.upload_plan(&hp)
    }

    pub(super) fn upload_plan(&self, hp: &HostPairs) -> Result<List1DevicePlan> {
        let d = &self.device;
        let scale: Vec<f64> = hp.scalings.iter().map(|s| s.scale).collect();
        let disp: Vec<f64> = hp.scalings.iter().map(|s| s.displacement).collect();
        let table: Vec<u32> = hp.scalings.iter().map(|s| s.table as u32).collect();
        let displacement_pairs = hp
            .sources
            .iter()
            .filter(|&&s| disp[usize::from(hp.box_levels[s as usize])] != 0.0)
            .count();
        let nq = self.meta.nq;
        let n_cases = self.meta.n_cases;
        let key = |j: usize| {
            let lvl = usize::from(hp.box_levels[hp.sources[j] as usize]);
            hp.scalings[lvl].table * n_cases + usize::from(hp.cases[j])
        };
        // Only the source-staged kernel needs its tiles' sources bounded;
        // the others keep full tiles.
        let cut = |staged: bool| {
            let (width, bound) = if staged {
                let w = self.staged_targets_per_tile();
                (w, tile_source_bound(nq, w))
            } else {
                (self.targets_per_tile(), usize::MAX)
            };
            let t = tile_targets(
                &hp.starts,
                |j| key(j) as u32,
                |j| hp.sources[j],
                width,
                bound,
            );
            (t, staged)
        };
        let tensor = self.tiled_tensor_cores && self.tensor_cores_available;
        let tiling = (nq <= MAX_TILED_MODES).then(|| match self.source_staging {
            List1SourceStaging::Off => cut(false),
            List1SourceStaging::On => cut(true),
            List1SourceStaging::Auto if !tensor => cut(false),
            List1SourceStaging::Auto => {
                let per_key = cut(false);
                let staged = cut(true);
                let pairs = hp.sources.len();
                if prefer_source_staged(
                    lanes_busy(pairs, per_key.0.slots()),
                    lanes_busy(pairs, staged.0.slots()),
                ) {
                    staged
                } else {
                    per_key
                }
            }
        });
        let grouping: PairGrouping = group_pairs(
            &hp.starts,
            self.n_tables * n_cases,
            key,
            (self.pair_scratch_bytes / (8 * nq)).max(1),
            tile_capacity(nq),
        );
        // The source-staged kernel's key matrices (ORBIT and fallback).
        let key_matrices = match &tiling {
            Some((t, true))
                if tensor
                    && self.tiled_key_matrices
                    && self.layout != List1Layout::Dense
                    && !t.keys.is_empty() =>
            {
                Some(self.expand_keys(&t.keys)?)
            }
            _ => None,
        };
        let bytes = 4 * (hp.starts.len() + hp.sources.len())
            + hp.cases.len()
            + hp.box_levels.len()
            + 20 * scale.len()
            + 4 * (grouping.tile_offsets.len()
                + grouping.tile_keys.len()
                + grouping.tile_pairs.len())
            + tiling.as_ref().map_or(0, |(t, _)| {
                4 * (t.tile_targets.len()
                    + t.tile_key_offsets.len()
                    + t.keys.len()
                    + t.key_pairs.len()
                    + t.tile_source_offsets.len()
                    + t.tile_sources.len())
                    + 2 * t.key_source_slots.len()
            })
            + key_matrices
                .as_ref()
                .map_or(0, |m| 4 * (m.count + m.index.len()));
        Ok(List1DevicePlan {
            evaluator: self.id,
            device: d.ordinal(),
            n_targets: hp.starts.len() - 1,
            n_boxes: hp.box_levels.len(),
            n_pairs: hp.sources.len(),
            displacement_pairs,
            n_levels: scale.len(),
            starts: upload(d, &hp.starts)?,
            sources: upload(d, &hp.sources)?,
            cases: upload(d, &hp.cases)?,
            box_levels: upload(d, &hp.box_levels)?,
            level_scale: upload(d, &scale)?,
            level_displacement: upload(d, &disp)?,
            level_table: upload(d, &table)?,
            bytes,
            nq,
            groups: DeviceGrouping {
                tile_offsets: upload(d, &grouping.tile_offsets)?,
                tile_keys: upload(d, &grouping.tile_keys)?,
                tile_pairs: upload(d, &grouping.tile_pairs)?,
                chunks: grouping.chunks,
                max_chunk_pairs: grouping.max_chunk_pairs,
                scratch: None,
            },
            tiles: match tiling {
                None => None,
                Some((t, source_staged)) => Some(DeviceTiling {
                    targets_per_tile: t.targets_per_tile,
                    n_tiles: t.n_tiles(),
                    slots: t.slots(),
                    tile_targets: upload(d, &t.tile_targets)?,
                    tile_key_offsets: upload(d, &t.tile_key_offsets)?,
                    keys: upload(d, &t.keys)?,
                    key_pairs: upload(d, &t.key_pairs)?,
                    source_staged,
                    max_tile_sources: t.max_tile_sources,
                    tile_source_offsets: upload(d, &t.tile_source_offsets)?,
                    tile_sources: upload(d, &t.tile_sources)?,
                    key_source_slots: upload(d, &t.key_source_slots)?,
                    key_matrices,
                }),
            },
        })
    }
}
