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
        resolve(&env, &exists, &run)
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
