// Platform and toolchain resolution for sys/build.rs: everything that is not
// a subprocess, so it can be unit-tested (sys/src/lib.rs includes this file
// under cfg(test)). The environment and the file system are passed in as
// closures, so tests use fake variables and fake directories.

use std::path::{Path, PathBuf};

/// Every environment variable the build reads (each gets rerun-if-env-changed).
pub const ENV_VARS: &[&str] = &[
    "HIPKERN_PLATFORM",
    "HIP_PLATFORM",
    "HIPCC",
    "ROCM_PATH",
    "HIP_PATH",
    "HIPKERN_OFFLOAD_ARCH",
    "GPU_TARGETS",
    "AMDGPU_TARGETS",
    "HIPKERN_DEVICE_LIB_PATH",
    "NVCC",
    "CUDA_PATH",
    "CUDA_HOME",
    "HIPKERN_CUDA_ARCH",
    "PATH",
    "AR",
    "HIPKERN_CHECK_ONLY",
    "HIPKERN_HIP_FLAGS",
    "DOCS_RS",
];

/// The AMD default when no variable names architectures: RDNA4, the
/// newest consumer family (a CDNA or older RDNA user names theirs).
pub const DEFAULT_OFFLOAD_ARCH: &str = "gfx1201";
/// The value of HIPKERN_OFFLOAD_ARCH that asks the toolchain which GPUs
/// this machine has (`amdgpu-arch`, else `rocm_agent_enumerator`).
pub const NATIVE_ARCH: &str = "native";
pub const DEFAULT_CUDA_ARCH: &str = "sm_90";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Platform {
    Amd,
    Nvidia,
    Cpu,
}

impl Platform {
    pub fn name(self) -> &'static str {
        match self {
            Platform::Amd => "amd",
            Platform::Nvidia => "nvidia",
            Platform::Cpu => "cpu",
        }
    }
}

/// How the compiler is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompilerKind {
    /// ROCm's hipcc, targeting AMD.
    Hipcc,
    /// A clang++ named in HIPCC, driven with `-x hip`.
    ClangHip,
    /// hipcc with HIP_PLATFORM=nvidia (wraps nvcc; uses the real HIP headers).
    HipccNvidia,
    /// Plain nvcc: `-x cu`, kernels see HIP names through hipkern_port.h.
    Nvcc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    pub platform: Platform,
    /// None on the cpu platform.
    pub compiler: Option<(PathBuf, CompilerKind)>,
    /// Device architectures to compile for (empty on cpu).
    pub archs: Vec<String>,
    /// `--rocm-device-lib-path` (AMD only).
    pub device_lib_path: Option<PathBuf>,
    /// Why this platform was chosen, for the build's report line.
    pub reason: String,
    /// True when this is the cpu platform only because no compiler was
    /// found (the one case the build warns about).
    pub fallback: bool,
    /// HIPKERN_HIP_FLAGS, appended to every kernel compile.
    pub extra_flags: Vec<String>,
}

/// Reads a variable; empty values count as unset.
pub type EnvFn<'a> = &'a dyn Fn(&str) -> Option<String>;
/// Whether a path is an existing file.
pub type ExistsFn<'a> = &'a dyn Fn(&Path) -> bool;

fn var(env: EnvFn, name: &str) -> Option<String> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Parses an architecture list, entries separated by commas or by
/// semicolons (CMake's list separator, as in GPU_TARGETS): entries trimmed,
/// empty entries and duplicates rejected, each checked against the
/// platform's spelling (`gfx` + hex digits, optional `:feature±` suffixes;
/// or `sm_NN[a]`).
pub fn parse_arch_list(
    platform: Platform,
    var_name: &str,
    value: &str,
) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for (i, raw) in value.split([',', ';']).enumerate() {
        let a = raw.trim();
        if a.is_empty() {
            return Err(format!("{var_name}={value:?}: entry {} is empty", i + 1));
        }
        let ok = match platform {
            Platform::Amd => valid_gfx(a),
            Platform::Nvidia => valid_sm(a),
            Platform::Cpu => false,
        };
        if !ok {
            let want = match platform {
                Platform::Amd => "an AMD target such as gfx1201 or gfx90a:xnack+",
                _ => "an NVIDIA target such as sm_90 or sm_90a",
            };
            return Err(format!("{var_name}={value:?}: '{a}' is not {want}"));
        }
        if out.iter().any(|x| x == a) {
            return Err(format!("{var_name}={value:?}: '{a}' is listed twice"));
        }
        out.push(a.to_string());
    }
    Ok(out)
}

