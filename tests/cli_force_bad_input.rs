//! `hipkern force` on bad input (`docs/design/force.md`): missing and
//! malformed files, wrong dtypes and shapes, indices out of range, bad
//! mappings, flag values, output paths and frame flags, and flags clap
//! cannot parse: exit status 2, one line on stderr, nothing created or
//! changed. Errors found after the assembly or while writing leave earlier
//! outputs as they were. The small case these start from is checked to be
//! valid first. Helpers: tests/common/cli_force/.
mod common;
use common::cli_force::cases::{small_case, with_ghosts, Case, Frames, Half, Src};
use common::cli_force::jobs::{run_and_check, Job, HOST_BACKENDS};
use common::cli_force::npy::{npy_bytes, npy_header, Data, Layout, F32, F64, I32, I64};
use common::cli_force::program::{assert_rejected, base_setup, Format, Setup, SetupEdit};
use std::fs;

/// The small case, edited by `edit`, must be rejected as bad input (exit 2).
fn rejected(what: &str, needles: &[&str], edit: impl FnOnce(&Case, &mut Setup)) {
    let case = small_case();
    let mut setup = base_setup(&case);
    edit(&case, &mut setup);
    assert_rejected(what, &setup, 2, needles);
}

#[test]
fn the_small_case_of_the_bad_input_tests_is_valid() {
    let case = with_ghosts(small_case(), 3, 7001);
    let frames = Frames::Ids {
        ids: vec![0, 1, 1],
        n_frames: 2,
        dtype: I64,
    };
    for backend in HOST_BACKENDS {
        run_and_check(&Job::new("small case", &small_case(), backend, Half));
        run_and_check(&Job {
            frames: Some(&frames),
            ..Job::new("small case, folded", &case, backend, Src)
        });
    }
}

#[test]
fn missing_and_malformed_files_are_rejected() {
    rejected("g missing", &["g (", "g.npy", "cannot read"], |_, s| {
        fs::remove_file(s.input("g.npy")).unwrap();
    });
    rejected("src missing", &["src (", "cannot read"], |_, s| {
        s.set("--src", s.input("nowhere.npy"));
    });
    rejected("mapping missing", &["mapping (", "cannot read"], |_, s| {
        s.set("--mapping", s.input("nowhere.npy"))
            .set("--n-local", "3");
    });
    rejected("not a .npy file", &["dst (", "not a .npy file"], |_, s| {
        s.write_input("dst.npy", b"src,dst\n0,1\n");
    });
    rejected(
        "header cut short",
        &["edge_vec (", "not a .npy file"],
        |_, s| {
            let bytes = fs::read(s.input("edge_vec.npy")).unwrap();
            s.write_input("edge_vec.npy", &bytes[..40]);
        },
    );
    // The header promises 8×3 float64 (192 bytes) but 7 rows follow.
    rejected(
        "g truncated",
        &["g (", "the header says float64 (8, 3)", "168 bytes"],
        |c, s| {
            let bytes = npy_bytes(F64, &[8, 3], Data::Float(&c.g), Layout::default());
            s.write_input("g.npy", &bytes[..bytes.len() - 24]);
        },
    );
    rejected("src truncated", &["src (", "int64 (8,)"], |c, s| {
        let bytes = npy_bytes(I64, &[8], Data::Int(&c.src), Layout::default());
        s.write_input("src.npy", &bytes[..bytes.len() - 3]);
    });
    rejected(
        "extra bytes after the data",
        &["g (", "200 bytes"],
        |c, s| {
            let mut bytes = npy_bytes(F64, &[8, 3], Data::Float(&c.g), Layout::default());
            bytes.extend_from_slice(&[0; 8]);
            s.write_input("g.npy", &bytes);
        },
    );
    // A header claiming an enormous array is an error, not an allocation.
    rejected("absurd shape", &["g (", "the header says"], |_, s| {
        let mut bytes = npy_header("<f8", false, &[1 << 60, 3]);
        bytes.extend_from_slice(&[0; 64]);
        s.write_input("g.npy", &bytes);
    });
}

