//! Transparent huge pages off for the controller process. mimalloc asks the kernel for huge
//! pages, and a 2 MiB page stays resident while anything in it is live: after a 10,000-pod
//! wave the controller held 120 MiB of them and its RSS stayed near the wave's peak (393
//! MiB when the cluster settled; 278 MiB with them off, docs/benchmarks.md). Setting
//! `MIMALLOC_ALLOW_THP` keeps mimalloc's own choice.

/// Turns huge pages off for this process unless `MIMALLOC_ALLOW_THP` is set; whether it did.
pub fn disable_unless_allowed() -> std::io::Result<bool> {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return Ok(false);
    }
    disable()
}

#[cfg(target_os = "linux")]
fn disable() -> std::io::Result<bool> {
    rustix::thread::disable_transparent_huge_pages(true)?;
    Ok(true)
}

#[cfg(not(target_os = "linux"))]
fn disable() -> std::io::Result<bool> {
    Ok(false)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn huge_pages_are_off_for_the_process_after_the_call() {
        assert!(std::env::var_os("MIMALLOC_ALLOW_THP").is_none(), "the test environment sets MIMALLOC_ALLOW_THP");
        assert!(super::disable_unless_allowed().unwrap());
        assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap());
    }
}