fn valid_gfx(a: &str) -> bool {
    let mut parts = a.split(':');
    let base = parts.next().unwrap_or("");
    let Some(digits) = base.strip_prefix("gfx") else {
        return false;
    };
    if digits.len() < 3
        || !digits
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    {
        return false;
    }
    parts.all(|f| {
        (f.ends_with('+') || f.ends_with('-'))
            && f.len() > 1
            && f[..f.len() - 1].chars().all(|c| c.is_ascii_lowercase())
    })
}

fn valid_sm(a: &str) -> bool {
    let Some(rest) = a.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest
        .strip_suffix('a')
        .or_else(|| rest.strip_suffix('f'))
        .unwrap_or(rest);
    (2..=3).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit())
}

/// Finds `name` in the PATH value's directories.
pub fn search_path(path_var: Option<&str>, name: &str, exists: ExistsFn) -> Option<PathBuf> {
    let p = path_var?;
    std::env::split_paths(p)
        .map(|d| d.join(name))
        .find(|c| exists(c))
}

/// A variable naming a compiler: an absolute or relative path, or a bare
/// name looked up on PATH. A variable set to something that does not exist
/// is an error (the user asked for it), not a reason to look elsewhere.
fn compiler_from_var(env: EnvFn, exists: ExistsFn, name: &str) -> Result<Option<PathBuf>, String> {
    let Some(v) = var(env, name) else {
        return Ok(None);
    };
    let p = PathBuf::from(&v);
    if p.components().count() > 1 || p.is_absolute() {
        if exists(&p) {
            return Ok(Some(p));
        }
        return Err(format!("{name}={v} does not exist"));
    }
    match search_path(var(env, "PATH").as_deref(), &v, exists) {
        Some(found) => Ok(Some(found)),
        None => Err(format!("{name}={v} was not found on PATH")),
    }
}

/// The amd search order (docs/platforms.md#variables): HIPCC,
/// $ROCM_PATH/bin/hipcc, $HIP_PATH/bin/hipcc, hipcc on PATH,
/// /opt/rocm/bin/hipcc. Returns the compiler and how it was found.
pub fn find_hipcc(env: EnvFn, exists: ExistsFn) -> Result<Option<(PathBuf, String)>, String> {
    if let Some(p) = compiler_from_var(env, exists, "HIPCC")? {
        return Ok(Some((p, "HIPCC".into())));
    }
    for root in ["ROCM_PATH", "HIP_PATH"] {
        if let Some(r) = var(env, root) {
            let c = Path::new(&r).join("bin").join("hipcc");
            if exists(&c) {
                return Ok(Some((c, format!("${root}/bin/hipcc"))));
            }
        }
    }
    if let Some(c) = search_path(var(env, "PATH").as_deref(), "hipcc", exists) {
        return Ok(Some((c, "hipcc on PATH".into())));
    }
    let c = PathBuf::from("/opt/rocm/bin/hipcc");
    if exists(&c) {
        return Ok(Some((c, "/opt/rocm/bin/hipcc".into())));
    }
    Ok(None)
}

