//! Running `hipkern force`: the temporary folder of inputs and outputs,
//! the flags, the outcome's checks, and a rejected run leaving every file
//! as it was.
use super::cases::{Case, Frames};
use super::npy::{npy_bytes, Data, Dtype, Layout, I64};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

// ---- running the program ------------------------------------------------

pub fn hipkern() -> PathBuf {
    std::env::var_os("HIPKERN_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hipkern")))
}

pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn assert_success(&self, what: &str) {
        assert_eq!(
            self.code,
            Some(0),
            "{what}: exit status; stderr: {}",
            self.stderr
        );
        assert!(self.stderr.is_empty(), "{what}: stderr {:?}", self.stderr);
        assert_eq!(
            self.stdout.lines().count(),
            1,
            "{what}: stdout {:?}",
            self.stdout
        );
        assert!(
            self.stdout.starts_with("hipkern force: backend "),
            "{what}: stdout {:?}",
            self.stdout
        );
    }

    /// Exit status `code`, nothing on stdout, and on stderr exactly one line
    /// `hipkern force: error: ...` that contains each of `needles`.
    pub fn assert_failure(&self, what: &str, code: i32, needles: &[&str]) {
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit status; stderr: {:?}",
            self.stderr
        );
        assert!(self.stdout.is_empty(), "{what}: stdout {:?}", self.stdout);
        let one_line = self
            .stderr
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("{what}: stderr does not end a line: {:?}", self.stderr));
        assert!(
            !one_line.contains(['\n', '\r']),
            "{what}: stderr is not one line: {:?}",
            self.stderr
        );
        assert!(
            one_line.starts_with("hipkern force: error: "),
            "{what}: stderr {one_line:?}"
        );
        for needle in needles {
            assert!(
                one_line.contains(needle),
                "{what}: the error should mention {needle:?}: {one_line:?}"
            );
        }
    }
}

/// How the input files of a case are written.
#[derive(Clone, Copy, Debug)]
pub struct Format {
    pub src: Dtype,
    pub dst: Dtype,
    pub mapping: Dtype,
    pub index_layout: Layout,
    pub g_layout: Layout,
    pub edge_vec_layout: Layout,
}

impl Format {
    /// Every index array in `dtype`, every file little-endian in C order.
    pub fn indices(dtype: Dtype) -> Format {
        Format {
            src: dtype,
            dst: dtype,
            mapping: dtype,
            index_layout: Layout::default(),
            g_layout: Layout::default(),
            edge_vec_layout: Layout::default(),
        }
    }
}

/// A temporary folder (inputs in `in/`, outputs in `out/`) and the flags of
/// one `hipkern force` command; `set` replaces a flag given before.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub flags: Vec<(String, OsString)>,
}

impl Setup {
    pub fn new() -> Setup {
        let dir = tempfile::tempdir().expect("temporary folder");
        fs::create_dir(dir.path().join("in")).unwrap();
        fs::create_dir(dir.path().join("out")).unwrap();
        Setup {
            dir,
            flags: Vec::new(),
        }
    }

    /// The case's inputs written in `format`, with the flags naming them and
    /// `out/force.npy`, `out/virial.npy` as outputs.
    pub fn for_case(case: &Case, format: Format) -> Setup {
        let mut setup = Setup::new();
        let e = case.n_edges();
        let src = setup.write_input(
            "src.npy",
            &npy_bytes(format.src, &[e], Data::Int(&case.src), format.index_layout),
        );
        let dst = setup.write_input(
            "dst.npy",
            &npy_bytes(format.dst, &[e], Data::Int(&case.dst), format.index_layout),
        );
        let g = setup.write_input(
            "g.npy",
            &npy_bytes(
                case.precision,
                &[e, 3],
                Data::Float(&case.g),
                format.g_layout,
            ),
        );
        let edge_vec = setup.write_input(
            "edge_vec.npy",
            &npy_bytes(
                case.precision,
                &[e, 3],
                Data::Float(&case.edge_vec),
                format.edge_vec_layout,
            ),
        );
        setup
            .set("--src", src)
            .set("--dst", dst)
            .set("--g", g)
            .set("--edge-vec", edge_vec)
            .set("--n-ext", case.n_ext.to_string());
        if let Some(gh) = &case.ghosts {
            let mapping = setup.write_input(
                "mapping.npy",
                &npy_bytes(
                    format.mapping,
                    &[case.n_ext],
                    Data::Int(&gh.mapping),
                    format.index_layout,
                ),
            );
            setup
                .set("--mapping", mapping)
                .set("--n-local", gh.n_local.to_string());
        }
        let (force, virial) = (setup.output("force.npy"), setup.output("virial.npy"));
        setup.set("--out-force", force).set("--out-virial", virial);
        setup
    }

