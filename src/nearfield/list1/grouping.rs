//! The host side of List 1's `grouped` kernel
//! (`hipkern_list1_evaluate_grouped`): the target boxes cut into chunks
//! whose pair products fit a scratch bound, and each chunk's pairs grouped
//! by key `table · n_cases + case` into tiles.
//!
//! A tile's pairs all read one case matrix `T(case, ·, ·)` of one table, so
//! the device builds that matrix once per tile (in shared memory, from any
//! layout) and applies it to every pair of the tile; the per-target sums
//! then add the pair products in list order. The grouping changes which
//! block computes a product, never a value: every product is the same
//! ordered sum over the source modes, and every target's sum the same
//! ordered sum over its pairs.

use crate::threads::{map_on_threads, threads_for};

/// Threads of one block of the products kernel and sums per thread per
/// round (the kernel's `kGroupThreads`, `kGroupPairsPerThread`); a round
/// takes `(256 / nq) · 8` pairs.
const KERNEL_THREADS: usize = 256;
const KERNEL_PAIRS_PER_THREAD: usize = 8;
/// Rounds per tile: the case matrix is built once per tile (its cost,
/// `nq²` reconstructions, against `pairs · nq²` multiply-adds), while a
/// tree's cases still give several tiles per SM. Measured on the H200
/// (benches/RESULTS.md): 4 rounds (288 pairs at 3D q = 3, 128 at q = 4)
/// against 8·nq and 16·nq pairs per tile: as fast for ORBIT, up to 1.3×
/// faster for dense at q = 4 (fewer, longer tiles leave SMs idle at the end).
const ROUNDS_PER_TILE: usize = 4;

/// One chunk: target boxes `targets`, their pairs `pairs`, tiles `tiles`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GroupChunk {
    pub targets: std::ops::Range<usize>,
    pub pairs: std::ops::Range<usize>,
    pub tiles: std::ops::Range<usize>,
}

/// Every chunk's tiles, concatenated: tile `k` holds the pair ids
/// `tile_pairs[tile_offsets[k]..tile_offsets[k + 1]]` (ascending), all of
/// key `tile_keys[k]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct PairGrouping {
    pub chunks: Vec<GroupChunk>,
    pub tile_offsets: Vec<u32>,
    pub tile_keys: Vec<u32>,
    pub tile_pairs: Vec<u32>,
    /// The most pairs of any chunk: the scratch holds that many × `nq`.
    pub max_chunk_pairs: usize,
}

/// Pairs per tile for `nq` values per box.
pub(crate) fn tile_capacity(nq: usize) -> usize {
    (KERNEL_THREADS / nq.max(1)).max(1) * KERNEL_PAIRS_PER_THREAD * ROUNDS_PER_TILE
}

/// Pairs a thread of the grouping takes at least: below this the threads'
/// start costs more than they save (a tree of 32,768 boxes has 830,584
/// pairs: 16 threads of 51,912).
const PAIRS_PER_THREAD: usize = 32_768;

/// Groups the pairs of CSR `starts` (`n_targets + 1` offsets), whose pair
/// `j` has key `key(j) < n_keys`, into chunks of at most `max_chunk_pairs`
/// pairs (a target with more pairs than that is a chunk alone) and tiles of
/// at most `tile_max` pairs. Each chunk's pairs are counting-sorted by key
/// on every core: a thread counts the keys of a run of pairs, then writes
/// its run's pairs of each key into that key's share for the run (the
/// order of one thread, ascending `j`, whatever the thread count).
pub(crate) fn group_pairs(
    starts: &[u32],
    n_keys: usize,
    key: impl Fn(usize) -> usize + Sync,
    max_chunk_pairs: usize,
    tile_max: usize,
) -> PairGrouping {
    let tile_max = tile_max.max(1);
    let mut g = PairGrouping {
        tile_offsets: vec![0],
        ..PairGrouping::default()
    };
    g.tile_pairs
        .reserve(starts.last().map_or(0, |&n| n as usize));
    for (targets, pairs) in chunk_targets(starts, max_chunk_pairs) {
        let base = g.tile_pairs.len();
        g.tile_pairs.resize(base + pairs.len(), 0);
        let count = sort_by_key(pairs.clone(), n_keys, &key, &mut g.tile_pairs[base..]);
        let tile0 = g.tile_keys.len();
        cut_tiles(
            &count,
            tile_max,
            base,
            &mut g.tile_keys,
            &mut g.tile_offsets,
        );
        g.max_chunk_pairs = g.max_chunk_pairs.max(pairs.len());
        g.chunks.push(GroupChunk {
            targets,
            pairs,
            tiles: tile0..g.tile_keys.len(),
        });
    }
    g
}

