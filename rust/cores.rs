//! The cores this process may use, read once.
//!
//! `std::thread::available_parallelism` reads the cgroup's CPU quota files
//! and the affinity mask: about 30 us a call on the development machine,
//! and 50-80 us when those files have left the caches between a server's
//! steps, where a warm one-row fill is 2-3 us. So it is asked once per
//! process; a process whose cores change later says so with
//! `set_num_threads` (thread counts) and keeps its first answer for
//! filling large buffers (`bitmaskpool`).

use std::sync::OnceLock;

/// The cores this process may use (1 if the system cannot say), read once.
pub fn available_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}