/// The nvidia search order for nvcc (docs/platforms.md#variables): NVCC,
/// $CUDA_PATH/bin/nvcc, $CUDA_HOME/bin/nvcc, nvcc on PATH.
pub fn find_nvcc(env: EnvFn, exists: ExistsFn) -> Result<Option<(PathBuf, String)>, String> {
    if let Some(p) = compiler_from_var(env, exists, "NVCC")? {
        return Ok(Some((p, "NVCC".into())));
    }
    for root in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(r) = var(env, root) {
            let c = Path::new(&r).join("bin").join("nvcc");
            if exists(&c) {
                return Ok(Some((c, format!("${root}/bin/nvcc"))));
            }
        }
    }
    if let Some(c) = search_path(var(env, "PATH").as_deref(), "nvcc", exists) {
        return Ok(Some((c, "nvcc on PATH".into())));
    }
    Ok(None)
}

/// A compiler whose file name says clang (clang++, clang++-19, ...) is
/// driven as clang with `-x hip`; anything else named in HIPCC is hipcc.
pub fn is_clang(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .map(|n| n.starts_with("clang"))
        .unwrap_or(false)
}

/// Runs a tool (the path) with no arguments and returns its standard
/// output, or why it could not (build.rs runs the process; tests fake it).
pub type RunFn<'a> = &'a dyn Fn(&Path) -> Result<String, String>;

/// Which variable chose the AMD architectures and what it says:
/// HIPKERN_OFFLOAD_ARCH, else the ecosystem's GPU_TARGETS, else
/// AMDGPU_TARGETS (ROCm's CMake names; both are lists), else the default.
pub fn amd_arch_setting(env: EnvFn) -> (&'static str, String) {
    for name in ["HIPKERN_OFFLOAD_ARCH", "GPU_TARGETS", "AMDGPU_TARGETS"] {
        if let Some(v) = var(env, name) {
            return (name, v);
        }
    }
    ("the default", DEFAULT_OFFLOAD_ARCH.to_string())
}

/// The programs that list this machine's AMD GPUs, in the order tried:
/// `amdgpu-arch` beside the compiler (ROCm's llvm/bin, or Debian's
/// /usr/lib/llvm-N/bin when HIPCC names that clang), in $ROCM_PATH/llvm/bin,
/// then `rocm_agent_enumerator` in $ROCM_PATH/bin, then either on PATH,
/// then /opt/rocm's.
pub fn native_arch_tools(env: EnvFn, compiler: &Path, exists: ExistsFn) -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = Vec::new();
    if let Some(bin) = compiler.parent() {
        c.push(bin.join("amdgpu-arch"));
        c.push(bin.join("../llvm/bin/amdgpu-arch"));
    }
    if let Some(r) = var(env, "ROCM_PATH") {
        c.push(Path::new(&r).join("llvm/bin/amdgpu-arch"));
        c.push(Path::new(&r).join("bin/rocm_agent_enumerator"));
    }
    for name in ["amdgpu-arch", "rocm_agent_enumerator"] {
        if let Some(p) = search_path(var(env, "PATH").as_deref(), name, exists) {
            c.push(p);
        }
    }
    c.push(PathBuf::from("/opt/rocm/llvm/bin/amdgpu-arch"));
    c.push(PathBuf::from("/opt/rocm/bin/rocm_agent_enumerator"));
    let mut out: Vec<PathBuf> = Vec::new();
    for p in c {
        if exists(&p) && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The GPU architectures in the output of `amdgpu-arch` or
/// `rocm_agent_enumerator`: one per line, in order, each once (a machine
/// with four MI300X lists gfx942 four times); `gfx000` (the enumerator's
/// CPU agent) and lines that are no AMD target are skipped.
pub fn parse_native_archs(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        let a = line.trim();
        if a == "gfx000" || !valid_gfx(a) || out.iter().any(|x| x == a) {
            continue;
        }
        out.push(a.to_string());
    }
    out
}

