//! The one way the program writes files: an [`OutputSet`].
//!
//! A command's outputs are all-or-nothing. It goes in three steps:
//!
//! 1. **Plan**, before any input is read or any work starts: every output
//!    flag is named with [`OutputSet::output`], every input with
//!    [`OutputSet::input`] (inputs must be regular files: a device or FIFO
//!    could be read without end). An output must name a regular file or a new one
//!    in an existing folder (a directory, FIFO, device node or socket is
//!    refused: renaming a file over it would replace it); a symbolic link is
//!    followed, so the file it points to is replaced and the link kept. No
//!    two outputs, and no output and input, may be one file (compared by
//!    device and inode where the file exists, by resolved path where it
//!    does not). Each output reserves its temporary file beside its target
//!    right away (a hidden `.hipkern-<pid>-<n>.tmp` in the same folder, so
//!    the final rename stays on one file system): a folder that cannot be
//!    written fails here, before the command does anything else.
//! 2. **Stage**: [`OutputSet::stage`] writes one output to its temporary
//!    file and syncs it to disk. Targets are untouched.
//! 3. **Commit**: [`OutputSet::commit`] puts every staged file in place, in
//!    plan order. An existing target is first hard-linked to a hidden
//!    backup beside it (or, where the file system has no hard links, moved
//!    there), then the temporary file is renamed over it, so a reader sees
//!    the old file or the new one, never neither. If any step fails, every
//!    target this commit already replaced is restored from its backup (or
//!    removed, if it did not exist before), and the command fails (exit 1)
//!    naming what failed. If a restore itself fails, the backup is kept and
//!    the message says where it is: nothing is lost.
//!
//! Temporary files are removed on every error path (dropping the set
//! removes what it did not commit) and when the program is stopped by
//! SIGINT, SIGTERM or SIGHUP: [`install_signal_cleanup`] starts a thread
//! that waits for those signals, removes the live temporary files and then
//! dies of the signal as the default action would. A commit holds the same
//! lock as that thread, so a signal that arrives during a commit takes
//! effect after the commit (or its rollback) is whole.
use super::Failure;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The temporary files of this process that exist now: removed by the
/// signal thread before the process dies.
static LIVE_TEMPS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static NEXT_NAME: AtomicU64 = AtomicU64::new(0);
/// The longest file name Linux file systems take (ext4, xfs, btrfs, tmpfs).
const NAME_MAX: usize = 255;

fn live_temps() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic elsewhere must not stop the cleanup.
    LIVE_TEMPS.lock().unwrap_or_else(|e| e.into_inner())
}

fn forget_temp(live: &mut Vec<PathBuf>, path: &Path) {
    live.retain(|p| p != path);
}

/// Starts the thread that removes temporary outputs on SIGINT, SIGTERM and
/// SIGHUP and then lets the signal kill the process (so a shell sees exit
/// status 128 + signal, as for any tool). Call once, first thing in `main`.
pub fn install_signal_cleanup() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        // Without the handler the signals keep their default action: the
        // program still stops, only a temporary file may remain.
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let live = live_temps();
            for p in live.iter() {
                let _ = fs::remove_file(p);
            }
            // Dies of the signal with the lock held: no commit can start.
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
}

/// A fresh hidden name in `dir`, made of characters no tool reads specially
/// (cfitsio parses `[`, `(`, `!` and `.gz` in file names).
fn hidden_sibling(dir: &Path, suffix: &str) -> PathBuf {
    let n = NEXT_NAME.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".hipkern-{}-{n}.{suffix}", std::process::id()))
}

/// What a path names on disk, for the same-file checks: the file's device
/// and inode where it exists, and the path with its folder resolved.
#[derive(Clone, Debug)]
struct Identity {
    inode: Option<(u64, u64)>,
    resolved: PathBuf,
}

impl Identity {
    fn same_file(&self, other: &Identity) -> bool {
        match (self.inode, other.inode) {
            (Some(a), Some(b)) => a == b,
            _ => self.resolved == other.resolved,
        }
    }
}

