//! Unit tests of the build's platform/toolchain resolution, with fake
//! environments and fake directories (tempfile), no compiler run.
use crate::build_support::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

struct Fake {
    vars: RefCell<HashMap<String, String>>,
    dir: tempfile::TempDir,
    /// What each fake GPU-listing tool prints (HIPKERN_OFFLOAD_ARCH=native).
    tool_output: RefCell<HashMap<PathBuf, Result<String, String>>>,
}

impl Fake {
    fn new() -> Self {
        Fake {
            vars: RefCell::new(HashMap::new()),
            dir: tempfile::tempdir().unwrap(),
            tool_output: RefCell::new(HashMap::new()),
        }
    }
    fn set(&self, k: &str, v: &str) -> &Self {
        self.vars.borrow_mut().insert(k.to_string(), v.to_string());
        self
    }
    /// Creates an (empty) executable-looking file under the fake root.
    fn file(&self, rel: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, b"").unwrap();
        p
    }
    fn root(&self, rel: &str) -> String {
        self.dir.path().join(rel).display().to_string()
    }
    fn resolve(&self) -> Result<Toolchain, String> {
        self.resolve_with(false)
    }
    /// `require_device`: the feature require-device.
    fn resolve_with(&self, require_device: bool) -> Result<Toolchain, String> {
        let env = |k: &str| self.vars.borrow().get(k).cloned();
        // /opt/rocm/bin/hipcc of the real machine must not leak into tests.
        let exists = |p: &Path| p.starts_with(self.dir.path()) && p.is_file();
        let run = |p: &Path| {
            self.tool_output
                .borrow()
                .get(p)
                .cloned()
                .unwrap_or_else(|| Err("not faked".into()))
        };
        resolve(&env, &exists, &run, require_device)
    }
}