/// HIPKERN_OFFLOAD_ARCH=native: the architectures of this machine's GPUs,
/// from the first tool that lists any; an error naming every tool tried
/// (and what each said) when none does.
fn native_archs(
    env: EnvFn,
    compiler: &Path,
    exists: ExistsFn,
    run: RunFn,
) -> Result<(Vec<String>, String), String> {
    let tools = native_arch_tools(env, compiler, exists);
    let mut tried = Vec::new();
    for t in &tools {
        match run(t) {
            Ok(out) => {
                let archs = parse_native_archs(&out);
                if !archs.is_empty() {
                    return Ok((archs, format!("{} (native)", t.display())));
                }
                tried.push(format!("{} listed no GPU", t.display()));
            }
            Err(e) => tried.push(format!("{}: {e}", t.display())),
        }
    }
    if tools.is_empty() {
        tried.push(
            "neither amdgpu-arch nor rocm_agent_enumerator was found (beside the compiler, \
             in $ROCM_PATH, on PATH, in /opt/rocm)"
                .into(),
        );
    }
    Err(format!(
        "HIPKERN_OFFLOAD_ARCH=native: no AMD GPU found on this machine ({}); name the \
         architectures instead, e.g. HIPKERN_OFFLOAD_ARCH=gfx90a,gfx942",
        tried.join("; ")
    ))
}

fn amd_toolchain(
    env: EnvFn,
    exists: ExistsFn,
    run: RunFn,
    compiler: PathBuf,
    how: String,
) -> Result<Toolchain, String> {
    let kind = if is_clang(&compiler) {
        CompilerKind::ClangHip
    } else {
        CompilerKind::Hipcc
    };
    let (source, value) = amd_arch_setting(env);
    let (archs, arch_reason) = if value == NATIVE_ARCH {
        native_archs(env, &compiler, exists, run)?
    } else {
        let name = if source == "the default" {
            "HIPKERN_OFFLOAD_ARCH"
        } else {
            source
        };
        (
            parse_arch_list(Platform::Amd, name, &value)?,
            format!("archs from {source}"),
        )
    };
    let device_lib_path = var(env, "HIPKERN_DEVICE_LIB_PATH").map(PathBuf::from);
    Ok(Toolchain {
        platform: Platform::Amd,
        compiler: Some((compiler, kind)),
        archs,
        device_lib_path,
        reason: format!("{how}; {arch_reason}"),
        fallback: false,
        extra_flags: Vec::new(),
    })
}

fn nvidia_toolchain(
    env: EnvFn,
    compiler: PathBuf,
    kind: CompilerKind,
    how: String,
) -> Result<Toolchain, String> {
    let archs_var = var(env, "HIPKERN_CUDA_ARCH").unwrap_or_else(|| DEFAULT_CUDA_ARCH.into());
    let archs = parse_arch_list(Platform::Nvidia, "HIPKERN_CUDA_ARCH", &archs_var)?;
    Ok(Toolchain {
        platform: Platform::Nvidia,
        compiler: Some((compiler, kind)),
        archs,
        device_lib_path: None,
        reason: how,
        fallback: false,
        extra_flags: Vec::new(),
    })
}

fn cpu(reason: String, fallback: bool) -> Toolchain {
    Toolchain {
        platform: Platform::Cpu,
        compiler: None,
        archs: vec![],
        device_lib_path: None,
        reason,
        fallback,
        extra_flags: Vec::new(),
    }
}

/// The nvidia platform: hipcc when HIP_PLATFORM=nvidia and one is found,
/// else nvcc.
fn try_nvidia(env: EnvFn, exists: ExistsFn) -> Result<Option<Toolchain>, String> {
    if var(env, "HIP_PLATFORM").as_deref() == Some("nvidia") {
        if let Some((c, how)) = find_hipcc(env, exists)? {
            let how = format!("{how}, HIP_PLATFORM=nvidia");
            return nvidia_toolchain(env, c, CompilerKind::HipccNvidia, how).map(Some);
        }
    }
    match find_nvcc(env, exists)? {
        Some((c, how)) => nvidia_toolchain(env, c, CompilerKind::Nvcc, how).map(Some),
        None => Ok(None),
    }
}

