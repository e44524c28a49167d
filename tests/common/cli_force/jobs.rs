//! Successful runs checked against the reference, and the checks every
//! backend goes through (random graphs, ghost folding, frames, output
//! precision).
use super::cases::{
    assert_close, assert_rounded_once, frame_reference, random_case, reference, tolerance,
    with_ghosts, Case, Frames, Ghosts, Graph, Half, Split, SplitMix64, Src,
};
use super::npy::{parse_npy, read_output, F32, F64, I32, I64};
use super::program::{Format, Setup};
use std::collections::BTreeMap;

// ---- successful runs against the reference -------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutDtype {
    /// The default: no --out-dtype flag.
    Default,
    F64,
    Input,
}

/// One successful run of the program and what it must produce.
pub struct Job<'a> {
    pub label: &'a str,
    pub case: &'a Case,
    pub format: Format,
    pub split: Split,
    pub backend: &'a str,
    pub out_dtype: OutDtype,
    pub frames: Option<&'a Frames>,
}

impl<'a> Job<'a> {
    pub fn new(label: &'a str, case: &'a Case, backend: &'a str, split: Split) -> Job<'a> {
        Job {
            label,
            case,
            format: Format::indices(I64),
            split,
            backend,
            out_dtype: OutDtype::Default,
            frames: None,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "{} (--backend {}, --split {}, {:?} in, {:?}/{:?} indices, {:?} out, frames {})",
            self.label,
            self.backend,
            self.split.name(),
            self.case.precision,
            self.format.src,
            self.format.dst,
            self.out_dtype,
            match self.frames {
                Some(Frames::Size(s)) => format!("of {s}"),
                Some(Frames::Ids { n_frames, .. }) => format!("{n_frames} by id"),
                None => "none".into(),
            }
        )
    }
}

/// Runs the job and compares every element of every output with the
/// reference; checks dtypes and shapes, and that `out/` holds exactly the
/// outputs. Returns the output files' bytes by name.
pub fn run_and_check(job: &Job<'_>) -> BTreeMap<String, Vec<u8>> {
    let what = job.describe();
    let mut setup = Setup::for_case(job.case, job.format);
    setup
        .set("--backend", job.backend)
        .set("--split", job.split.name());
    match job.out_dtype {
        OutDtype::Default => {}
        OutDtype::F64 => {
            setup.set("--out-dtype", "f64");
        }
        OutDtype::Input => {
            setup.set("--out-dtype", "input");
        }
    }
    if let Some(frames) = job.frames {
        setup.with_frames(frames);
    }
    let outcome = setup.run();
    outcome.assert_success(&what);
    assert!(
        outcome.stdout.contains(&format!(
            "backend {}, {} edges",
            job.backend,
            job.case.n_edges()
        )),
        "{what}: stdout {:?}",
        outcome.stdout
    );

    let files = setup.out_files();
    let mut want_names = vec!["force.npy", "virial.npy"];
    if job.frames.is_some() {
        want_names.extend(["frame_virial.npy", "frame_voigt.npy"]);
    }
    want_names.sort_unstable();
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(names, want_names, "{what}: files in out/ (no temporaries)");

    let expected = reference(job.case, job.split);
    let rows = job.case.n_rows();
    let tol = tolerance(job.backend, job.case.precision);
    let f32_out = job.out_dtype == OutDtype::Input && job.case.precision == F32;
    let descr = if f32_out { "<f4" } else { "<f8" };
    for (name, width, want) in [
        ("force.npy", 3, &expected.force),
        ("virial.npy", 9, &expected.virial),
    ] {
        let got = read_output(&setup.output(name), descr, &[rows, width]);
        let what = format!("{what}: {name}");
        match &got.f32_values {
            // The float64 result rounded once (device-atomic sums in float32).
            Some(v) if job.backend != "device-atomic" => assert_rounded_once(&what, v, want, tol),
            _ => assert_close(&what, &got.values, want, tol),
        }
    }
    if let Some(frames) = job.frames {
        let (frame_of, n_frames) = frames.frame_of(rows);
        let (full, voigt) = frame_reference(&expected.virial, &frame_of, n_frames);
        for (name, width, want) in [
            ("frame_virial.npy", 9, &full),
            ("frame_voigt.npy", 6, &voigt),
        ] {
            let got = read_output(&setup.output(name), "<f8", &[n_frames, width]);
            assert_close(&format!("{what}: {name}"), &got.values, want, tol);
        }
    }
    files
}

/// The random graphs every backend is checked on.
pub fn graphs() -> Vec<(&'static str, Graph)> {
    let g = |n_ext, n_edges, hub_edges, self_edges, isolated| Graph {
        n_ext,
        n_edges,
        hub_edges,
        self_edges,
        isolated,
    };
    vec![
        ("no edges", g(5, 0, 0, 0, 0)),
        ("no atoms", g(0, 0, 0, 0, 0)),
        ("one self edge", g(1, 1, 0, 1, 0)),
        ("random pairs", g(40, 300, 0, 5, 3)),
        ("hub of 300 edges", g(64, 700, 300, 12, 8)),
    ]
}

/// Every graph × precision × index width × split, against the reference.
pub fn check_random_graphs(backend: &str) {
    for (i, (label, graph)) in graphs().into_iter().enumerate() {
        for precision in [F64, F32] {
            let case = random_case(1000 + i as u64, graph, precision);
            for index in [I32, I64] {
                for split in [Half, Src] {
                    run_and_check(&Job {
                        format: Format::indices(index),
                        ..Job::new(label, &case, backend, split)
                    });
                }
            }
        }
    }
}

/// Ghost atoms folded into their owners: mixed index widths, both splits.
pub fn check_ghost_folding(backend: &str) {
    let graph = Graph {
        n_ext: 48,
        n_edges: 400,
        hub_edges: 120,
        self_edges: 6,
        isolated: 4,
    };
    for precision in [F64, F32] {
        let case = with_ghosts(random_case(2000, graph, precision), 20, 2001);
        for (split, src, mapping) in [(Half, I32, I64), (Src, I64, I32), (Half, I64, I64)] {
            let format = Format {
                src,
                dst: src,
                mapping,
                ..Format::indices(I64)
            };
            run_and_check(&Job {
                format,
                ..Job::new("folded into 20 owners", &case, backend, split)
            });
        }
        // Every atom its own owner: the unfolded result.
        let mut identity = case.clone();
        identity.ghosts = Some(Ghosts {
            mapping: (0..graph.n_ext as i64).collect(),
            n_local: graph.n_ext,
        });
        let folded = run_and_check(&Job::new("identity mapping", &identity, backend, Half));
        identity.ghosts = None;
        let plain = run_and_check(&Job::new("no mapping", &identity, backend, Half));
        // (Atomic sums need not repeat bit for bit.)
        if backend != "device-atomic" {
            assert_eq!(folded, plain, "an identity mapping changes nothing");
        }
    }
}

/// Per-frame virial by frame size and by frame ids (with an empty frame),
/// with and without folding.
pub fn check_frames(backend: &str) {
    let graph = Graph {
        n_ext: 60,
        n_edges: 360,
        hub_edges: 60,
        self_edges: 4,
        isolated: 6,
    };
    let mut rng = SplitMix64(3000);
    for (precision, split, ids_dtype) in [(F64, Half, I32), (F32, Src, I64)] {
        let case = random_case(3001, graph, precision);
        for size in [15, 60, 1] {
            let frames = Frames::Size(size);
            run_and_check(&Job {
                frames: Some(&frames),
                ..Job::new("frames by size", &case, backend, split)
            });
        }
        // Five frames, frame 3 empty (its totals are zero).
        let frames = Frames::Ids {
            ids: (0..60).map(|_| [0, 1, 2, 4][rng.below(4)]).collect(),
            n_frames: 5,
            dtype: ids_dtype,
        };
        run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("frames by id", &case, backend, split)
        });