#[test]
fn wrong_dtypes_are_rejected() {
    rejected(
        "float src",
        &["src (", "float64", "int32 or int64"],
        |c, s| {
            s.write_floats(
                "src.npy",
                F64,
                &[8],
                &c.src.iter().map(|&i| i as f64).collect::<Vec<_>>(),
            );
        },
    );
    rejected(
        "float32 dst",
        &["dst (", "float32", "int32 or int64"],
        |c, s| {
            s.write_floats(
                "dst.npy",
                F32,
                &[8],
                &c.dst.iter().map(|&i| i as f64).collect::<Vec<_>>(),
            );
        },
    );
    rejected("int g", &["g (", "int32", "float32 or float64"], |_, s| {
        s.write_input(
            "g.npy",
            &npy_bytes(I32, &[8, 3], Data::Int(&[1; 24]), Layout::default()),
        );
    });
    rejected(
        "int edge_vec",
        &["edge_vec (", "int64", "float32 or float64"],
        |_, s| {
            s.write_input(
                "edge_vec.npy",
                &npy_bytes(I64, &[8, 3], Data::Int(&[1; 24]), Layout::default()),
            );
        },
    );
    rejected(
        "float mapping",
        &["mapping (", "float64", "int32 or int64"],
        |_, s| {
            s.write_floats("mapping.npy", F64, &[6], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0]);
            s.set("--mapping", s.input("mapping.npy"))
                .set("--n-local", "3");
        },
    );
    rejected(
        "unsigned src",
        &["src (", "<u4", "not supported"],
        |_, s| {
            let mut bytes = npy_header("<u4", false, &[8]);
            bytes.extend_from_slice(&[0; 32]);
            s.write_input("src.npy", &bytes);
        },
    );
    rejected("float16 g", &["g (", "<f2", "not supported"], |_, s| {
        let mut bytes = npy_header("<f2", false, &[8, 3]);
        bytes.extend_from_slice(&[0; 48]);
        s.write_input("g.npy", &bytes);
    });
    rejected(
        "g and edge_vec dtypes differ",
        &["g is float32 but edge_vec is float64"],
        |c, s| s.write_floats("g.npy", F32, &[8, 3], &c.g),
    );
}

#[test]
fn wrong_shapes_are_rejected() {
    rejected("g is E×2", &["g (", "(8, 2)", "(E, 3)"], |c, s| {
        s.write_floats("g.npy", F64, &[8, 2], &c.g[..16]);
    });
    rejected("g is 1-D", &["g (", "(24,)", "(E, 3)"], |c, s| {
        s.write_floats("g.npy", F64, &[24], &c.g);
    });
    rejected("edge_vec is 3-D", &["edge_vec (", "(8, 3, 1)"], |c, s| {
        s.write_floats("edge_vec.npy", F64, &[8, 3, 1], &c.edge_vec);
    });
    rejected("src is 2-D", &["src (", "(8, 1)", "1-D"], |c, s| {
        let bytes = npy_bytes(I64, &[8, 1], Data::Int(&c.src), Layout::default());
        s.write_input("src.npy", &bytes);
    });
    rejected("dst is 0-D", &["dst (", "()", "1-D"], |_, s| {
        let bytes = npy_bytes(I64, &[], Data::Int(&[0]), Layout::default());
        s.write_input("dst.npy", &bytes);
    });
    rejected(
        "src and dst lengths differ",
        &["src has 8 entries but dst has 7"],
        |c, s| {
            s.write_index("dst.npy", I64, &c.dst[..7]);
        },
    );
    rejected(
        "g has too few rows",
        &["g has 7 rows", "8 edges"],
        |c, s| {
            s.write_floats("g.npy", F64, &[7, 3], &c.g[..21]);
        },
    );
    rejected(
        "edge_vec has too many rows",
        &["edge_vec has 9 rows", "8 edges"],
        |c, s| {
            let mut r = c.edge_vec.clone();
            r.extend([0.0; 3]);
            s.write_floats("edge_vec.npy", F64, &[9, 3], &r);
        },
    );
    rejected(
        "mapping length",
        &["mapping has 5 entries but n_ext = 6"],
        |_, s| {
            s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 1]);
            s.set("--mapping", s.input("mapping.npy"))
                .set("--n-local", "3");
        },
    );
}

