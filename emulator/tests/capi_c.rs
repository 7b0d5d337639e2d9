//! The C ABI from C: `emulator/include/jitter_emulator.h` declares exactly what `capi.rs`
//! exports, and a C program (`tests/capi/use_capi.c`) compiled against it runs every entry
//! point. Skips, saying why, without a C compiler.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(p: &str) -> String {
    std::fs::read_to_string(manifest().join(p)).unwrap()
}

/// Words following `prefix` up to the first character that cannot be in a C name.
fn names_after(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            text[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|n| !n.is_empty())
        .collect()
}

#[test]
fn the_header_declares_exactly_the_exported_functions_and_codes() {
    let rust = read("src/capi.rs");
    let header = read("include/jitter_emulator.h");
    let exported = names_after(&rust, "extern \"C\" fn ");
    let declared: BTreeSet<String> = ["int jb_", "double jb_"]
        .iter()
        .flat_map(|p| names_after(&header, p))
        .map(|n| format!("jb_{n}"))
        .collect();
    assert!(exported.len() >= 7, "{exported:?}");
    assert_eq!(exported, declared);
    // Every code with the same value on both sides.
    let consts = names_after(&rust, "pub const ");
    let defines = names_after(&header, "#define JB_");
    assert_eq!(
        consts,
        defines
            .iter()
            .map(|d| format!("JB_{d}"))
            .collect::<BTreeSet<_>>()
    );
    for c in &consts {
        let value = |text: &str, after: &str| -> String {
            let i = text.find(after).unwrap() + after.len();
            text[i..]
                .chars()
                .skip_while(|ch| !(ch.is_ascii_digit() || *ch == '-'))
                .take_while(|ch| ch.is_ascii_digit() || *ch == '-')
                .collect()
        };
        assert_eq!(
            value(&rust, &format!("pub const {c}: c_int = ")),
            value(&header, &format!("#define {c} ")),
            "{c}"
        );
    }
}

/// The crate's shared library next to this test's executable (`target/<profile>/deps/..`).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    [deps.parent().unwrap().to_path_buf(), deps]
        .into_iter()
        .find(|d| d.join("libjitter_emulator.so").exists())
        .expect("libjitter_emulator.so is built with the crate's tests")
}

#[test]
fn a_c_program_compiled_against_the_header_runs_every_entry_point() {
    let have_cc = Command::new("sh")
        .args(["-c", "command -v cc"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have_cc {
        println!("skipped: no C compiler (cc) on PATH");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jtr");
    // Sparse noise (20 µs every 10 ms over 1 s) so that the program barely notices.
    let s = jitter_emulator::calibration::periodic_stream(10_000_000, 20_000, 100);
    let mut t = jitter_trace::Trace {
        streams: vec![s],
        ..jitter_trace::Trace::default()
    };
    t.sync_header();
    jitter_trace::write_trace(&trace, &t).unwrap();
    let lib = library_dir();
    let exe = dir.path().join("use_capi");
    let out = Command::new("timeout")
        .args([
            "60",
            "cc",
            "-std=gnu11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
        ])
        .arg(&exe)
        .arg(manifest().join("tests/capi/use_capi.c"))
        .arg("-I")
        .arg(manifest().join("include"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-ljitter_emulator")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new("timeout")
        .arg("60")
        .arg(&exe)
        .arg(&trace)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.starts_with("ok "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