#[test]
fn arch_lists_parse_and_reject() {
    assert_eq!(
        parse_arch_list(Platform::Amd, "V", "gfx1201").unwrap(),
        vec!["gfx1201"]
    );
    assert_eq!(
        parse_arch_list(Platform::Amd, "V", " gfx1201, gfx1100 ,gfx90a:xnack+").unwrap(),
        vec!["gfx1201", "gfx1100", "gfx90a:xnack+"]
    );
    assert_eq!(
        parse_arch_list(Platform::Nvidia, "V", "sm_90,sm_90a,sm_80")
            .unwrap()
            .len(),
        3
    );
    for bad in [
        "",
        "gfx1201,",
        "gfx1201,,gfx1100",
        "sm_90",
        "gfx12x1",
        "GFX1201",
        "gfx1201:xnack",
        "gfx1201,gfx1201",
    ] {
        let e = parse_arch_list(Platform::Amd, "HIPKERN_OFFLOAD_ARCH", bad).unwrap_err();
        assert!(e.contains("HIPKERN_OFFLOAD_ARCH"), "{e}");
    }
    for bad in ["gfx1201", "sm_", "sm_9", "sm_9000", "compute_90"] {
        assert!(
            parse_arch_list(Platform::Nvidia, "HIPKERN_CUDA_ARCH", bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn nothing_found_is_cpu() {
    let f = Fake::new();
    let t = f.resolve().unwrap();
    assert_eq!(t.platform, Platform::Cpu);
    assert!(t.compiler.is_none() && t.archs.is_empty());
}

#[test]
fn forced_cpu_wins_over_found_compilers() {
    let f = Fake::new();
    let nvcc = f.file("cuda/bin/nvcc");
    f.set("NVCC", &nvcc.display().to_string())
        .set("HIPKERN_PLATFORM", "cpu");
    assert_eq!(f.resolve().unwrap().platform, Platform::Cpu);
}

#[test]
fn bad_platform_values_are_errors() {
    let f = Fake::new();
    f.set("HIPKERN_PLATFORM", "rocm");
    assert!(f.resolve().unwrap_err().contains("HIPKERN_PLATFORM=rocm"));
    let g = Fake::new();
    g.set("HIP_PLATFORM", "intel");
    assert!(g.resolve().unwrap_err().contains("HIP_PLATFORM=intel"));
}

#[test]
fn amd_search_order() {
    let f = Fake::new();
    f.file("rocm/bin/hipcc");
    f.file("hip/bin/hipcc");
    f.file("pathdir/hipcc");
    f.set("PATH", &f.root("pathdir"));
    let t = f.resolve().unwrap();
    assert_eq!(
        t.compiler.as_ref().unwrap().0,
        f.dir.path().join("pathdir/hipcc")
    );
    f.set("HIP_PATH", &f.root("hip"));
    assert_eq!(
        f.resolve().unwrap().compiler.unwrap().0,
        f.dir.path().join("hip/bin/hipcc")
    );
    f.set("ROCM_PATH", &f.root("rocm"));
    let t = f.resolve().unwrap();
    assert_eq!(t.platform, Platform::Amd);
    assert_eq!(
        t.compiler.unwrap(),
        (f.dir.path().join("rocm/bin/hipcc"), CompilerKind::Hipcc)
    );
    assert_eq!(t.archs, vec!["gfx1201"]);
    let clang = f.file("llvm/bin/clang++-19");
    f.set("HIPCC", &clang.display().to_string());
    let t = f.resolve().unwrap();
    assert_eq!(t.compiler.unwrap(), (clang, CompilerKind::ClangHip));
}

#[test]
fn amd_is_preferred_over_nvidia_when_both_exist() {
    let f = Fake::new();
    f.file("rocm/bin/hipcc");
    f.file("cuda/bin/nvcc");
    f.set("ROCM_PATH", &f.root("rocm"))
        .set("CUDA_PATH", &f.root("cuda"));
    assert_eq!(f.resolve().unwrap().platform, Platform::Amd);
    f.set("HIPKERN_PLATFORM", "nvidia");
    let t = f.resolve().unwrap();
    assert_eq!(t.platform, Platform::Nvidia);
    assert_eq!(t.compiler.unwrap().1, CompilerKind::Nvcc);
}

#[test]
fn hipcc_variable_as_bare_name_uses_path_and_missing_is_error() {
    let f = Fake::new();
    f.file("bin/clang++-19");
    f.set("PATH", &f.root("bin")).set("HIPCC", "clang++-19");
    let t = f.resolve().unwrap();
    assert_eq!(t.compiler.unwrap().1, CompilerKind::ClangHip);
    f.set("HIPCC", "clang++-42");
    assert!(f.resolve().unwrap_err().contains("HIPCC=clang++-42"));
    f.set("HIPCC", &f.root("nope/hipcc"));
    assert!(f.resolve().unwrap_err().contains("does not exist"));
}

#[test]
fn nvidia_search_order_and_hip_platform() {
    let f = Fake::new();
    f.file("home/bin/nvcc");
    f.file("cpath/bin/nvcc");
    f.file("p/nvcc");
    f.set("PATH", &f.root("p"));
    assert_eq!(
        f.resolve().unwrap().compiler.unwrap().0,
        f.dir.path().join("p/nvcc")
    );
    f.set("CUDA_HOME", &f.root("home"));
    assert_eq!(
        f.resolve().unwrap().compiler.unwrap().0,
        f.dir.path().join("home/bin/nvcc")
    );
    f.set("CUDA_PATH", &f.root("cpath"));
    assert_eq!(
        f.resolve().unwrap().compiler.unwrap().0,
        f.dir.path().join("cpath/bin/nvcc")
    );
    let n = f.file("explicit/nvcc");
    f.set("NVCC", &n.display().to_string())
        .set("HIPKERN_CUDA_ARCH", "sm_90,sm_100");
    let t = f.resolve().unwrap();
    assert_eq!(t.compiler.unwrap(), (n, CompilerKind::Nvcc));
    assert_eq!(t.archs, vec!["sm_90", "sm_100"]);
    // HIP_PLATFORM=nvidia with a hipcc: hipcc drives nvcc.
    f.file("rocm/bin/hipcc");
    f.set("ROCM_PATH", &f.root("rocm"))
        .set("HIP_PLATFORM", "nvidia");
    let t = f.resolve().unwrap();
    assert_eq!(t.platform, Platform::Nvidia);
    assert_eq!(t.compiler.unwrap().1, CompilerKind::HipccNvidia);
}

#[test]
fn requested_platform_without_compiler_is_an_error_naming_the_search() {
    let f = Fake::new();
    f.set("HIPKERN_PLATFORM", "amd");
    let e = f.resolve().unwrap_err();
    assert!(
        e.contains("/opt/rocm/bin/hipcc") && e.contains("HIPCC"),
        "{e}"
    );
    let g = Fake::new();
    g.set("HIP_PLATFORM", "nvidia");
    assert!(g.resolve().unwrap_err().contains("CUDA_HOME"));
}

#[test]
fn compile_args_per_compiler() {
    let f = Fake::new();
    let clang = f.file("bin/clang++-19");
    f.set("HIPCC", &clang.display().to_string())
        .set("HIPKERN_OFFLOAD_ARCH", "gfx1201,gfx1100")
        .set("HIPKERN_DEVICE_LIB_PATH", "/dl");
    let t = f.resolve().unwrap();
    let a = compile_args(
        &t,
        Path::new("k.hip"),
        Path::new("k.o"),
        &[PathBuf::from("/inc")],
    );
    let s = a.join(" ");
    assert!(s.starts_with("-x hip "), "{s}");
    assert!(
        s.contains("--offload-arch=gfx1201 --offload-arch=gfx1100"),
        "{s}"
    );
    assert!(
        s.contains("--rocm-device-lib-path=/dl")
            && s.contains("-I/inc")
            && s.ends_with("-c k.hip -o k.o")
    );

    let g = Fake::new();
    let nvcc = g.file("cu13/bin/nvcc");
    g.set("NVCC", &nvcc.display().to_string());
    let t = g.resolve().unwrap();
    let s = compile_args(&t, Path::new("k.hip"), Path::new("k.o"), &[]).join(" ");
    assert!(
        s.starts_with("-x cu -D__HIP_PLATFORM_NVIDIA__ -DHIPKERN_PORT_CUDA"),
        "{s}"
    );
    assert!(
        s.contains("-Xcompiler -fPIC")
            && s.contains("-gencode=arch=compute_90,code=[sm_90,compute_90]"),
        "{s}"
    );
    let env = |k: &str| g.vars.borrow().get(k).cloned();
    assert_eq!(
        cudart_dir_candidates(Some(&nvcc), &env)[1],
        g.dir.path().join("cu13/lib"),
        "the PyPI layout keeps libcudart_static.a in cu13/lib"
    );
    g.set("CUDA_HOME", "/opt/cuda-home");
    let dirs = cudart_dir_candidates(None, &env);
    assert_eq!(dirs[0], Path::new("/opt/cuda-home/lib64"), "{dirs:?}");
    assert_eq!(dirs.last().unwrap(), Path::new("/usr/local/cuda/lib64"));
}

#[test]
fn every_variable_read_is_declared() {
    let src = include_str!("../build_support.rs");
    let build = include_str!("../build.rs");
    let mut read: Vec<&str> = Vec::new();
    for text in [src, build] {
        for cap in text.split('"').skip(1).step_by(2) {
            if cap.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                && cap.len() > 2
                && cap.contains('_')
            {
                read.push(cap);
            }
        }
    }
    for v in [
        "HIPKERN_PLATFORM",
        "HIP_PLATFORM",
        "HIPCC",
        "ROCM_PATH",
        "HIP_PATH",
        "NVCC",
        "CUDA_PATH",
        "CUDA_HOME",
    ] {
        assert!(
            ENV_VARS.contains(&v),
            "{v} is read but has no rerun-if-env-changed"
        );
    }
    for v in read {
        if v.starts_with("HIPKERN_")
            && !v.starts_with("HIPKERN_BUILD")
            && !v.starts_with("HIPKERN_SYS")
            && !v.starts_with("HIPKERN_ERROR")
            && !NVCC_DEFINES.contains(&v)
        {
            assert!(ENV_VARS.contains(&v), "{v} is read but not in ENV_VARS");
        }
    }
}

#[test]
fn amd_archs_come_from_hipkern_then_gpu_targets_then_amdgpu_targets() {
    let f = Fake::new();
    let hipcc = f.file("rocm/bin/hipcc");
    f.set("HIPCC", &hipcc.display().to_string());
    assert_eq!(f.resolve().unwrap().archs, vec![DEFAULT_OFFLOAD_ARCH]);
    // ROCm's CMake lists: semicolons.
    f.set("AMDGPU_TARGETS", "gfx90a;gfx942");
    let t = f.resolve().unwrap();
    assert_eq!(t.archs, vec!["gfx90a", "gfx942"]);
    assert!(t.reason.contains("AMDGPU_TARGETS"), "{}", t.reason);
    f.set("GPU_TARGETS", "gfx1100");
    assert_eq!(f.resolve().unwrap().archs, vec!["gfx1100"]);
    f.set(
        "HIPKERN_OFFLOAD_ARCH",
        "gfx90a,gfx942,gfx1030,gfx1100,gfx1201",
    );
    assert_eq!(f.resolve().unwrap().archs.len(), 5);
    // A bad entry names the variable it came from.
    f.set("HIPKERN_OFFLOAD_ARCH", "");
    f.set("GPU_TARGETS", "gfx90a;mi300");
    let e = f.resolve().unwrap_err();
    assert!(e.contains("GPU_TARGETS") && e.contains("mi300"), "{e}");
}

#[test]
fn native_archs_are_listed_by_the_toolchain() {
    assert_eq!(
        parse_native_archs("gfx000\ngfx942\ngfx942\n  gfx90a:sramecc+:xnack-\n\nwarning: x\n"),
        vec!["gfx942", "gfx90a:sramecc+:xnack-"]
    );
    assert!(parse_native_archs("").is_empty());

    let f = Fake::new();
    let hipcc = f.file("rocm/bin/hipcc");
    let arch_tool = f.file("rocm/bin/amdgpu-arch");
    let enumerator = f.file("rocm/bin/rocm_agent_enumerator");
    f.set("HIPCC", &hipcc.display().to_string())
        .set("ROCM_PATH", &f.root("rocm"))
        .set("HIPKERN_OFFLOAD_ARCH", NATIVE_ARCH);
    let env = |k: &str| f.vars.borrow().get(k).cloned();
    let exists = |p: &Path| p.starts_with(f.dir.path()) && p.is_file();
    assert_eq!(
        native_arch_tools(&env, &hipcc, &exists),
        vec![arch_tool.clone(), enumerator.clone()]
    );
    // amdgpu-arch lists nothing (no GPU), the enumerator its agents.
    f.tool_output
        .borrow_mut()
        .insert(arch_tool.clone(), Ok(String::new()));
    f.tool_output
        .borrow_mut()
        .insert(enumerator.clone(), Ok("gfx000\ngfx1100\n".into()));
    let t = f.resolve().unwrap();
    assert_eq!(t.archs, vec!["gfx1100"]);
    assert!(t.reason.contains("native"), "{}", t.reason);
    // Nothing anywhere: an error naming each tool and what it said.
    f.tool_output
        .borrow_mut()
        .insert(enumerator.clone(), Err("exited with 1".into()));
    let e = f.resolve().unwrap_err();
    assert!(
        e.contains("native") && e.contains("listed no GPU") && e.contains("exited with 1"),
        "{e}"
    );
    // No tool at all.
    let g = Fake::new();
    let hipcc = g.file("bin/hipcc");
    g.set("HIPCC", &hipcc.display().to_string())
        .set("HIPKERN_OFFLOAD_ARCH", "native");
    let e = g.resolve().unwrap_err();
    assert!(
        e.contains("neither amdgpu-arch nor rocm_agent_enumerator"),
        "{e}"
    );
}

#[test]
fn the_source_list_is_checked_against_the_folder() {
    let present = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let list = "# comment\nfill.hip\n\n  runtime.hip  # the runtime\n";
    assert_eq!(
        kernel_sources(list, &present(&["runtime.hip", "fill.hip"])).unwrap(),
        vec!["fill.hip", "runtime.hip"]
    );
    let e = kernel_sources(list, &present(&["runtime.hip", "fill.hip", "new.hip"])).unwrap_err();
    assert!(e.contains("hip/new.hip is not listed"), "{e}");
    let e = kernel_sources(list, &present(&["fill.hip"])).unwrap_err();
    assert!(
        e.contains("'runtime.hip'") && e.contains("not in hip/"),
        "{e}"
    );
    let e = kernel_sources("fill.hip\nfill.hip\n", &present(&["fill.hip"])).unwrap_err();
    assert!(e.contains("twice"), "{e}");
    let e = kernel_sources("include/x.hip\n", &present(&[])).unwrap_err();
    assert!(e.contains("line 1"), "{e}");
    assert!(kernel_sources("# nothing\n", &present(&[])).is_err());
}

/// The cargo build and the CMake build (CMakeLists.txt at the repository
/// root) compile the same files with the same definitions and flags: both
/// read hip/sources.txt, which names every .hip file of hip/, and CMake
/// gives the CUDA sources NVCC_DEFINES and the flags compile_args gives.
#[test]
fn cargo_and_cmake_builds_compile_the_same_sources_the_same_way() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    if !repo.join("CMakeLists.txt").is_file() {
        // The packaged crate (a .crate file unpacked) has no CMake build.
        eprintln!(
            "not in the hipkern repository: no CMakeLists.txt beside sys/, nothing to compare"
        );
        return;
    }
    let cmake = std::fs::read_to_string(repo.join("CMakeLists.txt")).unwrap();
    let list = std::fs::read_to_string(repo.join("hip/sources.txt")).unwrap();
    let present: Vec<String> = std::fs::read_dir(repo.join("hip"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".hip"))
        .collect();
    let sources = kernel_sources(&list, &present).unwrap();
    assert_eq!(sources.len(), present.len());
    // CMake's list is that file, and it refuses an unlisted .hip file too.
    assert!(cmake.contains("file(STRINGS hip/sources.txt _lines)"));
    assert!(cmake.contains("is not listed in hip/sources.txt"));
    // The nvcc definitions, in the order compile_args passes them.
    let defines = format!(
        "target_compile_definitions(hipkern_objects PRIVATE {})",
        NVCC_DEFINES.join(" ")
    );
    assert!(cmake.contains(&defines), "CMakeLists.txt lacks {defines}");
    // Language standard, optimisation, position-independent code.
    let f = Fake::new();
    let nvcc = f.file("bin/nvcc");
    f.set("NVCC", &nvcc.display().to_string());
    let t = f.resolve().unwrap();
    let args = compile_args(&t, Path::new("k.hip"), Path::new("k.o"), &[]).join(" ");
    for flag in ["-std=c++17", "-O3", "-fPIC"] {
        assert!(args.contains(flag), "{flag} not in {args}");
    }
    for needle in [
        "${_lang}_STANDARD 17",
        "POSITION_INDEPENDENT_CODE ON",
        "set(CMAKE_HIP_FLAGS_RELEASE \"-O3\"",
        "set(CMAKE_CUDA_FLAGS_RELEASE \"-O3\"",
        "set(CMAKE_HIP_ARCHITECTURES gfx1201)",
        "set(CMAKE_CUDA_ARCHITECTURES 90)",
    ] {
        assert!(cmake.contains(needle), "CMakeLists.txt lacks {needle}");
    }
    assert_eq!(DEFAULT_OFFLOAD_ARCH, "gfx1201");
    assert_eq!(DEFAULT_CUDA_ARCH, "sm_90");
}

#[test]
fn check_only_is_a_switch() {
    let f = Fake::new();
    let env = |k: &str| f.vars.borrow().get(k).cloned();
    assert!(!check_only(&env).unwrap());
    f.set("HIPKERN_CHECK_ONLY", "1");
    assert!(check_only(&env).unwrap());
    f.set("HIPKERN_CHECK_ONLY", "0");
    assert!(!check_only(&env).unwrap());
    f.set("HIPKERN_CHECK_ONLY", "yes");
    assert!(check_only(&env)
        .unwrap_err()
        .contains("HIPKERN_CHECK_ONLY=yes"));
}

#[test]
fn hip_flags_split_on_ascii_whitespace() {
    assert!(parse_hip_flags(None).is_empty());
    assert!(parse_hip_flags(Some("")).is_empty());
    assert!(parse_hip_flags(Some(" \t\n ")).is_empty());
    assert_eq!(
        parse_hip_flags(Some("  -g\t-DX=1\n --resource-usage ")),
        vec!["-g", "-DX=1", "--resource-usage"]
    );
    // No shell quoting: the quotes stay, the space splits.
    assert_eq!(
        parse_hip_flags(Some("-DNAME=\"a b\"")),
        vec!["-DNAME=\"a", "b\""]
    );
}

#[test]
fn hip_flags_come_after_hipkerns_own_for_every_compiler() {
    let f = Fake::new();
    let hipcc = f.file("rocm/bin/hipcc");
    let clang = f.file("llvm/bin/clang++");
    let nvcc = f.file("cuda/bin/nvcc");
    f.set("HIPKERN_HIP_FLAGS", " -O2  -DEXTRA ");
    let mut kinds = Vec::new();
    for (var_name, value, hip_platform) in [
        ("HIPCC", &hipcc, ""),
        ("HIPCC", &clang, ""),
        ("HIPCC", &hipcc, "nvidia"),
        ("NVCC", &nvcc, ""),
    ] {
        // An empty value counts as unset.
        f.set("HIPCC", "")
            .set("NVCC", "")
            .set(var_name, &value.display().to_string())
            .set("HIP_PLATFORM", hip_platform);
        let t = f.resolve().unwrap();
        kinds.push(t.compiler.as_ref().unwrap().1);
        assert_eq!(t.extra_flags, vec!["-O2", "-DEXTRA"]);
        let a = compile_args(
            &t,
            Path::new("k.hip"),
            Path::new("k.o"),
            &[PathBuf::from("/inc")],
        );
        let s = a.join(" ");
        assert!(s.ends_with("-I/inc -O2 -DEXTRA -c k.hip -o k.o"), "{s}");
        assert!(s.find("-O3").unwrap() < s.find("-O2").unwrap(), "{s}");
    }
    assert_eq!(
        kinds,
        vec![
            CompilerKind::Hipcc,
            CompilerKind::ClangHip,
            CompilerKind::HipccNvidia,
            CompilerKind::Nvcc
        ]
    );
    // Unset or blank: the arguments are as before.
    f.set("HIPKERN_HIP_FLAGS", "   ");
    let t = f.resolve().unwrap();
    assert!(t.extra_flags.is_empty());
    let s = compile_args(&t, Path::new("k.hip"), Path::new("k.o"), &[]).join(" ");
    assert!(
        s.ends_with("-fPIC -gencode=arch=compute_90,code=[sm_90,compute_90] -c k.hip -o k.o"),
        "{s}"
    );
    assert!(ENV_VARS.contains(&"HIPKERN_HIP_FLAGS"));
}

#[test]
fn require_device_turns_the_cpu_fallback_into_an_error() {
    // Without the feature: the fallback, marked as one.
    let f = Fake::new();
    let t = f.resolve_with(false).unwrap();
    assert_eq!(t.platform, Platform::Cpu);
    assert!(t.fallback);
    // With it: an error naming every place looked at and the variables.
    f.set("CUDA_PATH", &f.root("cuda"));
    let e = f.resolve_with(true).unwrap_err();
    for needle in [
        "require-device",
        "HIPCC (unset)",
        "$ROCM_PATH/bin/hipcc (ROCM_PATH unset)",
        "$HIP_PATH/bin/hipcc (HIP_PATH unset)",
        "hipcc on PATH",
        "/opt/rocm/bin/hipcc",
        "NVCC (unset)",
        "$CUDA_HOME/bin/nvcc (CUDA_HOME unset)",
        "nvcc on PATH",
        "HIPKERN_PLATFORM=amd or nvidia",
        "ROCM_PATH=",
        "CUDA_PATH=",
    ] {
        assert!(e.contains(needle), "{needle} not in {e}");
    }
    // A root that is set says which file was missing.
    let missing = f.dir.path().join("cuda/bin/nvcc").display().to_string();
    assert!(e.contains(&format!("{missing} does not exist")), "{e}");
    // A found compiler is unaffected by the feature.
    f.file("cuda/bin/nvcc");
    let t = f.resolve_with(true).unwrap();
    assert_eq!(t.platform, Platform::Nvidia);
    assert!(!t.fallback);
}

#[test]
fn require_device_with_platform_cpu_is_a_contradiction() {
    let f = Fake::new();
    f.set("HIPKERN_PLATFORM", "cpu");
    let t = f.resolve_with(false).unwrap();
    assert_eq!(t.platform, Platform::Cpu);
    assert!(!t.fallback, "an explicit cpu is no fallback");
    let e = f.resolve_with(true).unwrap_err();
    assert!(
        e.contains("HIPKERN_PLATFORM=cpu")
            && e.contains("contradicts")
            && e.contains("require-device"),
        "{e}"
    );
}

#[test]
fn a_docs_rs_build_is_the_cpu_platform_without_a_warning() {
    let f = Fake::new();
    let nvcc = f.file("cuda/bin/nvcc");
    f.set("NVCC", &nvcc.display().to_string())
        .set("DOCS_RS", "1");
    let t = f.resolve().unwrap();
    assert_eq!(t.platform, Platform::Cpu);
    assert_eq!(build_report(&t, false).warning, None);
    // An explicit platform still wins (someone building docs on purpose).
    f.set("HIPKERN_PLATFORM", "nvidia");
    assert_eq!(f.resolve().unwrap().platform, Platform::Nvidia);
}

#[test]
fn only_the_automatic_cpu_fallback_warns() {
    // A device build: a plain line, no warning.
    let f = Fake::new();
    let nvcc = f.file("cuda/bin/nvcc");
    f.set("NVCC", &nvcc.display().to_string())
        .set("HIPKERN_HIP_FLAGS", "-lineinfo");
    let t = f.resolve().unwrap();
    let r = build_report(&t, false);
    assert_eq!(r.warning, None);
    assert!(
        r.line
            .starts_with("hipkern-sys: platform nvidia, compiler ")
            && r.line.contains("(Nvcc), archs [sm_90] (NVCC)")
            && r.line.contains("HIPKERN_HIP_FLAGS [-lineinfo]"),
        "{}",
        r.line
    );
    // Check-only: deliberate, so said in the line only.
    let r = build_report(&t, true);
    assert_eq!(r.warning, None);
    assert!(r.line.contains("HIPKERN_CHECK_ONLY=1"), "{}", r.line);
    // An explicit cpu: no warning.
    let g = Fake::new();
    g.set("HIPKERN_PLATFORM", "cpu");
    let r = build_report(&g.resolve().unwrap(), false);
    assert_eq!(r.warning, None);
    assert!(r
        .line
        .starts_with("hipkern-sys: platform cpu, compiler none, archs []"));
    // The fallback: one warning saying what happened and what to do.
    let h = Fake::new();
    let t = h.resolve().unwrap();
    for check_only in [false, true] {
        let w = build_report(&t, check_only)
            .warning
            .expect("the fallback warns");
        for needle in [
            "no HIP or CUDA compiler found",
            "cpu platform",
            "NoToolchain",
            "HIPCC",
            "NVCC",
            "require-device",
        ] {
            assert!(w.contains(needle), "{needle} not in {w}");
        }
        assert!(!w.contains('\n'), "a cargo:warning is one line");
    }
}

#[test]
fn fnv1a64_is_the_standard_hash() {
    // The published FNV-1a 64 test vectors.
    assert_eq!(fnv1a64(FNV1A64_OFFSET, b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(FNV1A64_OFFSET, b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(FNV1A64_OFFSET, b"foobar"), 0x8594_4171_f739_67e8);
    // Incremental: the same as one call.
    assert_eq!(
        fnv1a64(fnv1a64(FNV1A64_OFFSET, b"foo"), b"bar"),
        fnv1a64(FNV1A64_OFFSET, b"foobar")
    );
}

#[test]
fn the_fingerprint_sees_every_input_and_nothing_else() {
    let stamp = CompilerStamp {
        path: PathBuf::from("/cuda/bin/nvcc"),
        len: 1000,
        mtime_ns: 1_700_000_000_000_000_000,
    };
    let args: Vec<String> = ["-O3", "-c", "k.hip"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let src = Path::new("/hip/k.hip");
    let hdr = Path::new("/hip/include/hipkern.h");
    let cfg = Path::new("/out/hipkern_build_config.h");
    let inputs: Vec<(&Path, &[u8])> = vec![(src, b"kernel"), (hdr, b"header"), (cfg, b"cfg")];
    let base = kernel_fingerprint(&stamp, &args, &inputs);
    // Stable: the same inputs, the same text, whatever their order; a
    // fixed value (a change would recompile every kernel of every build).
    assert_eq!(base, kernel_fingerprint(&stamp, &args, &inputs));
    assert_eq!(base, "fnv1a64 3b708cc5adc2acd3\n");
    let reversed: Vec<(&Path, &[u8])> = inputs.iter().rev().copied().collect();
    assert_eq!(base, kernel_fingerprint(&stamp, &args, &reversed));

    let mut changed = Vec::new();
    let mut s = stamp.clone();
    s.path = PathBuf::from("/other/bin/nvcc");
    changed.push(kernel_fingerprint(&s, &args, &inputs));
    let mut s = stamp.clone();
    s.len += 1;
    changed.push(kernel_fingerprint(&s, &args, &inputs));
    let mut s = stamp.clone();
    s.mtime_ns += 1;
    changed.push(kernel_fingerprint(&s, &args, &inputs));
    let mut a = args.clone();
    a.push("-DEXTRA".into());
    changed.push(kernel_fingerprint(&stamp, &a, &inputs));
    // Length-prefixed: moving text between arguments is a change.
    let a: Vec<String> = ["-O3", "-ck.hip"].iter().map(|s| s.to_string()).collect();
    changed.push(kernel_fingerprint(&stamp, &a, &inputs));
    for k in 0..inputs.len() {
        let mut i = inputs.clone();
        i[k].1 = b"edited";
        changed.push(kernel_fingerprint(&stamp, &args, &i));
    }
    // A new header, and a file renamed.
    let mut i = inputs.clone();
    i.push((Path::new("/hip/include/new.h"), b""));
    changed.push(kernel_fingerprint(&stamp, &args, &i));
    let mut i = inputs.clone();
    i[1].0 = Path::new("/hip/include/renamed.h");
    changed.push(kernel_fingerprint(&stamp, &args, &i));
    for (n, c) in changed.iter().enumerate() {
        assert_ne!(c, &base, "change {n} not seen");
        for d in &changed[n + 1..] {
            assert_ne!(c, d);
        }
    }
}

#[test]
fn objects_are_reused_only_with_a_matching_fingerprint() {
    let fp = "fnv1a64 0123456789abcdef\n";
    assert!(object_is_current(Some(fp), fp, true));
    // A stored file without its newline (edited by hand) still matches.
    assert!(object_is_current(
        Some("fnv1a64 0123456789abcdef"),
        fp,
        true
    ));
    assert!(!object_is_current(Some(fp), fp, false), "object missing");
    assert!(!object_is_current(None, fp, true), "fingerprint missing");
    assert!(!object_is_current(
        Some("fnv1a64 0000000000000000\n"),
        fp,
        true
    ));
    assert!(!object_is_current(Some(""), fp, true));
}

#[test]
fn compiles_start_largest_first_and_skip_current_objects() {
    assert_eq!(
        compile_order(&[10, 500, 30, 500, 7], &[false; 5]),
        vec![1, 3, 2, 0, 4]
    );
    assert_eq!(
        compile_order(&[10, 500, 30, 500, 7], &[false, true, false, false, true]),
        vec![3, 2, 0]
    );
    assert!(compile_order(&[1, 2], &[true, true]).is_empty());
    assert_eq!(local_jobs(None, 5), 1);
    assert_eq!(local_jobs(Some("4"), 5), 4);
    assert_eq!(local_jobs(Some("16"), 5), 5);
    assert_eq!(local_jobs(Some("0"), 5), 1);
    assert_eq!(local_jobs(Some("x"), 5), 1);
    assert_eq!(local_jobs(Some("8"), 0), 1);
}