/// Picks exactly one platform (docs/platforms.md, its opening).
/// HIPKERN_PLATFORM overrides detection; HIP_PLATFORM (amd|nvidia)
/// restricts it as ROCm's tools do; otherwise amd is tried, then nvidia, then cpu. `require_device` (the
/// feature `require-device`) turns that last fallback, and an explicit
/// HIPKERN_PLATFORM=cpu, into errors: a build that must have device code
/// fails where it is built rather than at its first device call.
pub fn resolve(
    env: EnvFn,
    exists: ExistsFn,
    run: RunFn,
    require_device: bool,
) -> Result<Toolchain, String> {
    let mut t = resolve_platform(env, exists, run, require_device)?;
    t.extra_flags = parse_hip_flags(env("HIPKERN_HIP_FLAGS").as_deref());
    Ok(t)
}

fn resolve_platform(
    env: EnvFn,
    exists: ExistsFn,
    run: RunFn,
    require_device: bool,
) -> Result<Toolchain, String> {
    let forced = match var(env, "HIPKERN_PLATFORM").as_deref() {
        None => None,
        Some("amd") => Some(Platform::Amd),
        Some("nvidia") => Some(Platform::Nvidia),
        Some("cpu") => Some(Platform::Cpu),
        Some(other) => {
            return Err(format!(
                "HIPKERN_PLATFORM={other}: expected amd, nvidia or cpu"
            ))
        }
    };
    let hip_platform = match var(env, "HIP_PLATFORM").as_deref() {
        None => None,
        Some("amd") => Some(Platform::Amd),
        Some("nvidia") => Some(Platform::Nvidia),
        Some(other) => return Err(format!("HIP_PLATFORM={other}: expected amd or nvidia")),
    };
    let wanted = forced.or(hip_platform);
    let by = if forced.is_some() {
        "HIPKERN_PLATFORM"
    } else {
        "HIP_PLATFORM"
    };
    // docs.rs builds documentation on machines without a GPU compiler: the
    // cpu platform, whose declarations are the same, and no warning.
    if forced.is_none() && var(env, "DOCS_RS").is_some() && !require_device {
        return Ok(cpu("DOCS_RS (a documentation build)".into(), false));
    }
    match wanted {
        Some(Platform::Cpu) if require_device => Err(
            "HIPKERN_PLATFORM=cpu contradicts the feature require-device: cpu is the platform \
             without device code, and require-device asks for device code; unset \
             HIPKERN_PLATFORM (or set it to amd or nvidia), or build without require-device"
                .into(),
        ),
        Some(Platform::Cpu) => Ok(cpu("HIPKERN_PLATFORM=cpu".into(), false)),
        Some(Platform::Amd) => match find_hipcc(env, exists)? {
            Some((c, how)) => amd_toolchain(env, exists, run, c, how),
            None => Err(format!(
                "{by}=amd but no HIP compiler was found (looked at HIPCC, $ROCM_PATH/bin/hipcc, \
                 $HIP_PATH/bin/hipcc, hipcc on PATH, /opt/rocm/bin/hipcc)"
            )),
        },
        Some(Platform::Nvidia) => match try_nvidia(env, exists)? {
            Some(t) => Ok(t),
            None => Err(format!(
                "{by}=nvidia but no compiler was found (looked at hipcc with HIP_PLATFORM=nvidia, \
                 NVCC, $CUDA_PATH/bin/nvcc, $CUDA_HOME/bin/nvcc, nvcc on PATH)"
            )),
        },
        None => {
            if let Some((c, how)) = find_hipcc(env, exists)? {
                return amd_toolchain(env, exists, run, c, how);
            }
            if let Some(t) = try_nvidia(env, exists)? {
                return Ok(t);
            }
            if require_device {
                return Err(no_compiler_error(env));
            }
            Ok(cpu("no HIP or CUDA compiler found".into(), true))
        }
    }
}

/// `$ROOT/bin/TOOL` as a place looked at, with what was there.
fn root_place(env: EnvFn, root: &str, tool: &str) -> String {
    match var(env, root) {
        None => format!("${root}/bin/{tool} ({root} unset)"),
        Some(r) => format!(
            "${root}/bin/{tool} ({} does not exist)",
            Path::new(&r).join("bin").join(tool).display()
        ),
    }
}

