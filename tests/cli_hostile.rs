//! The program against a hostile user (issue 28's classes): outputs that
//! are not regular files, one file named twice, sizes beyond the machine,
//! unbounded work, results that are not finite, a closed or full stdout,
//! machine faults, side effects of a failed command, signals, a corrupt
//! cache entry. Each case checks the exit status, the one error line and
//! that the folder is as it was. The program run is `HIPKERN_BIN` when
//! set, else the one cargo built with these tests.
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> OsString {
    std::env::var_os("HIPKERN_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_hipkern").into())
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run hipkern")
}

/// Every entry of `dir` (recursively) with its bytes or its kind.
fn snapshot(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let t = fs::symlink_metadata(&p).unwrap().file_type();
            let what = if t.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else if t.is_file() {
                format!("{:x?}", fs::read(&p).unwrap())
            } else {
                format!("{t:?}")
            };
            all.push((p, what));
        }
    }
    all.sort();
    all
}

/// Exit status `code`, nothing on stdout, one line on stderr starting
/// `prefix: error: ` that contains every needle.
fn assert_fails(out: &Output, what: &str, code: i32, prefix: &str, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: stderr {stderr:?}");
    assert!(out.stdout.is_empty(), "{what}: stdout {:?}", out.stdout);
    assert_eq!(stderr.lines().count(), 1, "{what}: stderr {stderr:?}");
    assert!(
        stderr.starts_with(&format!("{prefix}: error: ")),
        "{what}: {stderr:?}"
    );
    for n in needles {
        assert!(
            stderr.contains(n),
            "{what}: should mention {n:?}: {stderr:?}"
        );
    }
    if code == 1 {
        assert!(
            !stderr.contains("invalid input"),
            "{what}: a machine fault is not bad input: {stderr:?}"
        );
    }
}

