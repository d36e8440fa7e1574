//! What every CLI test needs: the repository root, and the real binary run from it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Read at run time: a test binary may have been built in another clone.
pub fn repo() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// `tenon ARGS…` from the repository root.
pub fn tenon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tenon")).args(args).current_dir(repo()).output().expect("run tenon")
}