/// The kind of a file that is not a regular file, in words.
fn kind_of(file_type: fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO (named pipe)"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The folder `path` is in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Where `path` lands once symbolic links are followed, whether that file
/// exists, and its identity. `flag` names the path in messages.
fn resolve(flag: &str, path: &Path) -> Result<(PathBuf, Identity, bool), Failure> {
    let shown = || format!("{flag} {}", path.display());
    let name = match path.file_name() {
        Some(n) if !path.as_os_str().to_string_lossy().ends_with('/') => n.to_owned(),
        _ => return Err(Failure::bad_input(format!("{} names no file", shown()))),
    };
    if name.len() > NAME_MAX {
        return Err(Failure::bad_input(format!(
            "{}: the file name is {} bytes long, more than the {NAME_MAX} a folder entry holds",
            shown(),
            name.len()
        )));
    }
    match fs::metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_file() {
                return Err(Failure::bad_input(format!(
                    "{} is {}, not a regular file: an output is written to a new file and \
                     renamed into place, which would replace it; name a regular file",
                    shown(),
                    kind_of(meta.file_type())
                )));
            }
            let target = fs::canonicalize(path).map_err(|e| {
                Failure::environment(format!("{}: cannot resolve its path: {e}", shown()))
            })?;
            let identity = Identity {
                inode: Some((meta.dev(), meta.ino())),
                resolved: target.clone(),
            };
            Ok((target, identity, true))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(Failure::bad_input(format!(
                    "{} is a symbolic link to a file that does not exist; name the file itself",
                    shown()
                )));
            }
            let folder = folder_of(path);
            match fs::metadata(folder) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Failure::bad_input(format!(
                        "{}: {} is not a folder",
                        shown(),
                        folder.display()
                    )))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(Failure::bad_input(format!(
                        "{}: the folder {} does not exist",
                        shown(),
                        folder.display()
                    )))
                }
                Err(e) => {
                    return Err(Failure::environment(format!(
                        "{}: cannot inspect the folder {}: {e}",
                        shown(),
                        folder.display()
                    )))
                }
            }
            let folder = fs::canonicalize(folder).map_err(|e| {
                Failure::environment(format!(
                    "{}: cannot resolve the folder {}: {e}",
                    shown(),
                    folder.display()
                ))
            })?;
            let target = folder.join(name);
            Ok((
                target.clone(),
                Identity {
                    inode: None,
                    resolved: target,
                },
                false,
            ))
        }
        Err(e) => Err(Failure::environment(format!(
            "{}: cannot inspect it: {e}",
            shown()
        ))),
    }
}

/// An output of the set (index into its plan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputId(usize);

struct Planned {
    flag: String,
    /// As the user gave it (for messages).
    shown: PathBuf,
    /// Where it lands (symbolic links followed).
    target: PathBuf,
    identity: Identity,
    /// The reserved temporary file; `None` once committed.
    temp: Option<PathBuf>,
    staged: bool,
}

impl Planned {
    fn name(&self) -> String {
        format!("{} {}", self.flag, self.shown.display())
    }
}

/// A command's inputs and outputs; see the module docs.
#[derive(Default)]
pub struct OutputSet {
    inputs: Vec<(String, Identity)>,
    outputs: Vec<Planned>,
}

impl OutputSet {
    pub fn new() -> OutputSet {
        OutputSet::default()
    }

