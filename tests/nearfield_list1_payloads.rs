//! What the device List 1 evaluator is given (`List1Payload`,
//! `docs/design/list1.md`), checked on the host: every layout's payload
//! reconstructs every entry of a reduced table with synthetic values
//! exactly (so packing and addressing are checked without quadrature),
//! dense tables' payloads, the bytes each layout uploads, the refusals
//! (ORBIT and a directional derivative, Yukawa without per-level tables),
//! and the host validation giving the CPU evaluator's own errors for bad
//! inputs. No device is needed.
mod common;
use common::list1::{is_directional, is_yukawa, kernels, random_values, synthetic, tree};
use hipkern::nearfield::{
    evaluate_list1, DenseOrbits, EntryQuadrature, FallbackDescriptors, Kernel, List1Boxes,
    List1Layout, List1Payload, List1ReducedTables, List1Tables, NearFieldTable, OrbitDescriptors,
};
use hipkern::rng::SplitMix64;

/// Every layout's payload reconstructs every full entry of a reduced
/// table exactly (±0 equal), for per-level tables too: what the device
/// reads is what the CPU reads.
#[test]
fn payloads_reconstruct_every_entry() {
    let mut rng = SplitMix64::new(77);
    for dim in [2usize, 3] {
        let qs: &[usize] = if dim == 2 { &[1, 2, 3, 4] } else { &[1, 2, 3] };
        for (name, k) in kernels(dim) {
            for &q in qs {
                let tables = [
                    synthetic(&k, q, 1.0, &mut rng),
                    synthetic(&k, q, 0.5, &mut rng),
                ];
                let full: Vec<Vec<f64>> = tables
                    .iter()
                    .map(|t| t.reconstruct_full_table_from_symmetry())
                    .collect();
                for (layout, resolved) in [
                    (List1Layout::Dense, false),
                    (List1Layout::Orbit, false),
                    (List1Layout::Fallback, true),
                    (List1Layout::Fallback, false),
                ] {
                    let view = if is_yukawa(&k) {
                        List1ReducedTables::PerLevel(&tables)
                    } else {
                        List1ReducedTables::Scaled(&tables[0])
                    };
                    let mut p = match List1Payload::from_reduced(&view, layout) {
                        Err(e) if layout == List1Layout::Orbit && is_directional(&k) => {
                            assert!(e.to_string().contains("ORBIT"), "{e}");
                            continue;
                        }
                        r => r.unwrap(),
                    };
                    if layout == List1Layout::Fallback {
                        assert!(p.fallback_resolution().is_some(), "{dim}D {name} q={q}");
                        if !resolved {
                            p = p.without_fallback_resolution();
                        }
                    }
                    let nq = q.pow(dim as u32);
                    for (ti, want) in full.iter().enumerate().take(p.n_tables()) {
                        for (id, &w) in want.iter().enumerate() {
                            let (c, s, t) = (id / (nq * nq), (id / nq) % nq, id % nq);
                            let g = p.entry(ti, c, s, t).unwrap();
                            assert!(
                                g.to_bits() == w.to_bits() || (g == 0.0 && w == 0.0),
                                "{dim}D {name} q={q} {layout} table {ti} entry {id}: {g} vs {w}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The dense payload of a built dense table is the table; ORBIT and
/// fallback hold each orbit's representative value.
#[test]
fn payloads_of_dense_tables() {
    let k = Kernel::laplace(2)
        .unwrap()
        .axis_target_derivative(1)
        .unwrap();
    let q = 2;
    let t = NearFieldTable::build(&k, q, 1.0, &EntryQuadrature::default()).unwrap();
    let o = DenseOrbits::build(&k, q).unwrap();
    for layout in List1Layout::ALL {
        let p = List1Payload::from_tables(&List1Tables::Scaled(&t), layout).unwrap();
        let nq = q * q;
        for id in 0..t.data().len() {
            let (c, s, tt) = (id / (nq * nq), (id / nq) % nq, id % nq);
            let g = p.entry(0, c, s, tt).unwrap();
            let rep = o.canonical_entry_ids[id] as usize;
            let r = o.representatives.binary_search(&(rep as u32)).unwrap();
            let want = match layout {
                List1Layout::Dense => t.data()[id],
                _ if o.zero_by_symmetry[r] => 0.0,
                _ => o.canonical_scales[id] * t.data()[rep],
            };
            assert!(
                g.to_bits() == want.to_bits() || (g == 0.0 && want == 0.0),
                "{layout} entry {id}: {g} vs {want}"
            );
        }
    }
}

/// Bytes uploaded per layout at 3D q = 3 Laplace: dense 101331 values,
/// ORBIT 2510 rows and the 1576 descriptor bytes, the fallback its
/// own metadata; all with the 27 normalisers.
#[test]
fn upload_bytes_3d_q3() {
    let k = Kernel::laplace(3).unwrap();
    let mut rng = SplitMix64::new(5);
    let red = synthetic(&k, 3, 1.0, &mut rng);
    let v = List1ReducedTables::Scaled(&red);
    let dense = List1Payload::from_reduced(&v, List1Layout::Dense).unwrap();
    let orbit = List1Payload::from_reduced(&v, List1Layout::Orbit).unwrap();
    let fb = List1Payload::from_reduced(&v, List1Layout::Fallback).unwrap();
    assert_eq!(dense.upload_bytes().values, 101_331 * 8);
    assert_eq!(dense.upload_bytes().descriptors, 0);
    assert_eq!(orbit.upload_bytes().values, 2510 * 8);
    assert_eq!(orbit.upload_bytes().descriptors, 1576);
    assert_eq!(
        orbit.upload_bytes().descriptors,
        OrbitDescriptors::build(&k, 3).unwrap().metadata_bytes()
    );
    assert_eq!(fb.upload_bytes().values, 2510 * 8);
    assert_eq!(
        fb.upload_bytes().descriptors,
        FallbackDescriptors::prepare(&k, 3)
            .unwrap()
            .metadata_bytes()
    );
    // The resolution table: per case its orbit and transform, 10 canonical
    // cases × 27² u16 entries.
    let n_cases = hipkern::nearfield::Cases::new(3).unwrap().len();
    assert_eq!(fb.upload_bytes().resolution, 2 * n_cases + 10 * 729 * 2);
    let fbd = fb.clone().without_fallback_resolution();
    assert_eq!(fbd.upload_bytes().resolution, 0);
    assert_eq!(
        fbd.upload_bytes().descriptors,
        fb.upload_bytes().descriptors
    );
    assert_eq!(
        fb.upload_bytes().total(),
        fbd.upload_bytes().total() + fb.upload_bytes().resolution
    );
    for p in [&dense, &orbit] {
        assert_eq!(p.upload_bytes().resolution, 0);
    }
    for p in [&dense, &orbit, &fb] {
        assert_eq!(p.upload_bytes().normalizers, 27 * 8);
        let b = p.upload_bytes();
        eprintln!(
            "3D q=3 Laplace {}: {} B values + {} B descriptors + {} B normalisers + {} B \
             resolution = {} B",
            p.layout(),
            b.values,
            b.descriptors,
            b.normalizers,
            b.resolution,
            b.total()
        );
    }
}

/// Tables the evaluator refuses, with errors that say why.
#[test]
fn refused_tables() {
    let mut rng = SplitMix64::new(9);
    // ORBIT and a directional source derivative.
    let k = Kernel::laplace(3)
        .unwrap()
        .directional_source_derivative(&[0.2, 0.0, -0.9])
        .unwrap();
    let red = synthetic(&k, 1, 1.0, &mut rng);
    let e = List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), List1Layout::Orbit)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ORBIT") && e.contains("directional") && e.contains("fallback"),
        "{e}"
    );
    for l in [List1Layout::Dense, List1Layout::Fallback] {
        List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), l).unwrap();
    }
    // Yukawa through one scaled table.
    let y = synthetic(&Kernel::yukawa(2, 2.0).unwrap(), 2, 1.0, &mut rng);
    let e = List1Payload::from_reduced(&List1ReducedTables::Scaled(&y), List1Layout::Dense)
        .unwrap_err()
        .to_string();
    assert!(e.contains("Yukawa") && e.contains("per level"), "{e}");
    // Per-level tables of different q.
    let y3 = synthetic(&Kernel::yukawa(2, 2.0).unwrap(), 3, 0.5, &mut rng);
    let e = List1Payload::from_reduced(
        &List1ReducedTables::PerLevel(&[y.clone(), y3]),
        List1Layout::Fallback,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("per-level table 1"), "{e}");
    let e = List1Payload::from_reduced(&List1ReducedTables::PerLevel(&[]), List1Layout::Dense)
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
    // A layout name.
    assert_eq!("orbit".parse::<List1Layout>().unwrap(), List1Layout::Orbit);
    assert!("sparse".parse::<List1Layout>().is_err());
}

/// The host validation of an evaluation gives the CPU evaluator's own
/// error, for each kind of bad input.
#[test]
fn bad_inputs_give_the_cpu_evaluators_errors() {
    let k = Kernel::laplace(2).unwrap();
    let q = 2;
    let mut rng = SplitMix64::new(3);
    let red = synthetic(&k, q, 1.0, &mut rng);
    let dense = red.to_dense().unwrap();
    let payload =
        List1Payload::from_reduced(&List1ReducedTables::Scaled(&red), List1Layout::Orbit).unwrap();
    let t = tree(2, 11, 4);
    let targets = t.all_boxes();
    let nq = q * q;
    let f = random_values(&mut rng, t.n_boxes() * nq);
    let good = t.list1_boxes(&targets);
    payload.check(&good, Some(&f)).unwrap();
    let same = |b: &List1Boxes<'_>, f: &[f64], what: &str| {
        let cpu = evaluate_list1(b, &List1Tables::Scaled(&dense), f)
            .unwrap_err()
            .to_string();
        let dev = payload.check(b, Some(f)).unwrap_err().to_string();
        assert_eq!(dev, cpu, "{what}");
        dev
    };
    // A pair that is not a List 1 neighbour: a far box in a list.
    let mut sources = t.list1_sources().to_vec();
    let far = (0..t.n_boxes() as u32)
        .find(|&b| {
            let d: f64 = (0..2)
                .map(|k| (t.centers()[2 * b as usize + k] - t.centers()[k]).abs())
                .fold(0.0, f64::max);
            d > 0.6
        })
        .unwrap();
    sources[1] = far;
    let b = List1Boxes {
        source_boxes: &sources,
        ..good
    };
    let e = same(&b, &f, "far pair");
    assert!(
        e.contains("not a List 1 pair") && e.contains(&format!("source box {far}")),
        "{e}"
    );
    // CSR not monotone, wrong end, box id out of range, target out of range.
    let mut starts = t.list1_starts().to_vec();
    starts.swap(2, 3);
    let b = List1Boxes {
        source_starts: &starts,
        ..good
    };
    assert!(same(&b, &f, "monotone").contains("not monotone"));
    let short = &t.list1_starts()[..t.n_boxes()];
    let b = List1Boxes {
        source_starts: short,
        ..good
    };
    same(&b, &f, "starts length");
    let mut sources = t.list1_sources().to_vec();
    sources[0] = t.n_boxes() as u32;
    let b = List1Boxes {
        source_boxes: &sources,
        ..good
    };
    assert!(same(&b, &f, "box id").contains("out of range"));
    let mut tg = targets.clone();
    tg[0] = u32::MAX;
    let b = List1Boxes {
        target_boxes: &tg,
        ..good
    };
    same(&b, &f, "target id");
    // Source values: length, non-finite.
    same(&good, &f[1..], "values length");
    let mut g = f.clone();
    g[5] = f64::NAN;
    assert!(same(&good, &g, "NaN value").contains("not finite"));
    // The dimension.
    let t3 = tree(3, 1, 2);
    let tg3 = t3.all_boxes();
    let f3 = vec![1.0; t3.n_boxes() * 8];
    same(&t3.list1_boxes(&tg3), &f3, "dimension");
}