/// The chunks of CSR `starts`: consecutive target ranges whose pairs are
/// at most `max_chunk_pairs` (a target with more is a chunk alone), with
/// their pair ranges; none for no targets.
pub(crate) fn chunk_targets(
    starts: &[u32],
    max_chunk_pairs: usize,
) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let n_targets = starts.len().saturating_sub(1);
    let mut chunks = Vec::new();
    let mut i0 = 0;
    while i0 < n_targets {
        let j0 = starts[i0] as usize;
        let mut i1 = i0 + 1;
        while i1 < n_targets && starts[i1 + 1] as usize - j0 <= max_chunk_pairs {
            i1 += 1;
        }
        chunks.push((i0..i1, j0..starts[i1] as usize));
        i0 = i1;
    }
    chunks
}

/// The tiles of one chunk whose pairs, sorted by key, start at `base` in
/// the tile pairs with `count[key]` of each key: runs of at most
/// `tile_max` (`tile_max ≥ 1`) pairs of one key, appended as each tile's
/// key and end offset.
pub(crate) fn cut_tiles(
    count: &[usize],
    tile_max: usize,
    base: usize,
    tile_keys: &mut Vec<u32>,
    tile_offsets: &mut Vec<u32>,
) {
    let mut at = base;
    for (k, &c) in count.iter().enumerate() {
        let mut left = c;
        while left > 0 {
            let n = left.min(tile_max);
            at += n;
            left -= n;
            tile_keys.push(k as u32);
            tile_offsets.push(at as u32);
        }
    }
}

