//! `hipkern force` run as a program on `.npy` files (`docs/design/force.md`),
//! the host backends: `--backend cpu` and `--backend reference` against the
//! float64 reference on random graphs, with ghost folding, per-frame virials
//! and the output precision; the two backends against each other; the
//! reader on other byte orders and layouts, and the test's `.npy` writer
//! against the bytes numpy writes. Bad input: cli_force_bad_input.rs; the
//! device backends: cli_force_device.rs.
//!
//! What the checks rest on is written in tests/common/cli_force/,
//! independent of the library: a SplitMix64 generator, a `.npy` writer and
//! reader, and the float64 reference (a direct loop over edges, with
//! compensated sums so that it is the exact result to about one ulp). The
//! program run is `HIPKERN_BIN` when set (scripts/device-tests.sh points it
//! at the device build), else the one cargo built with these tests.
mod common;
use common::cli_force::cases::{assert_close, random_case, with_ghosts, Frames, Graph, Half, Src};
use common::cli_force::jobs::{
    check_frames, check_ghost_folding, check_out_dtype_input, check_random_graphs, run_and_check,
    Job, HOST_BACKENDS,
};
use common::cli_force::npy::{
    npy_bytes, npy_header, parse_npy, Data, BIG_ENDIAN, BOTH, F32, F64, FORTRAN, I32, I64,
};
use common::cli_force::program::Format;
use std::collections::BTreeMap;

#[test]
fn cpu_backend_matches_the_reference_on_random_graphs() {
    check_random_graphs("cpu");
}

#[test]
fn reference_backend_matches_the_reference_on_random_graphs() {
    check_random_graphs("reference");
}

#[test]
fn host_backends_fold_ghosts_into_owners() {
    for backend in HOST_BACKENDS {
        check_ghost_folding(backend);
    }
}

#[test]
fn host_backends_sum_the_virial_per_frame() {
    for backend in HOST_BACKENDS {
        check_frames(backend);
    }
}

#[test]
fn host_backends_round_once_to_the_input_precision() {
    for backend in HOST_BACKENDS {
        check_out_dtype_input(backend);
    }
}

#[test]
fn cpu_and_reference_backends_agree() {
    let case = random_case(
        5000,
        Graph {
            n_ext: 64,
            n_edges: 700,
            hub_edges: 300,
            self_edges: 12,
            isolated: 8,
        },
        F64,
    );
    let frames = Frames::Size(8);
    let [cpu, reference] = HOST_BACKENDS.map(|backend| {
        let files = run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("agree", &case, backend, Src)
        });
        files
            .iter()
            .map(|(name, bytes)| (name.clone(), parse_npy(bytes, name).values))
            .collect::<BTreeMap<_, _>>()
    });
    for (name, values) in &cpu {
        assert_close(
            &format!("cpu vs reference: {name}"),
            values,
            &reference[name],
            1e-13,
        );
    }
}

/// Big-endian and column-major inputs (and src, dst of different widths)
/// give the same bytes as little-endian C-order ones.
#[test]
fn reader_takes_big_endian_and_fortran_order_inputs() {
    let graph = Graph {
        n_ext: 30,
        n_edges: 200,
        hub_edges: 50,
        self_edges: 3,
        isolated: 2,
    };
    let formats = [
        Format {
            src: I32,
            dst: I64,
            mapping: I32,
            index_layout: BIG_ENDIAN,
            g_layout: BOTH,
            edge_vec_layout: BIG_ENDIAN,
        },
        Format {
            src: I64,
            dst: I32,
            mapping: I64,
            index_layout: FORTRAN,
            g_layout: FORTRAN,
            edge_vec_layout: BOTH,
        },
    ];
    for precision in [F64, F32] {
        let case = with_ghosts(random_case(6000, graph, precision), 25, 6001);
        for backend in HOST_BACKENDS {
            let plain = run_and_check(&Job::new("little-endian, C order", &case, backend, Half));
            for format in formats {
                let other = run_and_check(&Job {
                    format,
                    ..Job::new("big-endian / fortran order", &case, backend, Half)
                });
                assert_eq!(other, plain, "{backend}, {format:?}: outputs differ");
            }
        }
    }
}

/// The writer against the bytes numpy writes: `np.save` of
/// `np.arange(6, dtype='>f8').reshape(2, 3).T` (column-major, so
/// fortran_order True, shape (3, 2), data 0..6 on disk) and of
/// `np.zeros(7, dtype='<i4')` (the header only).
#[test]
fn npy_writer_matches_numpy_byte_for_byte() {
    let header = npy_header(">f8", true, &[3, 2]);
    let mut want = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    want.extend_from_slice(b"{'descr': '>f8', 'fortran_order': True, 'shape': (3, 2), }");
    want.resize(127, b' ');
    want.push(b'\n');
    assert_eq!(header, want);
    // arange(6).reshape(2, 3).T is [[0, 3], [1, 4], [2, 5]]; column-major on disk: 0..6.
    let file = npy_bytes(
        F64,
        &[3, 2],
        Data::Float(&[0.0, 3.0, 1.0, 4.0, 2.0, 5.0]),
        BOTH,
    );
    let data: Vec<f64> = file[128..]
        .chunks_exact(8)
        .map(|c| f64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(&npy_header("<i4", false, &[7])[..], {
        let mut h = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        h.extend_from_slice(b"{'descr': '<i4', 'fortran_order': False, 'shape': (7,), }");
        h.resize(127, b' ');
        h.push(b'\n');
        h
    });
}