#[test]
fn indices_out_of_range_are_named_with_their_first_position() {
    for backend in HOST_BACKENDS {
        for dtype in [I32, I64] {
            let what = |w: &str| format!("{w} ({backend}, {dtype:?})");
            let setup = |edit: &dyn Fn(&Case, &Setup)| {
                let case = small_case();
                let mut s = Setup::for_case(&case, Format::indices(dtype));
                s.set("--backend", backend);
                edit(&case, &s);
                s
            };
            let s = setup(&|c, s| {
                let mut src = c.src.clone();
                src[3] = -1;
                src[6] = -2;
                s.write_index("src.npy", dtype, &src);
            });
            assert_rejected(
                &what("negative src"),
                &s,
                2,
                &["src[3] = -1", "out of range"],
            );
            let s = setup(&|c, s| {
                let mut dst = c.dst.clone();
                dst[5] = 6;
                dst[7] = 100;
                s.write_index("dst.npy", dtype, &dst);
            });
            assert_rejected(&what("dst = n_ext"), &s, 2, &["dst[5] = 6", "n_ext = 6"]);
            let s = setup(&|c, s| {
                let mut dst = c.dst.clone();
                dst[0] = i64::from(i32::MAX);
                s.write_index("dst.npy", dtype, &dst);
            });
            assert_rejected(&what("dst = i32::MAX"), &s, 2, &["dst[0] = 2147483647"]);
        }
        // int64 values beyond int32 are reported as they are, not truncated.
        let mut s = base_setup(&small_case());
        s.set("--backend", backend);
        let mut src = small_case().src;
        src[2] = 1 << 40;
        s.write_index("src.npy", I64, &src);
        assert_rejected("src = 2^40", &s, 2, &["src[2] = 1099511627776"]);
        src[2] = (1 << 32) + 1;
        s.write_index("src.npy", I64, &src);
        assert_rejected("src = 2^32 + 1", &s, 2, &["src[2] = 4294967297"]);
    }
    // The first bad position, not a later one.
    rejected("dst out of range twice", &["dst[5]"], |c, s| {
        let mut dst = c.dst.clone();
        dst[5] = 6;
        dst[7] = 9;
        s.write_index("dst.npy", I64, &dst);
    });
    let case = small_case();
    let mut s = base_setup(&case);
    let mut dst = case.dst.clone();
    dst[5] = 6;
    dst[7] = 9;
    s.write_index("dst.npy", I64, &dst);
    let outcome = s.run();
    assert!(!outcome.stderr.contains("dst[7]"), "{}", outcome.stderr);
    s.set("--n-ext", "1000");
    assert_eq!(s.run().code, Some(0), "valid with a larger --n-ext");
}

#[test]
fn bad_mappings_are_rejected() {
    for backend in HOST_BACKENDS {
        for dtype in [I32, I64] {
            let with_mapping = |mapping: &'static [i64], n_local: &'static str| {
                move |_: &Case, s: &mut Setup| {
                    s.write_index("mapping.npy", dtype, mapping);
                    s.set("--mapping", s.input("mapping.npy"))
                        .set("--n-local", n_local)
                        .set("--backend", backend);
                }
            };
            rejected(
                &format!("mapping = n_local ({backend}, {dtype:?})"),
                &["mapping[4] = 3", "n_local = 3"],
                with_mapping(&[0, 1, 2, 0, 3, 9], "3"),
            );
            rejected(
                &format!("negative mapping ({backend}, {dtype:?})"),
                &["mapping[1] = -1"],
                with_mapping(&[0, -1, 2, 0, 1, 2], "3"),
            );
            rejected(
                &format!("n_local > n_ext ({backend}, {dtype:?})"),
                &["n_local = 7 exceeds n_ext = 6"],
                with_mapping(&[0, 1, 2, 3, 4, 5], "7"),
            );
        }
    }
    rejected(
        "--mapping without --n-local",
        &["--mapping needs --n-local"],
        |_, s| {
            s.write_index("mapping.npy", I64, &[0, 1, 2, 0, 1, 2]);
            s.set("--mapping", s.input("mapping.npy"));
        },
    );
    rejected(
        "--n-local without --mapping",
        &["--n-local needs --mapping"],
        |_, s| {
            s.set("--n-local", "3");
        },
    );
}