    /// Names a file the command reads (or, for a cache, updates in place),
    /// so that no output may be it. A path that does not exist (yet) is
    /// compared by its resolved path.
    pub fn input(&mut self, flag: &str, path: &Path) -> Result<(), Failure> {
        let identity = match fs::metadata(path) {
            Ok(meta) if !meta.file_type().is_file() => {
                // A device or FIFO could be read forever (or, for a cache,
                // written to): inputs are regular files.
                return Err(Failure::bad_input(format!(
                    "{flag} {} is {}, not a regular file; give the file itself",
                    path.display(),
                    kind_of(meta.file_type())
                )));
            }
            Ok(meta) => Identity {
                inode: Some((meta.dev(), meta.ino())),
                resolved: fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
            },
            Err(_) => {
                let folder = fs::canonicalize(folder_of(path))
                    .unwrap_or_else(|_| folder_of(path).to_path_buf());
                Identity {
                    inode: None,
                    resolved: folder.join(path.file_name().unwrap_or_default()),
                }
            }
        };
        if let Some(out) = self
            .outputs
            .iter()
            .find(|o| o.identity.same_file(&identity))
        {
            return Err(same_file(&out.flag, flag, path));
        }
        self.inputs.push((flag.to_string(), identity));
        Ok(())
    }

    /// Plans an output and reserves its temporary file (module docs, step 1).
    pub fn output(&mut self, flag: &str, path: &Path) -> Result<OutputId, Failure> {
        let (target, identity, _) = resolve(flag, path)?;
        for (in_flag, in_identity) in &self.inputs {
            if in_identity.same_file(&identity) {
                return Err(same_file(in_flag, flag, path));
            }
        }
        if let Some(out) = self
            .outputs
            .iter()
            .find(|o| o.identity.same_file(&identity))
        {
            return Err(same_file(&out.flag, flag, path));
        }
        let temp = hidden_sibling(folder_of(&target), "tmp");
        let mut live = live_temps();
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| {
                Failure::environment(format!(
                    "{flag} {}: cannot create a file in the folder {}: {e}",
                    path.display(),
                    folder_of(&target).display()
                ))
            })?;
        live.push(temp.clone());
        self.outputs.push(Planned {
            flag: flag.to_string(),
            shown: path.to_path_buf(),
            target,
            identity,
            temp: Some(temp),
            staged: false,
        });
        Ok(OutputId(self.outputs.len() - 1))
    }

    /// Writes output `id` through a buffered writer on its temporary file,
    /// then syncs it to disk.
    pub fn stage(
        &mut self,
        id: OutputId,
        write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
    ) -> Result<(), Failure> {
        let out = &self.outputs[id.0];
        let temp = out.temp.clone().expect("an output is staged before commit");
        let result = (|| -> io::Result<()> {
            let file = OpenOptions::new().write(true).truncate(true).open(&temp)?;
            let mut writer = BufWriter::new(file);
            write(&mut writer)?;
            writer.flush()?;
            let file = writer.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()
        })();
        self.finish_stage(id, result.map_err(|e| e.to_string()))
    }

    /// Writes output `id` with a writer that takes a path and creates the
    /// file itself (cfitsio): it gets the temporary path, which does not
    /// exist when it is called. The file is then synced to disk.
    pub fn stage_at_path(
        &mut self,
        id: OutputId,
        write: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<(), Failure> {
        let out = &self.outputs[id.0];
        let temp = out.temp.clone().expect("an output is staged before commit");
        let result = fs::remove_file(&temp)
            .map_err(|e| e.to_string())
            .and_then(|()| write(&temp))
            .and_then(|()| {
                File::open(&temp)
                    .and_then(|f| f.sync_all())
                    .map_err(|e| e.to_string())
            });
        self.finish_stage(id, result)
    }

    fn finish_stage(&mut self, id: OutputId, result: Result<(), String>) -> Result<(), Failure> {
        let out = &mut self.outputs[id.0];
        match result {
            Ok(()) => {
                out.staged = true;
                Ok(())
            }
            Err(e) => Err(Failure::environment(format!(
                "cannot write {}: {e}",
                out.name()
            ))),
        }
    }

    /// Puts every staged output in place, all or none (module docs, step 3).
    /// Every planned output must have been staged.
    pub fn commit(mut self) -> Result<(), Failure> {
        if let Some(out) = self.outputs.iter().find(|o| !o.staged) {
            return Err(Failure::environment(format!(
                "internal error: {} was planned but not written",
                out.name()
            )));
        }
        let mut live = live_temps();
        let mut done: Vec<Replaced> = Vec::new();
        for i in 0..self.outputs.len() {
            match replace(&self.outputs[i]) {
                Ok(r) => {
                    let temp = self.outputs[i]
                        .temp
                        .take()
                        .expect("staged outputs have a temp");
                    forget_temp(&mut live, &temp);
                    done.push(r);
                }
                Err(e) => {
                    let restore = roll_back(&done);
                    return Err(Failure::environment(format!(
                        "cannot put {} in place: {e}; {}",
                        self.outputs[i].name(),
                        restore
                    )));
                }
            }
        }
        for r in &done {
            if let Some(b) = &r.backup {
                let _ = fs::remove_file(b);
            }
            // The renames on disk, not only in the page cache.
            if let Ok(dir) = File::open(folder_of(&r.target)) {
                let _ = dir.sync_all();
            }
        }
        Ok(())
    }
}

