//! Force/virial assembly benchmark (device events, warm-up, median of 30).
//!
//! Sizes of the force issue: (a) E=50,000 N=700; (b) E=650,000 N≈8,000;
//! (c) 32,768 centres × 128, N_ext=49,152; (d) 262,144 × 128, N_ext=393,216.
//! Edges grouped by dst (the centre atom), src random; and d-lattice, d's
//! centres on a lattice with their nearest neighbours as src (spatially
//! sorted atoms, as an MD code's); fp32 inputs.
//! Times: the plan build on the device (`DevicePlan::rebuild` into
//! preallocated plan and scratch; the event pair also covers the build's
//! status read-back and stream sync) and on the host (CPU, std time);
//! hipkern's two segment-reduction launches with float64 output and with
//! output rounded to the input precision; the device atomic reference
//! (outer product + atomics); measured device copy bandwidth and the
//! sector-counted floor. If HIPKERN_TORCH_PEER_JSON names the output of
//! scripts/force_torch_peer.py (run in the same session on the same GPU),
//! the torch index_add_ and argsort plan times are printed beside ours with
//! ratios.
use hipkern::force::{
    assemble_atomic_device_into, assemble_device_into, assemble_device_rounded_into, CsrPlan,
    DeviceEdges, DevicePlan, VirialSplit,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Stream};
use std::time::Instant;

#[path = "common/peer_json.rs"]
mod peer_json;

const REPS: usize = 30;
const WARMUP: usize = 5;