/// The error of feature require-device when detection found nothing:
/// every place looked at, and the variables that point at a compiler.
fn no_compiler_error(env: EnvFn) -> String {
    format!(
        "feature require-device: no HIP or CUDA compiler was found. Looked for hipcc at \
         HIPCC (unset), {}, {}, hipcc on PATH, /opt/rocm/bin/hipcc; for nvcc at NVCC (unset), \
         {}, {}, nvcc on PATH. Point the build at one: HIPCC=/path/to/hipcc or \
         ROCM_PATH=/opt/rocm (AMD), NVCC=/path/to/nvcc or CUDA_PATH=/usr/local/cuda (NVIDIA); \
         HIPKERN_PLATFORM=amd or nvidia picks one when both are there. Without \
         require-device this build would be the cpu platform (no device code)",
        root_place(env, "ROCM_PATH", "hipcc"),
        root_place(env, "HIP_PATH", "hipcc"),
        root_place(env, "CUDA_PATH", "nvcc"),
        root_place(env, "CUDA_HOME", "nvcc"),
    )
}

/// Where to look for static cudart, in order: beside nvcc (when the
/// compiler is nvcc itself) in the toolkit's lib64, the PyPI wheels' lib or
/// targets/x86_64-linux/lib; then $CUDA_PATH and $CUDA_HOME (lib64, lib);
/// then /usr/local/cuda/lib64.
pub fn cudart_dir_candidates(nvcc: Option<&Path>, env: EnvFn) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(root) = nvcc.and_then(|c| c.parent()).and_then(|b| b.parent()) {
        dirs.extend([
            root.join("lib64"),
            root.join("lib"),
            root.join("targets/x86_64-linux/lib"),
        ]);
    }
    for var_name in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(r) = var(env, var_name) {
            dirs.extend([Path::new(&r).join("lib64"), Path::new(&r).join("lib")]);
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs
}

/// Compiler arguments for one .hip source (everything but the program).
pub fn compile_args(t: &Toolchain, src: &Path, obj: &Path, includes: &[PathBuf]) -> Vec<String> {
    let (_, kind) = t
        .compiler
        .as_ref()
        .expect("compile_args on the cpu platform");
    let mut a: Vec<String> = Vec::new();
    match kind {
        CompilerKind::ClangHip => a.extend(["-x".into(), "hip".into()]),
        CompilerKind::Nvcc => {
            a.extend(["-x".into(), "cu".into()]);
            a.extend(NVCC_DEFINES.iter().map(|d| format!("-D{d}")));
        }
        _ => {}
    }
    a.extend(["-std=c++17".into(), "-O3".into()]);
    match kind {
        CompilerKind::Hipcc | CompilerKind::ClangHip => {
            a.push("-fPIC".into());
            for arch in &t.archs {
                a.push(format!("--offload-arch={arch}"));
            }
            if let Some(dl) = &t.device_lib_path {
                a.push(format!("--rocm-device-lib-path={}", dl.display()));
            }
        }
        CompilerKind::Nvcc | CompilerKind::HipccNvidia => {
            a.extend(["-Xcompiler".into(), "-fPIC".into()]);
            for arch in &t.archs {
                // SASS for the arch plus its PTX, so newer GPUs can JIT it.
                let num = arch.trim_start_matches("sm_");
                a.push(format!(
                    "-gencode=arch=compute_{num},code=[sm_{num},compute_{num}]"
                ));
            }
        }
    }
    for inc in includes {
        a.push(format!("-I{}", inc.display()));
    }
    // The user's flags come after hipkern's, so that they can override
    // them (a later -O or -D wins with every one of these compilers).
    a.extend(t.extra_flags.iter().cloned());
    a.extend([
        "-c".into(),
        src.display().to_string(),
        "-o".into(),
        obj.display().to_string(),
    ]);
    a
}