#[test]
fn bad_flag_values_are_rejected() {
    rejected(
        "unknown split",
        &["unknown --split 'dst'", "half or src"],
        |_, s| {
            s.set("--split", "dst");
        },
    );
    rejected(
        "split is case-sensitive",
        &["unknown --split 'Half'"],
        |_, s| {
            s.set("--split", "Half");
        },
    );
    rejected("unknown backend", &["unknown --backend 'gpu'"], |_, s| {
        s.set("--backend", "gpu");
    });
    rejected("empty backend", &["unknown --backend ''"], |_, s| {
        s.set("--backend", "");
    });
    rejected(
        "unknown out dtype",
        &["unknown --out-dtype 'f32'"],
        |_, s| {
            s.set("--out-dtype", "f32");
        },
    );
}

#[test]
fn bad_output_paths_are_rejected() {
    rejected(
        "force and virial to one file",
        &["--out-force and --out-virial name the same file"],
        |_, s| {
            s.set("--out-virial", s.output("force.npy"));
        },
    );
    rejected(
        "one file spelled two ways",
        &["--out-force and --out-virial name the same file"],
        |_, s| {
            s.set("--out-virial", s.root().join("in/../out/./force.npy"));
        },
    );
    rejected(
        "frame output onto the virial",
        &["--out-virial and --out-frame-voigt name the same file"],
        |_, s| {
            s.with_frames(&Frames::Size(2));
            s.set("--out-frame-voigt", s.output("virial.npy"));
        },
    );
    rejected(
        "output is a folder",
        &["--out-force", "is a directory"],
        |_, s| {
            fs::create_dir(s.output("force.npy")).unwrap();
        },
    );
    rejected(
        "force onto an input",
        &["--g and --out-force name the same file"],
        |_, s| {
            s.set("--out-force", s.input("g.npy"));
        },
    );
    // Outputs already there stay as they were.
    let case = small_case();
    let mut s = base_setup(&case);
    s.precreate_outputs(&["force.npy"]);
    s.set("--out-virial", s.output("force.npy"));
    assert_rejected("same file, already there", &s, 2, &["name the same file"]);
}

#[test]
fn bad_frame_flags_are_rejected() {
    rejected(
        "frame size does not divide the rows",
        &[
            "--frame-size",
            "6 rows are not a whole number of frames of 4",
        ],
        |_, s| {
            s.with_frames(&Frames::Size(4));
        },
    );
    rejected("frame size 0", &["--frame-size", "frame size 0"], |_, s| {
        s.with_frames(&Frames::Size(0));
    });
    rejected(
        "frame ids too short",
        &["--frame-ids", "5 entries", "6 rows"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0, 0, 0, 1, 1],
                n_frames: 2,
                dtype: I32,
            });
        },
    );
    rejected(
        "frame id = n_frames",
        &["--frame-ids", "[2] = 3", "[0, 3)"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0, 1, 3, 2, 1, 4],
                n_frames: 3,
                dtype: I64,
            });
        },
    );
    rejected("negative frame id", &["--frame-ids", "[4] = -1"], |_, s| {
        s.with_frames(&Frames::Ids {
            ids: vec![0, 1, 2, 2, -1, 0],
            n_frames: 3,
            dtype: I32,
        });
    });
    rejected("float frame ids", &["frame_ids (", "float64"], |_, s| {
        s.with_frames(&Frames::Ids {
            ids: vec![0; 6],
            n_frames: 1,
            dtype: I64,
        });
        s.write_floats("frame_ids.npy", F64, &[6], &[0.0; 6]);
    });
    rejected(
        "--frame-ids without --n-frames",
        &["--frame-ids needs --n-frames"],
        |_, s| {
            s.write_index("frame_ids.npy", I64, &[0; 6]);
            s.set("--frame-ids", s.input("frame_ids.npy"));
        },
    );
    rejected(
        "--n-frames alone",
        &["--n-frames needs --frame-ids"],
        |_, s| {
            s.set("--n-frames", "2");
        },
    );
    rejected(
        "--frame-size with --n-frames",
        &["--n-frames goes with --frame-ids"],
        |_, s| {
            s.set("--frame-size", "3").set("--n-frames", "2");
        },
    );
    rejected(
        "both kinds of frames",
        &["--frame-size and --frame-ids exclude each other"],
        |_, s| {
            s.with_frames(&Frames::Ids {
                ids: vec![0; 6],
                n_frames: 1,
                dtype: I64,
            });
            s.set("--frame-size", "3");
        },
    );
    rejected(
        "frame output without frames",
        &["--out-frame-voigt needs --frame-size or --frame-ids"],
        |_, s| {
            s.set("--out-frame-voigt", s.output("frame_voigt.npy"));
        },
    );
    rejected(
        "frame outputs without frames",
        &["--out-frame-virial needs --frame-size or --frame-ids"],
        |_, s| {
            s.with_frames(&Frames::Size(2)).unset("--frame-size");
        },
    );
}