fn median(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn time_ms(stream: &Stream, mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..WARMUP {
        f();
    }
    stream.synchronize().unwrap();
    let mut t = Vec::new();
    for _ in 0..REPS {
        let a = stream.record_event().unwrap();
        f();
        let b = stream.record_event().unwrap();
        b.synchronize().unwrap();
        t.push(a.elapsed_ms(&b).unwrap() as f64);
    }
    median(t)
}

fn main() {
    let device = match Device::new(0) {
        Ok(d) => d,
        Err(e) => {
            println!("force_assembly bench: no device ({e}); nothing to time");
            return;
        }
    };
    let stream = device.new_stream().unwrap();
    println!(
        "device: {} ({})",
        device.properties().name,
        device.properties().arch_name
    );

    // Copy bandwidth: 1 GiB device-to-device, bytes read + written.
    let n = 1usize << 28;
    let src = device.alloc_zeroed::<f32>(n).unwrap();
    let mut dst = device.alloc::<f32>(n).unwrap();
    let (copy_ms, _, _) = time_ms(&stream, || {
        stream
            .copy_dtod_async(&src.as_slice(), &mut dst.as_slice_mut())
            .unwrap()
    });
    let bw = 2.0 * (n * 4) as f64 / (copy_ms * 1e-3);
    println!(
        "copy bandwidth: {:.2} TB/s (1 GiB dtod, read+write, median {copy_ms:.3} ms)",
        bw / 1e12
    );
    drop((src, dst));
    // Two back-to-back (nearly) empty launches: the assembly of one row, no edges.
    let tiny =
        DevicePlan::upload(&device, &CsrPlan::build::<i32>(&[], &[], 1, None).unwrap()).unwrap();
    let (g0, r0) = (
        device.alloc::<f32>(0).unwrap(),
        device.alloc::<f32>(0).unwrap(),
    );
    let (mut f0, mut w0) = (
        device.alloc::<f64>(3).unwrap(),
        device.alloc::<f64>(9).unwrap(),
    );
    let (launch_ms, _, _) = time_ms(&stream, || {
        assemble_device_into(
            &stream,
            &tiny,
            &g0,
            &r0,
            VirialSplit::Half,
            &mut f0,
            &mut w0,
        )
        .unwrap()
    });
    println!("two empty launches: {launch_ms:.4} ms");
    let torch: Option<peer_json::Peer> = std::env::var("HIPKERN_TORCH_PEER_JSON")
        .ok()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|s| peer_json::parse(&s));

    // d-lattice: d's centres and edges per centre on a lattice, neighbours
    // spatially near in index as in an MD code that sorts its atoms
    // (lattice_edges); the others' src is random.
    let sizes: [(&str, usize, usize, usize); 5] = [
        ("a", 700, 700, 50_000 / 700),
        ("b", 8_000, 8_000, 650_000 / 8_000),
        ("c", 49_152, 32_768, 128),
        ("d", 393_216, 262_144, 128),
        ("d-lattice", LATTICE_EXT.pow(3), LATTICE_SIDE.pow(3), 128),
    ];
    println!();
    println!(
        "{:<9} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>9} {:>10} {:>9}",
        "size",
        "E",
        "N_ext",
        "plan(host)",
        "plan(dev)",
        "assemble",
        "asm(f32)",
        "atomic",
        "floor",
        "asm/floor",
        "atom/asm",
        "torch",
        "torch/asm",
        "torchplan",
        "tp/plan"
    );
    let mut rng = SplitMix64::new(0x5EED_F0C3);
    let mut json = Vec::new();
    // HIPKERN_BENCH_SIZES=d (or "c,d"): only those sizes (for a profiler).
    let only = std::env::var("HIPKERN_BENCH_SIZES").ok();
    for (name, n_ext, centres, per) in sizes {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x == name))
        {
            continue;
        }
        let e = centres * per;
        let (srcv, dstv) = if name == "d-lattice" {
            let (srcv, dstv) = lattice_edges(per);
            // The Python bench prints the same sum of its lattice.
            let sum: i64 = srcv
                .iter()
                .enumerate()
                .map(|(i, &s)| i64::from(s) * (i as i64 % 1009 + 1))
                .sum();
            eprintln!("  d-lattice: src checksum {sum}");
            (srcv, dstv)
        } else {
            let mut srcv = Vec::with_capacity(e);
            let mut dstv = Vec::with_capacity(e);
            for k in 0..centres {
                for _ in 0..per {
                    dstv.push(k as i32);
                    srcv.push(rng.below(n_ext) as i32);
                }
            }
            (srcv, dstv)
        };
        let g: Vec<f32> = (0..3 * e).map(|_| rng.uniform_pm1() as f32).collect();
        let r: Vec<f32> = (0..3 * e).map(|_| 4.0 * rng.uniform_pm1() as f32).collect();
        let t0 = Instant::now();
        let plan = CsrPlan::build(&srcv, &dstv, n_ext, None).unwrap();
        let plan_ms = t0.elapsed().as_secs_f64() * 1e3;
        let (src_d, dst_d) = (
            device.htod_copy(&srcv).unwrap(),
            device.htod_copy(&dstv).unwrap(),
        );
        let mut dplan = DevicePlan::build(&stream, &src_d, &dst_d, n_ext, None).unwrap();
        let mut scratch = device
            .alloc::<u8>(DevicePlan::scratch_bytes(e, n_ext).unwrap())
            .unwrap();
        let (dplan_ms, _, _) = time_ms(&stream, || {
            dplan
                .rebuild(&stream, &src_d, &dst_d, n_ext, None, &mut scratch)
                .unwrap()
        });
        // The bench's numbers are only worth printing for the right plan.
        assert!(
            dplan.to_host().unwrap() == plan,
            "device plan differs from the host plan at size {name}"
        );
        drop(scratch);
        let gd = device.htod_copy(&g).unwrap();
        let rd = device.htod_copy(&r).unwrap();
        let mut f = device.alloc::<f64>(3 * n_ext).unwrap();
        let mut w = device.alloc::<f64>(9 * n_ext).unwrap();
        let (asm_ms, asm_lo, asm_hi) = time_ms(&stream, || {
            assemble_device_into(&stream, &dplan, &gd, &rd, VirialSplit::Half, &mut f, &mut w)
                .unwrap()
        });
        let mut accum = device.alloc::<f64>(12 * n_ext).unwrap();
        let mut f32f = device.alloc::<f32>(3 * n_ext).unwrap();
        let mut f32w = device.alloc::<f32>(9 * n_ext).unwrap();
        let (asm32_ms, _, _) = time_ms(&stream, || {
            assemble_device_rounded_into(
                &stream,
                &dplan,
                &gd,
                &rd,
                VirialSplit::Half,
                &mut accum,
                &mut f32f,
                &mut f32w,
            )
            .unwrap()
        });
        drop((accum, f32f, f32w));
        // Where the time goes (c, d): the same assembly over a plan whose
        // two passes are both the dst pass (edges read in memory order), and
        // one whose two passes are both the src pass (gathered): half of
        // each is one pass's time.
        if e >= 1_000_000 {
            let twice = |order: &[i32], row_ptr: &[i32]| {
                let p = CsrPlan::from_parts(
                    e,
                    order.to_vec(),
                    row_ptr.to_vec(),
                    order.to_vec(),
                    row_ptr.to_vec(),
                )
                .unwrap();
                DevicePlan::upload(&device, &p).unwrap()
            };
            let mut half_ms = |p: &DevicePlan| {
                time_ms(&stream, || {
                    assemble_device_into(&stream, p, &gd, &rd, VirialSplit::Half, &mut f, &mut w)
                        .unwrap()
                })
                .0 / 2.0
            };
            let dst_pass = half_ms(&twice(plan.dst_order(), plan.dst_row_ptr()));
            let src_pass = half_ms(&twice(plan.src_order(), plan.src_row_ptr()));
            eprintln!(
                "  {name}: one dst pass (memory order) ~{dst_pass:.4} ms, one src pass (gathered) ~{src_pass:.4} ms"
            );
        }
        let edges = DeviceEdges::upload(&device, &srcv, &dstv, n_ext, None).unwrap();
        let mut outer = device.alloc::<f32>(9 * e).unwrap();
        let mut fa = device.alloc::<f32>(3 * n_ext).unwrap();
        let mut wa = device.alloc::<f32>(9 * n_ext).unwrap();
        let (atom_ms, _, _) = time_ms(&stream, || {
            assemble_atomic_device_into(
                &stream,
                &edges,
                &gd,
                &rd,
                VirialSplit::Half,
                &mut outer,
                &mut fa,
                &mut wa,
            )
            .unwrap()
        });
        // Sector-counted floor (float64 output): per pass, the order
        // (4 B/edge) and the g and edge_vec rows of each edge: 12 bytes each
        // where the edge follows its predecessor in memory (contiguous),
        // else a 32-byte sector each (gathered); row_ptr; outputs written
        // once, then read and rewritten once (96 B/row each way).
        let row_bytes = |order: &[i32]| -> f64 {
            (0..order.len())
                .map(|i| {
                    if i > 0 && order[i] == order[i - 1] + 1 {
                        24.0
                    } else {
                        64.0
                    }
                })
                .sum()
        };
        let bytes = row_bytes(plan.dst_order())
            + row_bytes(plan.src_order())
            + 2.0 * 4.0 * e as f64
            + 2.0 * 4.0 * (n_ext + 1) as f64
            + 3.0 * 96.0 * n_ext as f64;
        let floor_ms = bytes / bw * 1e3;
        let torch_ms = torch.as_ref().and_then(|p| p.get(name));
        let torch_plan_ms = torch.as_ref().and_then(|p| p.get(&format!("plan_{name}")));
        let ratio = |peer: Option<f64>, ours: f64| {
            peer.map(|t| format!("{:.2}", t / ours))
                .unwrap_or_else(|| "-".into())
        };
        let ms = |t: Option<f64>| t.map(|t| format!("{t:.4}ms")).unwrap_or_else(|| "-".into());
        println!(
            "{:<9} {:>10} {:>8} {:>8.2}ms {:>8.4}ms {:>8.4}ms {:>8.4}ms {:>8.4}ms {:>8.4}ms {:>9.2} {:>9.2} {:>10} {:>9} {:>10} {:>9}",
            name,
            e,
            n_ext,
            plan_ms,
            dplan_ms,
            asm_ms,
            asm32_ms,
            atom_ms,
            floor_ms,
            asm_ms / floor_ms,
            atom_ms / asm_ms,
            ms(torch_ms),
            ratio(torch_ms, asm_ms),
            ms(torch_plan_ms),
            ratio(torch_plan_ms, dplan_ms),
        );
        eprintln!(
            "  {name}: assemble spread {asm_lo:.4}..{asm_hi:.4} ms; (assemble) / (two empty launches + floor) = {:.2}",
            asm_ms / (launch_ms + floor_ms)
        );
        eprintln!("  {name}: assemble spread {asm_lo:.4}..{asm_hi:.4} ms");
        json.push(format!(
            "{{\"size\":\"{name}\",\"edges\":{e},\"n_ext\":{n_ext},\"plan_host_ms\":{plan_ms:.4},\"plan_device_ms\":{dplan_ms:.5},\"assemble_ms\":{asm_ms:.5},\"assemble_f32_out_ms\":{asm32_ms:.5},\"atomic_ms\":{atom_ms:.5},\"floor_ms\":{floor_ms:.5},\"torch_index_add_ms\":{},\"torch_plan_ms\":{}}}",
            torch_ms.map(|t| format!("{t:.5}")).unwrap_or_else(|| "null".into()),
            torch_plan_ms.map(|t| format!("{t:.5}")).unwrap_or_else(|| "null".into())
        ));
    }
    if let Ok(dir) = std::env::var("HIPKERN_BENCH_OUT") {
        let _ = std::fs::write(
            format!("{dir}/force_assembly.json"),
            format!("[{}]\n", json.join(",\n")),
        );
    }
}

