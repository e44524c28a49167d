//! Build script of hipkern-sys: picks one platform (amd, nvidia, cpu),
//! compiles every `hip/*.hip` into OUT_DIR with that platform's compiler,
//! archives them as `libhipkern_kernels.a` and links the runtime. An
//! object whose fingerprint is unchanged is reused; the others compile in
//! parallel under cargo's jobserver.
//! The decision logic lives in build_support.rs (unit-tested).

#[path = "build_support.rs"]
#[allow(dead_code)]
mod build_support;

use build_support::{CompilerKind, CompilerStamp, Platform, Toolchain};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn fail(msg: &str) -> ! {
    eprintln!("\nhipkern-sys build failed: {msg}\n");
    std::process::exit(1);
}

/// Runs a command; on failure, the full command line and its output.
fn run_checked(cmd: &mut Command, what: &str) -> Result<(), String> {
    let line = format!("{cmd:?}");
    match cmd.output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{what} failed ({})\ncommand: {line}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(format!("{what}: could not start it ({e})\ncommand: {line}")),
    }
}

fn run(cmd: &mut Command, what: &str) {
    if let Err(e) = run_checked(cmd, what) {
        fail(&e);
    }
}

/// Runs a GPU-listing tool (HIPKERN_OFFLOAD_ARCH=native) and returns what
/// it printed.
fn run_tool(tool: &Path) -> Result<String, String> {
    match Command::new(tool).output() {
        Ok(out) if out.status.success() => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Ok(out) => Err(format!(
            "exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("could not start it ({e})")),
    }
}

fn main() {
    // SAFETY: from_env takes ownership of the jobserver file descriptors
    // that cargo names in CARGO_MAKEFLAGS. That is sound only while no
    // other part of this process has opened, closed or reused those
    // descriptor numbers: this is the first statement of main, before
    // anything here opens a file, and nothing else calls it.
    let jobserver = unsafe { jobserver::Client::from_env() };
    for v in build_support::ENV_VARS {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build_support.rs");

    let manifest = PathBuf::from(env_var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env_var("OUT_DIR").expect("OUT_DIR"));
    // In the workspace the kernel sources sit beside sys/; a packaged crate
    // carries a copy under sys/hip.
    let hip_dir = [manifest.join("../hip"), manifest.join("hip")]
        .into_iter()
        .find(|d| d.join("include/hipkern.h").is_file())
        .unwrap_or_else(|| fail("cannot find hip/include/hipkern.h beside or inside sys/"));
    let include = hip_dir.join("include");
    println!("cargo:rerun-if-changed={}", hip_dir.display());
    println!("cargo:rerun-if-changed={}", include.display());

    #[cfg(feature = "bindgen")]
    generate_bindings(&include, &out);

    let env = |n: &str| env_var(n);
    let exists = |p: &Path| p.is_file();
    // Cargo sets CARGO_FEATURE_<NAME> for each enabled feature (and reruns
    // the script when the set changes).
    let require_device = env_var("CARGO_FEATURE_REQUIRE_DEVICE").is_some();
    let t = build_support::resolve(&env, &exists, &run_tool, require_device)
        .unwrap_or_else(|e| fail(&e));
    let check_only = build_support::check_only(&env).unwrap_or_else(|e| fail(&e));

    let report = build_support::build_report(&t, check_only);
    println!("{}", report.line);
    if let Some(w) = &report.warning {
        println!("cargo:warning={w}");
    }
    let mut record = format!("{}\n", report.line);
    if let Some(w) = &report.warning {
        record += &format!("warning: {w}\n");
    }
    write_record(&out, &record);

    let archs = t.archs.join(",");
    // Metadata for dependents (DEP_HIPKERN_*): the root build.rs turns it into cfgs.
    println!("cargo:platform={}", t.platform.name());
    println!("cargo:rustc-env=HIPKERN_SYS_PLATFORM={}", t.platform.name());
    println!("cargo:archs={archs}");
    println!("cargo:include={}", include.display());
    println!("cargo:lib_dir={}", out.display());

    match t.platform {
        Platform::Cpu => build_cpu(&hip_dir, &include),
        // Deliberate (cargo check, clippy, an editor): said in the report
        // line, no warning.
        _ if check_only => {}
        _ => {
            let compiled = build_device(&t, &hip_dir, &include, &out, jobserver);
            write_record(&out, &format!("{record}{compiled}"));
        }
    }
}

/// OUT_DIR/hipkern-build.txt: what this build chose and did, for a look
/// after the fact (cargo shows a build script's output only with -vv).
fn write_record(out: &Path, text: &str) {
    std::fs::write(out.join("hipkern-build.txt"), text)
        .unwrap_or_else(|e| fail(&format!("writing hipkern-build.txt: {e}")));
}

/// cpu: the C ABI as host-only stubs returning HIPKERN_ERROR_NO_TOOLCHAIN.
fn build_cpu(hip_dir: &Path, include: &Path) {
    let stub = hip_dir.join("cpu_stub.c");
    println!("cargo:rerun-if-changed={}", stub.display());
    cc::Build::new()
        .file(&stub)
        .include(include)
        .warnings(true)
        .extra_warnings(true)
        .compile("hipkern_kernels");
}

fn build_device(
    t: &Toolchain,
    hip_dir: &Path,
    include: &Path,
    out: &Path,
    jobserver: Option<jobserver::Client>,
) -> String {
    let (compiler, kind) = t.compiler.clone().expect("device platform has a compiler");
    println!("cargo:rerun-if-changed={}", compiler.display());

    // The build configuration the C ABI reports (hipkern_platform, _compiled_archs).
    let cfg = format!(
        "/* generated by hipkern-sys build.rs */\n#define HIPKERN_BUILD_PLATFORM \"{}\"\n#define HIPKERN_BUILD_ARCHS \"{}\"\n",
        t.platform.name(),
        t.archs.join(",")
    );
    let cfg_path = out.join("hipkern_build_config.h");
    if std::fs::read_to_string(&cfg_path).ok().as_deref() != Some(cfg.as_str()) {
        std::fs::write(&cfg_path, &cfg)
            .unwrap_or_else(|e| fail(&format!("writing config header: {e}")));
    }

    let list_path = hip_dir.join("sources.txt");
    println!("cargo:rerun-if-changed={}", list_path.display());
    let list = std::fs::read_to_string(&list_path)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", list_path.display())));
    let present: Vec<String> = std::fs::read_dir(hip_dir)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", hip_dir.display())))
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| n.ends_with(".hip"))
        .collect();
    let sources: Vec<PathBuf> = build_support::kernel_sources(&list, &present)
        .unwrap_or_else(|e| fail(&e))
        .iter()
        .map(|n| hip_dir.join(n))
        .collect();
    let includes = vec![include.to_path_buf(), out.to_path_buf()];
    let objects: Vec<PathBuf> = sources
        .iter()
        .map(|src| {
            println!("cargo:rerun-if-changed={}", src.display());
            let stem = src.file_stem().unwrap().to_string_lossy();
            out.join(format!("{stem}.o"))
        })
        .collect();

    // The build script reruns whenever any variable of ENV_VARS (PATH
    // among them) changes, but an object is recompiled only when its
    // fingerprint (build_support::kernel_fingerprint) changes: the kernels
    // take minutes.
    let stamp = compiler_stamp(&compiler);
    let read = |p: &Path| {
        std::fs::read(p).unwrap_or_else(|e| fail(&format!("reading {}: {e}", p.display())))
    };
    let mut common: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for h in files_under(include) {
        let bytes = read(&h);
        common.push((h, bytes));
    }
    common.push((cfg_path.clone(), cfg.into_bytes()));
    let fingerprint_path = |obj: &Path| {
        let mut p = obj.as_os_str().to_owned();
        p.push(".fingerprint");
        PathBuf::from(p)
    };
    let mut args = Vec::new();
    let mut fingerprints = Vec::new();
    let mut current = Vec::new();
    let mut sizes = Vec::new();
    for (src, obj) in sources.iter().zip(&objects) {
        let a = build_support::compile_args(t, src, obj, &includes);
        let src_bytes = read(src);
        let mut inputs: Vec<(&Path, &[u8])> = vec![(src.as_path(), src_bytes.as_slice())];
        inputs.extend(common.iter().map(|(p, b)| (p.as_path(), b.as_slice())));
        let fp = build_support::kernel_fingerprint(&stamp, &a, &inputs);
        let stored = std::fs::read_to_string(fingerprint_path(obj)).ok();
        current.push(build_support::object_is_current(
            stored.as_deref(),
            &fp,
            obj.is_file(),
        ));
        sizes.push(src_bytes.len() as u64);
        args.push(a);
        fingerprints.push(fp);
    }
    let order = build_support::compile_order(&sizes, &current);
    let name = |i: usize| {
        objects[i]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    let reused: Vec<String> = (0..objects.len())
        .filter(|&i| current[i])
        .map(name)
        .collect();
    let compiled: Vec<String> = order.iter().map(|&i| name(i)).collect();
    if !reused.is_empty() {
        println!(
            "hipkern-sys: reusing {} (fingerprints match)",
            reused.join(", ")
        );
    }

    let compile = |i: usize| -> Result<(), String> {
        println!("hipkern-sys: compiling {}", sources[i].display());
        // No fingerprint while the object is being written: an interrupted
        // or failed compile must not leave an object that looks current.
        let fp_path = fingerprint_path(&objects[i]);
        let _ = std::fs::remove_file(&fp_path);
        let what = format!("compiling {}", sources[i].display());
        run_checked(Command::new(&compiler).args(&args[i]), &what)?;
        std::fs::write(&fp_path, &fingerprints[i])
            .map_err(|e| format!("writing {}: {e}", fp_path.display()))
    };
    let local = build_support::local_jobs(env_var("NUM_JOBS").as_deref(), order.len());
    if let Err(e) = compile_parallel(&order, jobserver, local, &compile) {
        fail(&e);
    }

    let lib = out.join("libhipkern_kernels.a");
    let _ = std::fs::remove_file(&lib);
    let ar = env_var("AR").unwrap_or_else(|| "ar".into());
    run(
        Command::new(ar).arg("crs").arg(&lib).args(&objects),
        "archiving libhipkern_kernels.a",
    );
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=hipkern_kernels");
    let summary = format!(
        "compiled: {}\nreused (fingerprint matched): {}\n",
        if compiled.is_empty() {
            "none".into()
        } else {
            compiled.join(", ")
        },
        if reused.is_empty() {
            "none".into()
        } else {
            reused.join(", ")
        },
    );

    match kind {
        CompilerKind::Nvcc | CompilerKind::HipccNvidia => {
            let nvcc = if kind == CompilerKind::Nvcc {
                Some(compiler.clone())
            } else {
                None
            };
            let env = |n: &str| env_var(n);
            let candidates = build_support::cudart_dir_candidates(nvcc.as_deref(), &env);
            let dir = candidates
                .iter()
                .find(|d| d.join("libcudart_static.a").is_file())
                .unwrap_or_else(|| {
                    fail(&format!(
                        "libcudart_static.a not found in any of {candidates:?}"
                    ))
                });
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=cudart_static");
            for l in ["dl", "rt", "pthread", "stdc++"] {
                println!("cargo:rustc-link-lib=dylib={l}");
            }
        }
        CompilerKind::Hipcc | CompilerKind::ClangHip => {
            let mut dirs = Vec::new();
            for root in ["ROCM_PATH", "HIP_PATH"] {
                if let Some(r) = env_var(root) {
                    dirs.push(Path::new(&r).join("lib"));
                }
            }
            if let Some(bin) = compiler.parent() {
                dirs.push(bin.join("../lib"));
            }
            // Debian's libamdhip64-dev installs into the default linker path,
            // so no search directory is needed when none of these holds it.
            if let Some(d) = dirs.iter().find(|d| d.join("libamdhip64.so").exists()) {
                println!("cargo:rustc-link-search=native={}", d.display());
            }
            println!("cargo:rustc-link-lib=dylib=amdhip64");
            println!("cargo:rustc-link-lib=dylib=stdc++");
        }
    }
    summary
}

/// The compiler's canonical path, size and modification time (see
/// CompilerStamp for what this does not see).
fn compiler_stamp(compiler: &Path) -> CompilerStamp {
    let path = std::fs::canonicalize(compiler).unwrap_or_else(|_| compiler.to_path_buf());
    let meta = std::fs::metadata(&path)
        .unwrap_or_else(|e| fail(&format!("reading {}: {e}", path.display())));
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    CompilerStamp {
        path,
        len: meta.len(),
        mtime_ns,
    }
}

/// Every file under a directory, sorted (the headers of hip/include).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .unwrap_or_else(|e| fail(&format!("reading {}: {e}", d.display())));
        for e in entries {
            let p = e
                .unwrap_or_else(|e| fail(&format!("reading {}: {e}", d.display())))
                .path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// What lets one compile run: the build script's own token (cargo counts
/// a running build script as one job), one of NUM_JOBS local slots when
/// there is no jobserver, or a token taken from cargo's jobserver, given
/// back when dropped.
enum Slot {
    Own,
    Local,
    /// Held, never read: dropping it gives the token back.
    Token {
        _held: jobserver::Acquired,
    },
}

enum Event {
    Token(std::io::Result<jobserver::Acquired>),
    Done(Slot, Result<(), String>),
}

/// Runs `compile` for each index of `order`, started in that order. The
/// first compile runs on the build script's own token; each one beside it
/// needs a jobserver token when cargo gave a jobserver (so `cargo build
/// -jN` means N jobs in all, this build's compiles and other crates'
/// rustc together), else one of `local` slots. The jobserver's tokens are
/// asked for through its helper thread, because a blocking acquire could
/// wait forever at -j1 after the last compile was started. After the first
/// failure nothing new is started; that failure is returned once the
/// running compiles end.
fn compile_parallel(
    order: &[usize],
    jobserver: Option<jobserver::Client>,
    local: usize,
    compile: &(dyn Fn(usize) -> Result<(), String> + Sync),
) -> Result<(), String> {
    if order.is_empty() {
        return Ok(());
    }
    let (tx, rx) = mpsc::channel::<Event>();
    let mut free: Vec<Slot> = vec![Slot::Own];
    let helper = match jobserver {
        Some(client) => {
            let tx = tx.clone();
            match client.into_helper_thread(move |token| {
                // A send fails only once the compiles are over: the token
                // is then dropped, which gives it back.
                let _ = tx.send(Event::Token(token));
            }) {
                Ok(h) => {
                    for _ in 1..order.len() {
                        h.request_token();
                    }
                    Some(h)
                }
                Err(e) => {
                    println!(
                        "hipkern-sys: jobserver helper thread failed ({e}); one compile at a time"
                    );
                    None
                }
            }
        }
        None => {
            free.extend((1..local).map(|_| Slot::Local));
            None
        }
    };
    let mut pending = order.iter().copied();
    let mut remaining = order.len();
    let mut running = 0usize;
    let mut first_error: Option<String> = None;
    std::thread::scope(|scope| loop {
        while first_error.is_none() && remaining > 0 {
            let Some(slot) = free.pop() else { break };
            let i = pending.next().expect("remaining counts pending");
            remaining -= 1;
            running += 1;
            let tx = tx.clone();
            scope.spawn(move || {
                let r = compile(i);
                let _ = tx.send(Event::Done(slot, r));
            });
        }
        if running == 0 && (remaining == 0 || first_error.is_some()) {
            break;
        }
        match rx.recv().expect("this function holds a sender") {
            Event::Token(Ok(t)) if remaining > 0 && first_error.is_none() => {
                free.push(Slot::Token { _held: t })
            }
            // Not needed any more: dropping it gives it back.
            Event::Token(Ok(_)) => {}
            // No token this time: the compiles go on with the slots there are.
            Event::Token(Err(e)) => println!("hipkern-sys: jobserver token: {e}"),
            Event::Done(slot, r) => {
                running -= 1;
                if let Err(e) = r {
                    first_error.get_or_insert(e);
                }
                // A jobserver token goes back after each compile (other
                // crates may be waiting for it); the others are reused.
                if !matches!(slot, Slot::Token { .. }) {
                    free.push(slot);
                }
            }
        }
    });
    drop(free);
    drop(helper);
    first_error.map_or(Ok(()), Err)
}

#[cfg(feature = "bindgen")]
fn generate_bindings(include: &Path, out: &Path) {
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    let header = include.join("hipkern.h");
    let b = bindgen::Builder::default()
        .header(header.display().to_string())
        .allowlist_function("hipkern_.*")
        .allowlist_type("hipkern_.*")
        .allowlist_var("HIPKERN_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .use_core()
        .generate_comments(true)
        .layout_tests(true)
        .generate()
        .unwrap_or_else(|e| fail(&format!("bindgen on {}: {e}", header.display())));
    b.write_to_file(out.join("bindings.rs"))
        .unwrap_or_else(|e| fail(&format!("writing bindings: {e}")));
}