    /// Frame flags, and `out/frame_virial.npy`, `out/frame_voigt.npy` as outputs.
    pub fn with_frames(&mut self, frames: &Frames) -> &mut Setup {
        match frames {
            Frames::Size(s) => {
                self.set("--frame-size", s.to_string());
            }
            Frames::Ids {
                ids,
                n_frames,
                dtype,
            } => {
                let path = self.write_input(
                    "frame_ids.npy",
                    &npy_bytes(*dtype, &[ids.len()], Data::Int(ids), Layout::default()),
                );
                self.set("--frame-ids", path)
                    .set("--n-frames", n_frames.to_string());
            }
        }
        let (fv, fvv) = (
            self.output("frame_virial.npy"),
            self.output("frame_voigt.npy"),
        );
        self.set("--out-frame-virial", fv)
            .set("--out-frame-voigt", fvv)
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }
    pub fn input(&self, name: &str) -> PathBuf {
        self.root().join("in").join(name)
    }
    pub fn output(&self, name: &str) -> PathBuf {
        self.root().join("out").join(name)
    }

    pub fn write_input(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.input(name);
        fs::write(&path, bytes).unwrap();
        path
    }

    pub fn write_index(&self, name: &str, dtype: Dtype, values: &[i64]) {
        let bytes = npy_bytes(dtype, &[values.len()], Data::Int(values), Layout::default());
        self.write_input(name, &bytes);
    }

    pub fn write_floats(&self, name: &str, dtype: Dtype, shape: &[usize], values: &[f64]) {
        let bytes = npy_bytes(dtype, shape, Data::Float(values), Layout::default());
        self.write_input(name, &bytes);
    }

    pub fn set(&mut self, flag: &str, value: impl Into<OsString>) -> &mut Setup {
        let value = value.into();
        match self.flags.iter_mut().find(|(f, _)| f == flag) {
            Some(slot) => slot.1 = value,
            None => self.flags.push((flag.to_string(), value)),
        }
        self
    }

    pub fn unset(&mut self, flag: &str) -> &mut Setup {
        self.flags.retain(|(f, _)| f != flag);
        self
    }

    pub fn run(&self) -> Outcome {
        let out = Command::new(hipkern())
            .arg("force")
            .args(
                self.flags
                    .iter()
                    .flat_map(|(f, v)| [OsString::from(f), v.clone()]),
            )
            .output()
            .expect("run hipkern");
        Outcome {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Every file in `out/`, by name.
    pub fn out_files(&self) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(self.root().join("out"))
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                (name, fs::read(entry.path()).unwrap())
            })
            .collect()
    }

    /// Output files with known contents, as an earlier run might have left.
    pub fn precreate_outputs(&self, names: &[&str]) {
        for name in names {
            fs::write(self.output(name), format!("earlier contents of {name}\n")).unwrap();
        }
    }
}

/// Every file and folder under `root` with its contents (None for folders).
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                pending.push(path);
            } else {
                out.insert(rel, Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// A change to a setup's flags (or files).
pub type SetupEdit<'a> = &'a dyn Fn(&mut Setup);
/// A change to a setup's input files.
pub type InputEdit<'a> = &'a dyn Fn(&Setup);

/// The small case with int64 indices, run with --backend cpu.
pub fn base_setup(case: &Case) -> Setup {
    let mut setup = Setup::for_case(case, Format::indices(I64));
    setup.set("--backend", "cpu");
    setup
}

/// Runs `setup`, which must fail with exit status `code` and one error line
/// containing `needles`, leaving every file and folder under its temporary
/// folder as it was: no output created or changed, no temporary file left.
pub fn assert_rejected(what: &str, setup: &Setup, code: i32, needles: &[&str]) {
    let before = snapshot(setup.root());
    let outcome = setup.run();
    outcome.assert_failure(what, code, needles);
    let after = snapshot(setup.root());
    let changed: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .collect();
    assert!(
        changed.is_empty(),
        "{what}: files created, changed or removed: {changed:?}"
    );
}
