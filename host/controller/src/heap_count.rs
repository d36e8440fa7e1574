//! For benchmarks (feature `heap-count`): the controller's allocator counts the bytes its
//! callers hold, and a thread appends `unix-seconds live-heap-MiB resident-MiB` to the file
//! named by `TENON_HEAP_LOG` every half second. Resident memory minus the live heap is what
//! the allocator keeps beside it (free pages not yet returned, pages one live object pins)
//! plus the binary's own pages: a heap profile alone cannot tell the two apart. One relaxed
//! atomic per allocation; the allocations are mimalloc's as in a release build.

use std::alloc::{GlobalAlloc, Layout};
use std::io::Write;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

static LIVE: AtomicIsize = AtomicIsize::new(0);

pub struct Counting;

// SAFETY: every call is passed to mimalloc unchanged; only the counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.dealloc(p, l) }
    }

    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.alloc_zeroed(l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        LIVE.fetch_add(size as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { mimalloc::MiMalloc.realloc(p, l, size) }
    }
}

/// Starts the log when `TENON_HEAP_LOG` names a file.
pub fn start() {
    let Ok(path) = std::env::var("TENON_HEAP_LOG") else { return };
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
            // statm's second field: resident pages.
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
            let pages: u64 = statm.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            let live = LIVE.load(Ordering::Relaxed).max(0) as u64;
            let line = format!("{now:.1} {} {}\n", live >> 20, (pages * 4096) >> 20);
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(&path) {
                let _ = f.write_all(line.as_bytes());
            }
        }
    });
}