/// A `.npy` (format 1.0) of `descr` and `shape` holding `data`.
fn npy(path: &Path, descr: &str, shape: &[u64], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((h.len() as u16).to_le_bytes());
    bytes.extend(h.as_bytes());
    bytes.extend(data);
    fs::write(path, bytes).unwrap();
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Two edges between atoms 0 and 1 (s.npy, d.npy, g.npy, v.npy), and the
/// force flags that read them.
fn force_inputs(dir: &Path) -> Vec<&'static str> {
    let idx = |v: [i64; 2]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    npy(&dir.join("s.npy"), "<i8", &[2], &idx([0, 1]));
    npy(&dir.join("d.npy"), "<i8", &[2], &idx([1, 0]));
    npy(
        &dir.join("g.npy"),
        "<f8",
        &[2, 3],
        &f64s(&[0.5, -1.0, 2.0, 1.5, 0.25, -3.0]),
    );
    npy(
        &dir.join("v.npy"),
        "<f8",
        &[2, 3],
        &f64s(&[1.0, 2.0, 3.0, -1.0, 0.5, 2.0]),
    );
    vec![
        "force",
        "--src",
        "s.npy",
        "--dst",
        "d.npy",
        "--g",
        "g.npy",
        "--edge-vec",
        "v.npy",
        "--n-ext",
        "2",
        "--backend",
        "cpu",
    ]
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

/// What is run, its arguments, the exit status, the error's prefix and
/// what the message must contain.
type SizeCase<'a> = (&'a str, Vec<&'a str>, i32, &'a str, Vec<&'a str>);

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

const TABLE: [&str; 8] = [
    "nearfield",
    "build",
    "--dim",
    "2",
    "--q",
    "2",
    "--kernel",
    "laplace",
];

/// `nearfield list1` of a small uniform tree on the CPU.
const LIST1: [&str; 12] = [
    "nearfield",
    "list1",
    "--dim",
    "2",
    "--q",
    "2",
    "--kernel",
    "laplace",
    "--tree",
    "uniform:1",
    "--backend",
    "cpu",
];

// ---- 1. outputs that are not regular files --------------------------------

#[test]
fn outputs_that_are_not_regular_files_are_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let force = force_inputs(d);
    mkfifo(&d.join("fifo"));
    std::os::unix::fs::symlink("/dev/null", d.join("null-link.npy")).unwrap();
    let before = snapshot(d);
    let cases: Vec<(&str, Vec<&str>, &str, &str)> = vec![
        (
            "force to /dev/null",
            with(
                &force,
                &["--out-force", "/dev/null", "--out-virial", "w.npy"],
            ),
            "hipkern force",
            "a character device",
        ),
        (
            "force through a link to /dev/null",
            with(
                &force,
                &["--out-force", "f.npy", "--out-virial", "null-link.npy"],
            ),
            "hipkern force",
            "a character device",
        ),
        (
            "build to a FIFO",
            with(&TABLE, &["--out", "fifo"]),
            "hipkern nearfield",
            "FIFO",
        ),
        (
            "list1 to a FIFO",
            vec![
                "nearfield",
                "list1",
                "--dim",
                "2",
                "--q",
                "2",
                "--kernel",
                "laplace",
                "--tree",
                "uniform:1",
                "--backend",
                "cpu",
                "--out",
                "fifo",
            ],
            "hipkern nearfield",
            "FIFO",
        ),
        (
            "psf fixture to a folder",
            vec!["psf", "fixture", "dense", "--out", "."],
            "hipkern psf",
            "--out",
        ),
    ];
    for (what, args, prefix, says) in cases {
        assert_fails(&run(d, &args), what, 2, prefix, &[says]);
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
    let null = fs::metadata("/dev/null").unwrap().file_type();
    assert!(null.is_char_device(), "/dev/null is still a device");
    assert!(fs::symlink_metadata(d.join("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
}

/// Inputs (and the cache) must be regular files: `/dev/zero` would be read
/// without end, SQLite would write a journal beside `/dev/null`.
#[test]
fn inputs_that_are_not_regular_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    mkfifo(&d.join("fifo"));
    let before = snapshot(d);
    let long = format!("{}.npy", "a".repeat(300));
    let cases: Vec<(&str, Vec<&str>, &str, &str)> = vec![
        (
            "events from /dev/zero",
            vec![
                "psf",
                "replay",
                "/dev/zero",
                "--mode",
                "cpu",
                "--out",
                "i.npy",
            ],
            "hipkern psf",
            "a character device",
        ),
        (
            "events from a FIFO",
            vec!["psf", "replay", "fifo", "--mode", "cpu", "--out", "i.npy"],
            "hipkern psf",
            "FIFO",
        ),
        (
            "cache /dev/null",
            with(&TABLE, &["--cache", "/dev/null", "--out", "t.npz"]),
            "hipkern nearfield",
            "a character device",
        ),
        (
            "a file name longer than a folder entry",
            vec!["psf", "fixture", "dense", "--out", long.as_str()],
            "hipkern psf",
            "255",
        ),
    ];
    for (what, args, prefix, says) in cases {
        let start = Instant::now();
        assert_fails(&run(d, &args), what, 2, prefix, &[says]);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: not refused up front"
        );
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
    assert!(!Path::new("/dev/null-journal").exists());
}

#[test]
fn an_output_through_a_link_replaces_the_file_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let force = force_inputs(d);
    fs::create_dir(d.join("real")).unwrap();
    fs::write(d.join("real/f.npy"), "old").unwrap();
    std::os::unix::fs::symlink("real/f.npy", d.join("f.npy")).unwrap();
    let out = run(
        d,
        &with(&force, &["--out-force", "f.npy", "--out-virial", "w.npy"]),
    );
    assert!(
        out.status.success(),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fs::symlink_metadata(d.join("f.npy"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read(d.join("real/f.npy"))
        .unwrap()
        .starts_with(b"\x93NUMPY"));
}

// ---- 3. sizes beyond the file or the machine ------------------------------

#[test]
fn sizes_are_checked_against_the_file_and_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let force = force_inputs(d);
    // A header claiming 2^40 rows over two rows of data.
    npy(&d.join("ev.npy"), "<f8", &[1 << 40, 7], &f64s(&[1.0; 14]));
    let before = snapshot(d);
    let empty = |name: &str, descr: &str, shape: &[u64]| npy(&d.join(name), descr, shape, &[]);
    empty("s0.npy", "<i8", &[0]);
    empty("g0.npy", "<f8", &[0, 3]);
    let before_empty = snapshot(d);
    let no_edges = [
        "force",
        "--src",
        "s0.npy",
        "--dst",
        "s0.npy",
        "--g",
        "g0.npy",
        "--edge-vec",
        "g0.npy",
        "--backend",
        "cpu",
        "--out-force",
        "f.npy",
        "--out-virial",
        "w.npy",
    ];
    let cases: Vec<SizeCase> = vec![
        (
            "header beyond the file",
            vec!["psf", "replay", "ev.npy", "--mode", "cpu", "--out", "i.npy"],
            2,
            "hipkern psf",
            vec!["1099511627776", "the file holds"],
        ),
        (
            "--n-ext 2^31 - 1 with no edges",
            with(&no_edges, &["--n-ext", "2147483647"]),
            1,
            "hipkern force",
            vec!["out of host memory", "2147483647 rows", "bytes"],
        ),
        (
            "--n-frames 2^62",
            with(
                &force,
                &[
                    "--frame-ids",
                    "s.npy",
                    "--n-frames",
                    "4611686018427387904",
                    "--out-force",
                    "f.npy",
                    "--out-virial",
                    "w.npy",
                ],
            ),
            1,
            "hipkern force",
            vec!["out of host memory", "--n-frames", "2^64 bytes"],
        ),
        (
            "an input that is a device",
            with(
                &force,
                &[
                    "--mapping",
                    "/dev/zero",
                    "--n-local",
                    "2",
                    "--out-force",
                    "f.npy",
                    "--out-virial",
                    "w.npy",
                ],
            ),
            2,
            "hipkern force",
            vec!["/dev/zero", "not a regular file"],
        ),
    ];
    for (what, args, code, prefix, needles) in cases {
        assert_fails(&run(d, &args), what, code, prefix, &needles);
        let same = snapshot(d) == before || snapshot(d) == before_empty;
        assert!(same, "{what}: the folder changed");
    }
}

/// `--phases 1024`, the documented maximum, needs 75.9 GB for the cache:
/// an error naming the bytes on a machine without them, never an abort.
#[test]
fn a_cache_beyond_the_machine_is_an_error() {
    let needed = hipkern::psf::PsfCache::bytes_for(1024).unwrap();
    match hipkern::host_memory::available_bytes() {
        Some(a) if a < needed => {}
        _ => return, // this machine could build it: nothing to show here
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = run(d, &["psf", "fixture", "ordinary", "--out", "ev.bin"]);
    assert!(out.status.success());
    let before = snapshot(d);
    let args = [
        "psf", "replay", "ev.bin", "--mode", "cpu", "--phases", "1024", "--out", "i.npy",
    ];
    let needles = ["out of host memory", &needed.to_string()];
    assert_fails(&run(d, &args), "--phases 1024", 1, "hipkern psf", &needles);
    assert!(snapshot(d) == before);
}

// ---- 4. unbounded work ----------------------------------------------------

#[test]
fn work_that_cannot_finish_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(run(d, &["psf", "fixture", "ordinary", "--out", "ev.bin"])
        .status
        .success());
    let before = snapshot(d);
    let cases: Vec<(&str, Vec<&str>, &str, Vec<&str>)> = vec![
        (
            "--threads 2^40",
            vec![
                "psf",
                "replay",
                "ev.bin",
                "--mode",
                "cpu",
                "--threads",
                "1099511627776",
                "--out",
                "i.npy",
            ],
            "hipkern psf",
            vec!["--threads", "1024"],
        ),
        (
            "build 3D q 64",
            vec![
                "nearfield",
                "build",
                "--dim",
                "3",
                "--q",
                "64",
                "--kernel",
                "laplace",
                "--out",
                "t.npz",
            ],
            "hipkern nearfield",
            vec!["q ≤ 15", "entries"],
        ),
        (
            "list1 3D q 64",
            vec![
                "nearfield",
                "list1",
                "--dim",
                "3",
                "--q",
                "64",
                "--kernel",
                "laplace",
                "--tree",
                "uniform:1",
                "--backend",
                "cpu",
            ],
            "hipkern nearfield",
            vec!["q ≤ 15"],
        ),
    ];
    for (what, args, prefix, needles) in cases {
        let start = Instant::now();
        assert_fails(&run(d, &args), what, 2, prefix, &needles);
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what}: not refused up front"
        );
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
}

// ---- 5. results that are not finite ---------------------------------------

#[test]
fn inputs_whose_results_are_not_finite_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(run(d, &["psf", "fixture", "ordinary", "--out", "ev.bin"])
        .status
        .success());
    let before = snapshot(d);
    let entry = |extra: &[&'static str]| -> Vec<&'static str> {
        let base = [
            "nearfield",
            "entry",
            "--dim",
            "2",
            "--q",
            "2",
            "--case",
            "0,0",
            "--source-mode",
            "0",
            "--target-point",
            "0",
        ];
        with(&base, extra)
    };
    let cases: Vec<(&str, Vec<&str>, &str, Vec<&str>)> = vec![
        (
            "build --extent 1e150",
            with(&TABLE, &["--extent", "1e150", "--out", "t.npz"]),
            "hipkern nearfield",
            vec!["1e150", "1e50"],
        ),
        (
            "build --extent 1e-200",
            with(&TABLE, &["--extent", "1e-200", "--out", "t.npz"]),
            "hipkern nearfield",
            vec!["1e-50"],
        ),
        (
            "entry --extent 1e150",
            entry(&["--kernel", "laplace", "--extent", "1e150"]),
            "hipkern nearfield",
            vec!["1e50"],
        ),
        (
            "yukawa λ 1e-300",
            entry(&["--kernel", "yukawa", "--lambda", "1e-300"]),
            "hipkern nearfield",
            vec!["λ"],
        ),
        (
            "direction 1e308",
            entry(&["--kernel", "laplace", "--derivative", "direction:1e308,1"]),
            "hipkern nearfield",
            vec!["1e308"],
        ),
        (
            "--fwhm 1e-200",
            vec![
                "psf", "replay", "ev.bin", "--mode", "cpu", "--fwhm", "1e-200", "--out", "i.npy",
            ],
            "hipkern psf",
            vec!["fwhm", "0.5"],
        ),
    ];
    for (what, args, prefix, needles) in cases {
        assert_fails(&run(d, &args), what, 2, prefix, &needles);
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
}

// ---- 3. (stdout) a closed pipe, a full disk ---------------------------------

#[test]
fn a_closed_or_full_stdout_is_no_panic() {
    let dir = tempfile::tempdir().unwrap();
    let stats = [
        "nearfield",
        "stats",
        "--dim",
        "2",
        "--q",
        "2",
        "--kernel",
        "laplace",
    ];
    for args in [&stats[..], &["info"][..]] {
        // A pipe whose reading end is closed before the program writes.
        // Close-on-exec: a program another test starts meanwhile must not
        // inherit the reading end and keep the pipe open (it made this
        // test fail now and then: the write succeeded, exit 0).
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe2(2) writes.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fds[0] is the pipe's reading end, owned here, closed once.
        unsafe { libc::close(fds[0]) };
        // SAFETY: fds[1] is an open descriptor owned by nothing else.
        let writer = unsafe { <fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
        let out = Command::new(bin())
            .current_dir(dir.path())
            .args(args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr:?}");
        assert!(stderr.is_empty(), "{args:?}: {stderr:?}");

        let full = fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(bin())
            .current_dir(dir.path())
            .args(args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        let prefix = if args[0] == "info" {
            "hipkern info"
        } else {
            "hipkern nearfield"
        };
        assert_fails(&out, "stdout /dev/full", 1, prefix, &["standard output"]);
    }
}

// ---- 6. one file named twice -----------------------------------------------

#[test]
fn one_file_named_twice_is_refused_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(run(d, &with(&TABLE, &["--cache", "X.db"])).status.success());
    fs::write(d.join("D.npy"), "density").unwrap();
    let force = force_inputs(d);
    let before = snapshot(d);
    let cases: Vec<(&str, Vec<&str>, &str)> = vec![
        (
            "build --cache X --out X",
            with(&TABLE, &["--cache", "X.db", "--out", "X.db"]),
            "--cache and --out",
        ),
        (
            "build --cache X --out ./X (new cache)",
            with(&TABLE, &["--cache", "new.db", "--out", "./new.db"]),
            "--cache and --out",
        ),
        (
            "list1 --out S --tree-out S",
            with(&LIST1, &["--tree-out", "S", "--out", "S"]),
            "--tree-out and --out",
        ),
        (
            "list1 --density D --out D",
            with(&LIST1, &["--density", "D.npy", "--out", "D.npy"]),
            "--density and --out",
        ),
        (
            "force --g G --out-virial G",
            with(&force, &["--out-force", "f.npy", "--out-virial", "g.npy"]),
            "--g and --out-virial",
        ),
    ];
    for (what, args, needle) in cases {
        let prefix = if args[0] == "force" {
            "hipkern force"
        } else {
            "hipkern nearfield"
        };
        assert_fails(&run(d, &args), what, 2, prefix, &[needle, "same file"]);
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
}

// ---- 7 and 8. machine faults; no side effects of a failed command ---------

#[test]
fn a_failed_command_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let before = snapshot(d);
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "build: new cache, --out in a missing folder",
            with(&TABLE, &["--cache", "new.db", "--out", "nodir/x.npz"]),
        ),
        (
            "list1: --tree-out, then --out in a missing folder",
            with(&LIST1, &["--tree-out", "t.npz", "--out", "nodir/u.npy"]),
        ),
    ];
    for (what, args) in cases {
        assert_fails(
            &run(d, &args),
            what,
            2,
            "hipkern nearfield",
            &["nodir", "does not exist"],
        );
        assert!(snapshot(d) == before, "{what}: the folder changed");
    }
}

#[test]
fn a_folder_that_cannot_be_made_is_the_machines_failure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // /proc refuses new folders, for root too.
    let args = [
        "demo",
        "--backend",
        "cpu",
        "--out-dir",
        "/proc/hipkern-demo",
        "--cache",
        "c.db",
    ];
    assert_fails(
        &run(d, &args),
        "demo --out-dir in /proc",
        1,
        "hipkern demo",
        &["/proc/hipkern-demo"],
    );
    let args = with(&TABLE, &["--out", "/proc/self/hipkern.npz"]);
    assert_fails(
        &run(d, &args),
        "build --out in /proc/self",
        1,
        "hipkern nearfield",
        &["/proc/self"],
    );
    assert!(snapshot(d).is_empty());
}

// ---- 2. signals --------------------------------------------------------------

/// SIGINT or SIGTERM while a command works: its temporary files are
/// removed, the earlier output stays, and the program dies of the signal.
#[test]
fn a_signal_leaves_no_temporary_file() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("t.npz"), "earlier").unwrap();
        // A build of minutes: its temporary file is reserved before it starts.
        let mut child = Command::new(bin())
            .current_dir(d)
            .args([
                "nearfield",
                "build",
                "--dim",
                "3",
                "--q",
                "4",
                "--kernel",
                "laplace",
            ])
            .args(["--out", "t.npz"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let hidden = || {
            fs::read_dir(d)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .starts_with(".hipkern-")
                })
                .count()
        };
        let start = Instant::now();
        while hidden() == 0 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the build ended before the signal"
            );
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "no temporary file appeared"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: kill(2) on the child's pid, which has not been waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(signal), "{status:?}");
        assert_eq!(hidden(), 0, "a temporary file remains");
        assert_eq!(fs::read(d.join("t.npz")).unwrap(), b"earlier");
    }
}

// ---- a corrupt cache entry --------------------------------------------------

#[test]
fn a_corrupt_cache_entry_has_a_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(run(d, &with(&TABLE, &["--cache", "c.db"])).status.success());
    let db = rusqlite::Connection::open(d.join("c.db")).unwrap();
    let n = db
        .execute("UPDATE nearfield_cache SET payload = zeroblob(64)", [])
        .unwrap();
    assert_eq!(n, 1);
    drop(db);
    let args = with(&TABLE, &["--cache", "c.db", "--out", "t.npz"]);
    // The cache's state is the machine's (exit 1), with the way out named.
    assert_fails(
        &run(d, &args),
        "corrupt entry",
        1,
        "hipkern nearfield",
        &["--rebuild"],
    );
    assert!(!d.join("t.npz").exists());
    let out = run(d, &with(&args, &["--rebuild"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(d, &args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("read from cache"));
}