        let folded = with_ghosts(case, 30, 3002);
        for frames in [
            Frames::Size(10),
            Frames::Ids {
                ids: (0..30).map(|k| (k % 2) as i64).collect(),
                n_frames: 2,
                dtype: ids_dtype,
            },
        ] {
            run_and_check(&Job {
                frames: Some(&frames),
                ..Job::new("folded, frames over local rows", &folded, backend, split)
            });
        }
    }
}

/// `--out-dtype input`: float32 for float32 inputs, each value the float64
/// result rounded once (bit for bit the `--out-dtype f64` output rounded);
/// frame totals stay float64. Float64 inputs: the same bytes as f64.
pub fn check_out_dtype_input(backend: &str) {
    let graph = Graph {
        n_ext: 64,
        n_edges: 700,
        hub_edges: 300,
        self_edges: 12,
        isolated: 8,
    };
    let frames = Frames::Size(16);
    for precision in [F32, F64] {
        let case = random_case(4000, graph, precision);
        let job = |out_dtype| Job {
            out_dtype,
            frames: Some(&frames),
            ..Job::new("out dtype", &case, backend, Half)
        };
        let wide = run_and_check(&job(OutDtype::F64));
        let narrow = run_and_check(&job(OutDtype::Input));
        let default = run_and_check(&job(OutDtype::Default));
        assert_eq!(default, wide, "the default --out-dtype is f64");
        for name in ["frame_virial.npy", "frame_voigt.npy"] {
            assert_eq!(narrow[name], wide[name], "{name} stays float64");
        }
        for name in ["force.npy", "virial.npy"] {
            if precision == F64 {
                assert_eq!(narrow[name], wide[name], "float64 in: input means f64");
                continue;
            }
            let w = parse_npy(&wide[name], name);
            let n = parse_npy(&narrow[name], name);
            assert_eq!(n.shape, w.shape);
            let n = n.f32_values.expect("float32 output");
            for (i, (&x, &y)) in n.iter().zip(&w.values).enumerate() {
                assert_eq!(
                    x.to_bits(),
                    (y as f32).to_bits(),
                    "{name}[{i}]: {x:e} is not {y:e} rounded to float32"
                );
            }
        }
    }
}

pub const HOST_BACKENDS: [&str; 2] = ["cpu", "reference"];