/// Flags clap cannot parse (a missing output, a number that is not one, an
/// unknown or repeated flag): one line `hipkern force: error: ...` naming
/// the flag (main.rs shortens clap's usage message), exit status 2, and
/// nothing written.
#[test]
fn unparsable_flags_are_usage_errors() {
    let cases: [(&str, &str, SetupEdit); 5] = [
        ("no --out-virial", "--out-virial", &|s| {
            s.unset("--out-virial");
        }),
        ("--n-ext not a number", "--n-ext", &|s| {
            s.set("--n-ext", "six");
        }),
        ("negative --n-ext", "-1", &|s| {
            s.set("--n-ext", "-1");
        }),
        ("unknown flag", "--virial-split", &|s| {
            s.set("--virial-split", "half");
        }),
        ("--split twice", "--split", &|s| {
            s.set("--split", "src");
            s.flags.push(("--split".into(), "half".into()));
        }),
    ];
    for (what, needle, edit) in cases {
        let mut s = base_setup(&small_case());
        edit(&mut s);
        assert_rejected(what, &s, 2, &[needle]);
    }
}

/// An error found after the assembly (the frame grouping) still leaves
/// outputs from an earlier run byte for byte as they were.
#[test]
fn a_late_error_leaves_earlier_outputs_untouched() {
    let outputs = [
        "force.npy",
        "virial.npy",
        "frame_virial.npy",
        "frame_voigt.npy",
    ];
    for backend in HOST_BACKENDS {
        let case = small_case();
        let mut s = base_setup(&case);
        s.set("--backend", backend).with_frames(&Frames::Size(4));
        s.precreate_outputs(&outputs);
        assert_rejected(
            &format!("frames of 4 over 6 rows ({backend}), outputs already there"),
            &s,
            2,
            &["not a whole number of frames"],
        );
        s.write_index("dst.npy", I64, &[0, 1, 2, 3, 4, 6, 0, 0]);
        assert_rejected(
            &format!("dst out of range ({backend}), outputs already there"),
            &s,
            2,
            &["dst[5] = 6"],
        );
    }
}

/// An output that cannot be written (its folder is missing) is the
/// environment's failure (exit status 1), and the outputs that could be
/// written are not put in place either.
#[test]
fn an_unwritable_output_changes_nothing() {
    let case = small_case();
    let mut s = base_setup(&case);
    s.with_frames(&Frames::Size(3));
    s.set(
        "--out-frame-voigt",
        s.root().join("out/missing/frame_voigt.npy"),
    );
    // A folder that does not exist is the caller's path (exit 2), found
    // when the outputs are planned, before any input is read.
    let missing = ["frame_voigt.npy", "does not exist"];
    assert_rejected("last output's folder missing", &s, 2, &missing);
    s.precreate_outputs(&["force.npy", "virial.npy", "frame_virial.npy"]);
    assert_rejected(
        "last output's folder missing, others there",
        &s,
        2,
        &missing,
    );
    s.set("--out-force", s.root().join("missing/force.npy"));
    assert_rejected("first output's folder missing", &s, 2, &["force.npy"]);
}