/// The kernel sources named by `hip/sources.txt` (one per line; `#`
/// comments and blank lines skipped), checked against the `.hip` files
/// that are in the folder: a listed file that is missing, a `.hip` file
/// that is not listed, and a name listed twice are errors naming it. The
/// CMake build reads the same file, so both builds compile the same list.
pub fn kernel_sources(list: &str, hip_files_present: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for (i, line) in list.lines().enumerate() {
        let name = line.split('#').next().unwrap_or("").trim();
        if name.is_empty() {
            continue;
        }
        if !name.ends_with(".hip") || name.contains('/') {
            return Err(format!(
                "hip/sources.txt line {}: '{name}' is not a .hip file of hip/",
                i + 1
            ));
        }
        if out.iter().any(|x| x == name) {
            return Err(format!("hip/sources.txt lists '{name}' twice"));
        }
        if !hip_files_present.iter().any(|f| f == name) {
            return Err(format!(
                "hip/sources.txt lists '{name}', which is not in hip/"
            ));
        }
        out.push(name.to_string());
    }
    if let Some(extra) = hip_files_present.iter().find(|f| !out.contains(f)) {
        return Err(format!(
            "hip/{extra} is not listed in hip/sources.txt (both builds compile that list only)"
        ));
    }
    if out.is_empty() {
        return Err("hip/sources.txt lists no source".into());
    }
    Ok(out)
}

/// The preprocessor definitions of an nvcc compile (the `nvidia` platform
/// without hipcc): the CMake build's CUDA sources get the same.
pub const NVCC_DEFINES: &[&str] = &["__HIP_PLATFORM_NVIDIA__", "HIPKERN_PORT_CUDA"];

/// HIPKERN_CHECK_ONLY=1: resolve the platform and its architectures as
/// usual (the same cfgs and metadata), but compile and link no device
/// code. For builds that never link (`cargo check`, clippy, an editor's
/// analysis): the kernels take minutes per architecture, and a checker
/// wraps the build script so that it runs again rather than reusing a
/// full build's. Unset or `0`: a normal build.
pub fn check_only(env: EnvFn) -> Result<bool, String> {
    match var(env, "HIPKERN_CHECK_ONLY").as_deref() {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(format!("HIPKERN_CHECK_ONLY={other}: expected 1 or 0")),
    }
}