/// The pair ids `pairs` into `out` (as long), stably sorted by `key`; the
/// count of each key.
fn sort_by_key(
    pairs: std::ops::Range<usize>,
    n_keys: usize,
    key: &(impl Fn(usize) -> usize + Sync),
    out: &mut [u32],
) -> Vec<usize> {
    let n = pairs.len();
    let threads = threads_for(n, PAIRS_PER_THREAD);
    let per = n.div_ceil(threads).max(1);
    let runs: Vec<std::ops::Range<usize>> = (0..threads)
        .map(|t| pairs.start + (t * per).min(n)..pairs.start + ((t + 1) * per).min(n))
        .collect();
    // Each run's keys and their counts.
    let counted = map_on_threads(threads, runs.clone(), |run| {
        let keys: Vec<u32> = run.clone().map(|j| key(j) as u32).collect();
        let mut count = vec![0usize; n_keys];
        keys.iter().for_each(|&k| count[k as usize] += 1);
        (keys, count)
    });
    // Key-major, run-minor: each (key, run) share is one slice of `out`.
    let mut shares: Vec<Vec<&mut [u32]>> =
        (0..threads).map(|_| Vec::with_capacity(n_keys)).collect();
    let mut total = vec![0usize; n_keys];
    let mut rest = out;
    for (k, t) in total.iter_mut().enumerate() {
        for (run, (_, count)) in counted.iter().enumerate() {
            let (share, tail) = rest.split_at_mut(count[k]);
            shares[run].push(share);
            rest = tail;
            *t += count[k];
        }
    }
    let work: Vec<_> = runs.into_iter().zip(counted).zip(shares).collect();
    map_on_threads(threads, work, |((run, (keys, _)), mut shares)| {
        let mut next = vec![0usize; n_keys];
        for (j, &k) in run.zip(&keys) {
            let k = k as usize;
            shares[k][next[k]] = j as u32;
            next[k] += 1;
        }
    });
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// Every pair of every chunk in exactly one tile of its own key,
    /// ascending within a tile, tiles within the bound, chunks within
    /// theirs (unless one target alone exceeds it), chunks covering the
    /// targets in order.
    fn check(starts: &[u32], keys: &[usize], n_keys: usize, max_chunk: usize, tile_max: usize) {
        let g = group_pairs(starts, n_keys, |j| keys[j], max_chunk, tile_max);
        let n_targets = starts.len() - 1;
        let mut next_target = 0;
        for ch in &g.chunks {
            assert_eq!(ch.targets.start, next_target);
            assert!(ch.targets.end > ch.targets.start);
            next_target = ch.targets.end;
            assert_eq!(ch.pairs.start, starts[ch.targets.start] as usize);
            assert_eq!(ch.pairs.end, starts[ch.targets.end] as usize);
            assert!(ch.pairs.len() <= max_chunk || ch.targets.len() == 1);
            assert!(ch.pairs.len() <= g.max_chunk_pairs);
            let mut seen = vec![false; ch.pairs.len()];
            for k in ch.tiles.clone() {
                let (a, b) = (g.tile_offsets[k] as usize, g.tile_offsets[k + 1] as usize);
                assert!(b > a && b - a <= tile_max, "tile {k}: {a}..{b}");
                let ids = &g.tile_pairs[a..b];
                assert!(ids.windows(2).all(|w| w[0] < w[1]));
                for &j in ids {
                    let j = j as usize;
                    assert!(ch.pairs.contains(&j));
                    assert_eq!(keys[j], g.tile_keys[k] as usize);
                    assert!(!seen[j - ch.pairs.start], "pair {j} twice");
                    seen[j - ch.pairs.start] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "a pair of the chunk in no tile");
        }
        assert_eq!(next_target, n_targets);
        assert_eq!(*g.tile_offsets.last().unwrap() as usize, g.tile_pairs.len());
        assert_eq!(g.tile_pairs.len(), *starts.last().unwrap() as usize);
    }

    #[test]
    fn every_pair_once_in_a_tile_of_its_key() {
        let mut rng = SplitMix64::new(0x6c69_7374_3167);
        for round in 0..200 {
            let n_targets = rng.below(60);
            let mut starts = vec![0u32];
            for _ in 0..n_targets {
                let n = rng.below(if round % 7 == 0 { 90 } else { 30 }) as u32;
                starts.push(starts.last().unwrap() + n);
            }
            let n_keys = 1 + rng.below(40);
            let n_pairs = *starts.last().unwrap() as usize;
            let keys: Vec<usize> = (0..n_pairs).map(|_| rng.below(n_keys)).collect();
            let max_chunk = 1 + rng.below(120);
            let tile_max = 1 + rng.below(20);
            check(&starts, &keys, n_keys, max_chunk, tile_max);
        }
    }

    #[test]
    fn a_chunk_sorted_on_several_threads_is_the_serial_order() {
        // Enough pairs for every core's run (PAIRS_PER_THREAD each).
        let mut rng = SplitMix64::new(0x6772_6f75_7073);
        let mut starts = vec![0u32];
        while (*starts.last().unwrap() as usize) < 12 * PAIRS_PER_THREAD {
            let n = rng.below(40) as u32;
            starts.push(starts.last().unwrap() + n);
        }
        let n_pairs = *starts.last().unwrap() as usize;
        let keys: Vec<usize> = (0..n_pairs).map(|_| rng.below(139)).collect();
        check(&starts, &keys, 139, n_pairs, 288);
        check(&starts, &keys, 139, n_pairs / 3, 288);
    }

    #[test]
    fn empty_lists_and_one_chunk() {
        check(&[0], &[], 3, 10, 4);
        check(&[0, 0, 0], &[], 3, 10, 4);
        let starts = [0u32, 3, 3, 7];
        let keys = [2, 0, 2, 1, 1, 1, 2];
        let g = group_pairs(&starts, 3, |j| keys[j], 100, 2);
        assert_eq!(g.chunks.len(), 1);
        assert_eq!(g.tile_keys, vec![0, 1, 1, 2, 2]);
        assert_eq!(g.tile_pairs, vec![1, 3, 4, 5, 0, 2, 6]);
        assert_eq!(g.tile_offsets, vec![0, 1, 3, 4, 6, 7]);
        assert_eq!(g.max_chunk_pairs, 7);
    }

    #[test]
    fn tile_capacity_is_whole_rounds() {
        assert_eq!(tile_capacity(27), 9 * 8 * 4);
        assert_eq!(tile_capacity(64), 4 * 8 * 4);
        assert_eq!(tile_capacity(16), 16 * 8 * 4);
        assert_eq!(tile_capacity(1), 256 * 8 * 4);
    }
}
