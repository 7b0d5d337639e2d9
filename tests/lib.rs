//! Helpers shared by the workspace end-to-end tests.

use std::path::{Path, PathBuf};

/// Root of the workspace.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Folder of the workspace's debug binaries (`CARGO_TARGET_DIR` respected).
pub fn bin_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("debug");
    for b in [
        "jitter-collect",
        "jitter-trace",
        "replay-bench",
        "jitter-emulate",
    ] {
        assert!(
            dir.join(b).exists(),
            "{} is missing: build the workspace first (cargo build --workspace, as scripts/test.sh does)",
            dir.join(b).display()
        );
    }
    dir
}
