//! Turns hipkern-sys's `links` metadata into `cfg(hipkern_platform = "...")`.
fn main() {
    println!("cargo:rustc-check-cfg=cfg(hipkern_platform, values(\"amd\", \"nvidia\", \"cpu\"))");
    println!("cargo:rerun-if-env-changed=DEP_HIPKERN_PLATFORM");
    let platform = std::env::var("DEP_HIPKERN_PLATFORM").unwrap_or_else(|_| "cpu".into());
    match platform.as_str() {
        "amd" | "nvidia" | "cpu" => println!("cargo:rustc-cfg=hipkern_platform=\"{platform}\""),
        other => panic!("hipkern-sys reported an unknown platform {other:?}"),
    }
    let archs = std::env::var("DEP_HIPKERN_ARCHS").unwrap_or_default();
    println!("cargo:rustc-env=HIPKERN_COMPILED_ARCHS={archs}");
}