/// Centre atoms per side of d-lattice's cube, and the side of the cube
/// with its ghost shell (4 lattice steps: every neighbour below is within
/// 3.2 of its centre).
const LATTICE_SIDE: usize = 64;
const LATTICE_EXT: usize = LATTICE_SIDE + 8;

/// The edges of d-lattice, grouped by dst as the others: the 64³ centre
/// atoms of a cubic lattice numbered in row-major order (x fastest, as an
/// MD code's spatial sort leaves them), then the ghost atoms of the
/// 72³ cube around them, row-major; each centre's `per` nearest lattice
/// neighbours (by distance, then offset z, y, x), nearest first. The
/// `python/bench/force_bench.py` lattice is the same.
fn lattice_edges(per: usize) -> (Vec<i32>, Vec<i32>) {
    let (n, m) = (LATTICE_SIDE as i64, LATTICE_EXT as i64);
    let mut offsets = Vec::new();
    for dz in -4i64..=4 {
        for dy in -4i64..=4 {
            for dx in -4i64..=4 {
                if (dx, dy, dz) != (0, 0, 0) {
                    offsets.push((dx * dx + dy * dy + dz * dz, dz, dy, dx));
                }
            }
        }
    }
    offsets.sort_unstable();
    offsets.truncate(per);
    // Index of each point of the extended cube: centres first, then ghosts.
    let mut index = vec![0i32; (m * m * m) as usize];
    let mut ghost = n * n * n;
    for z in 0..m {
        for y in 0..m {
            for x in 0..m {
                let (cx, cy, cz) = (x - 4, y - 4, z - 4);
                let at = (x + m * (y + m * z)) as usize;
                index[at] = if [cx, cy, cz].iter().all(|&c| (0..n).contains(&c)) {
                    (cx + n * (cy + n * cz)) as i32
                } else {
                    ghost += 1;
                    (ghost - 1) as i32
                };
            }
        }
    }
    let e = (n * n * n) as usize * per;
    let (mut src, mut dst) = (Vec::with_capacity(e), Vec::with_capacity(e));
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let centre = (x + n * (y + n * z)) as i32;
                for &(_, dz, dy, dx) in &offsets {
                    let (px, py, pz) = (x + 4 + dx, y + 4 + dy, z + 4 + dz);
                    src.push(index[(px + m * (py + m * pz)) as usize]);
                    dst.push(centre);
                }
            }
        }
    }
    (src, dst)
}