fn same_file(first: &str, flag: &str, path: &Path) -> Failure {
    Failure::bad_input(format!(
        "{first} and {flag} name the same file {}",
        path.display()
    ))
}

impl Drop for OutputSet {
    /// Removes the temporary files of every output not committed.
    fn drop(&mut self) {
        let mut live = live_temps();
        for out in &mut self.outputs {
            if let Some(t) = out.temp.take() {
                let _ = fs::remove_file(&t);
                forget_temp(&mut live, &t);
            }
        }
    }
}

/// One target this commit put in place: where, and the old file's backup
/// (`None`: there was no old file).
struct Replaced {
    target: PathBuf,
    shown: String,
    backup: Option<PathBuf>,
}

/// Puts one staged output in place: the old file (if any) kept as a hidden
/// backup, then the temporary file renamed over the target.
fn replace(out: &Planned) -> io::Result<Replaced> {
    let temp = out.temp.as_ref().expect("staged outputs have a temp");
    let backup = match fs::symlink_metadata(&out.target) {
        Ok(meta) if meta.file_type().is_file() => {
            let backup = hidden_sibling(folder_of(&out.target), "bak");
            // A hard link keeps the target in place until the rename; a
            // file system without links gets a move, and the target is
            // absent until the rename below (restored if that fails).
            if fs::hard_link(&out.target, &backup).is_err() {
                fs::rename(&out.target, &backup)?;
            }
            Some(backup)
        }
        Ok(meta) => {
            return Err(io::Error::other(format!(
                "{} became {} after the command started",
                out.target.display(),
                kind_of(meta.file_type())
            )))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if let Err(e) = fs::rename(temp, &out.target) {
        if let Some(b) = &backup {
            // Undo the backup: the target is as it was.
            if fs::symlink_metadata(&out.target).is_ok() {
                let _ = fs::remove_file(b);
            } else {
                let _ = fs::rename(b, &out.target);
            }
        }
        return Err(e);
    }
    Ok(Replaced {
        target: out.target.clone(),
        shown: out.name(),
        backup,
    })
}

/// Restores the targets in `done`, last first; says what happened.
fn roll_back(done: &[Replaced]) -> String {
    if done.is_empty() {
        return "no output was replaced".to_string();
    }
    let mut lost = Vec::new();
    for r in done.iter().rev() {
        let result = match &r.backup {
            Some(b) => fs::rename(b, &r.target),
            None => fs::remove_file(&r.target),
        };
        if let Err(e) = result {
            lost.push(match &r.backup {
                Some(b) => format!(
                    "{} could not be restored ({e}): its old content is in {}",
                    r.shown,
                    b.display()
                ),
                None => format!("{} could not be removed ({e})", r.shown),
            });
        }
    }
    let names: Vec<&str> = done.iter().map(|r| r.shown.as_str()).collect();
    if lost.is_empty() {
        format!(
            "the outputs already replaced were restored ({})",
            names.join(", ")
        )
    } else {
        format!(
            "restoring the outputs already replaced failed: {}",
            lost.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_text(text: &'static str) -> impl FnOnce(&mut BufWriter<File>) -> io::Result<()> {
        move |w: &mut BufWriter<File>| w.write_all(text.as_bytes())
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_set_is_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        fs::write(&a, "old a").unwrap();
        let mut set = OutputSet::new();
        let ia = set.output("--a", &a).unwrap();
        let ib = set.output("--b", &b).unwrap();
        set.stage(ia, write_text("new a")).unwrap();
        set.stage(ib, write_text("new b")).unwrap();
        set.commit().unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(fs::read_to_string(&b).unwrap(), "new b");
        assert_eq!(entries(dir.path()), ["a.txt", "b.txt"]);
    }

    #[test]
    fn a_failed_commit_restores_what_it_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a.txt"),
            dir.path().join("b.txt"),
            dir.path().join("c.txt"),
        );
        fs::write(&a, "old a").unwrap();
        let mut set = OutputSet::new();
        let ids = [
            set.output("--a", &a).unwrap(),
            set.output("--b", &b).unwrap(),
            set.output("--c", &c).unwrap(),
        ];
        for id in ids {
            set.stage(id, write_text("new")).unwrap();
        }
        // The last target becomes a non-empty directory after planning: its
        // rename fails, after a and b were put in place.
        fs::create_dir(&c).unwrap();
        fs::write(c.join("keep"), "x").unwrap();
        let e = set.commit().unwrap_err();
        assert_eq!(e.exit_code, 1);
        assert!(e.message.contains("--c"), "{}", e.message);
        assert!(e.message.contains("restored"), "{}", e.message);
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        assert!(!b.exists(), "b did not exist before and must not now");
        assert_eq!(entries(dir.path()), ["a.txt", "c.txt"]);
    }

    #[test]
    fn dropping_an_uncommitted_set_removes_its_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        let mut set = OutputSet::new();
        let id = set.output("--a", &a).unwrap();
        assert_eq!(entries(dir.path()).len(), 1, "the reserved temporary file");
        set.stage(id, write_text("x")).unwrap();
        drop(set);
        assert!(entries(dir.path()).is_empty());
        assert!(live_temps().iter().all(|p| !p.starts_with(dir.path())));
    }

    #[test]
    fn non_regular_files_and_missing_folders_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut set = OutputSet::new();
        for (path, says) in [
            (PathBuf::from("/dev/null"), "a character device"),
            (dir.path().to_path_buf(), "a directory"),
            (dir.path().join("no/x.npy"), "does not exist"),
            (dir.path().join("sub/"), "names no file"),
        ] {
            let e = set.output("--out", &path).unwrap_err();
            assert_eq!(e.exit_code, 2, "{}", e.message);
            assert!(e.message.contains(says), "{}", e.message);
        }
        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let e = set.output("--out", &fifo).unwrap_err();
        assert!(e.message.contains("FIFO"), "{}", e.message);
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_link_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (real, link) = (dir.path().join("real.txt"), dir.path().join("link.txt"));
        fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let mut set = OutputSet::new();
        let id = set.output("--out", &link).unwrap();
        set.stage(id, write_text("new")).unwrap();
        set.commit().unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn one_file_named_twice_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (input, other) = (dir.path().join("in.npy"), dir.path().join("x.npy"));
        fs::write(&input, "data").unwrap();
        let hard = dir.path().join("hard.npy");
        fs::hard_link(&input, &hard).unwrap();
        let mut set = OutputSet::new();
        set.input("--density", &input).unwrap();
        for path in [&input, &hard, &dir.path().join("./in.npy")] {
            let e = set.output("--out", path).unwrap_err();
            assert_eq!(e.exit_code, 2);
            assert!(e.message.contains("--density"), "{}", e.message);
        }
        set.output("--out", &other).unwrap();
        let e = set.output("--tree-out", &other).unwrap_err();
        assert!(e.message.contains("--out") && e.message.contains("same file"));
        // A cache that does not exist yet is compared by path.
        let e = set.input("--cache", &other).unwrap_err();
        assert!(e.message.contains("same file"), "{}", e.message);
        assert_eq!(input.metadata().unwrap().len(), 4);
    }
}