/// HIPKERN_HIP_FLAGS: extra compiler flags, split on ASCII whitespace. No
/// shell quoting: a flag cannot contain a space (`-DNAME="a b"` is two
/// flags). Unset, empty or only whitespace: none.
pub fn parse_hip_flags(value: Option<&str>) -> Vec<String> {
    value
        .map(|v| v.split_ascii_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// What the build says about its choice: a line of the build script's own
/// output (seen with `cargo build -vv`, and written to
/// OUT_DIR/hipkern-build.txt), and a `cargo:warning` only when the result
/// is probably not what the user meant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildReport {
    pub line: String,
    pub warning: Option<String>,
}

/// A device build with its compiler, an explicit HIPKERN_PLATFORM=cpu and
/// HIPKERN_CHECK_ONLY=1 are all what was asked for: no warning (a warning
/// on every build teaches people to ignore warnings). The automatic cpu
/// fallback is the one surprise: a machine where the compiler is simply not
/// on PATH gets a library whose device calls all fail, so it is said where
/// cargo shows it, with what to do about it.
pub fn build_report(t: &Toolchain, check_only: bool) -> BuildReport {
    let compiler = match &t.compiler {
        Some((c, k)) => format!("{} ({k:?})", c.display()),
        None => "none".into(),
    };
    let mut line = format!(
        "hipkern-sys: platform {}, compiler {compiler}, archs [{}] ({})",
        t.platform.name(),
        t.archs.join(","),
        t.reason
    );
    if !t.extra_flags.is_empty() && t.platform != Platform::Cpu {
        line += &format!(", HIPKERN_HIP_FLAGS [{}]", t.extra_flags.join(" "));
    }
    if check_only && t.platform != Platform::Cpu {
        line += "; HIPKERN_CHECK_ONLY=1: no device code compiled or linked (anything linked \
                 from this build fails to link)";
    }
    let warning = t.fallback.then(|| {
        "hipkern: no HIP or CUDA compiler found, so this build is the cpu platform: the CPU \
         paths work, device calls return NoToolchain. For device code point the build at a \
         compiler (HIPCC or ROCM_PATH for AMD, NVCC or CUDA_PATH for NVIDIA, see \
         docs/platforms.md); HIPKERN_PLATFORM=cpu builds cpu without this warning, and the \
         feature require-device makes this case a build error"
            .to_string()
    });
    BuildReport { line, warning }
}

/// FNV-1a, 64 bits: a stable hash (the same on every machine and Rust
/// version, unlike std's DefaultHasher), ample for telling inputs apart;
/// nothing here needs resistance to a crafted collision.
pub fn fnv1a64(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub const FNV1A64_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The compiler as the fingerprint sees it: its canonical path (symlinks
/// resolved), its size and modification time. A wrapper (hipcc, a script
/// choosing a clang by ROCM_PATH or HIP_CLANG_PATH; nvcc's
/// NVCC_APPEND_FLAGS) whose targets change while the wrapper itself does
/// not goes unseen: delete OUT_DIR's `*.o.fingerprint` (or `cargo clean
/// -p hipkern-sys`) after such a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompilerStamp {
    pub path: PathBuf,
    pub len: u64,
    /// Nanoseconds since the Unix epoch (0 where the system has none).
    pub mtime_ns: u128,
}

/// The fingerprint of one kernel object: everything its bytes depend on
/// that the build knows of. The compiler stamp, the full argument list
/// (archs, flags, include directories, HIPKERN_HIP_FLAGS, the source and
/// object paths) and the bytes of each input file (the .hip source, every
/// header of hip/include, the generated hipkern_build_config.h), each
/// with its path. Inputs are hashed in path order, so their order here
/// does not matter; every field is length-prefixed, so no two different
/// lists hash the same bytes. Returns the text stored beside the object.
pub fn kernel_fingerprint(
    compiler: &CompilerStamp,
    args: &[String],
    inputs: &[(&Path, &[u8])],
) -> String {
    fn field(h: u64, bytes: &[u8]) -> u64 {
        fnv1a64(fnv1a64(h, &(bytes.len() as u64).to_le_bytes()), bytes)
    }
    let mut h = field(FNV1A64_OFFSET, b"hipkern kernel object v1");
    h = field(h, compiler.path.display().to_string().as_bytes());
    h = field(h, &compiler.len.to_le_bytes());
    h = field(h, &compiler.mtime_ns.to_le_bytes());
    h = field(h, &(args.len() as u64).to_le_bytes());
    for a in args {
        h = field(h, a.as_bytes());
    }
    let mut sorted: Vec<&(&Path, &[u8])> = inputs.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    h = field(h, &(sorted.len() as u64).to_le_bytes());
    for (path, bytes) in sorted {
        h = field(h, path.display().to_string().as_bytes());
        h = field(h, bytes);
    }
    format!("fnv1a64 {h:016x}\n")
}

/// Whether an object can be reused: it exists and the fingerprint stored
/// beside it (written only after its compile succeeded) is this build's.
pub fn object_is_current(stored: Option<&str>, fingerprint: &str, object_exists: bool) -> bool {
    object_exists && stored.is_some_and(|s| s.trim() == fingerprint.trim())
}

/// The sources to compile, in the order to start them: only those whose
/// object is not current, the largest first, so that the long compiles
/// start early and the short ones finish beside them (list1_tiled.hip
/// takes most of the time for every architecture); equal sizes keep their
/// list order.
pub fn compile_order(sizes: &[u64], current: &[bool]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sizes.len()).filter(|&i| !current[i]).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    order
}

/// How many compiles run at once without a jobserver: NUM_JOBS (cargo's
/// -j), at least 1, at most the number of compiles.
pub fn local_jobs(num_jobs: Option<&str>, compiles: usize) -> usize {
    num_jobs
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(1)
        .clamp(1, compiles.max(1))
}
