//! Pinning the current thread to one CPU for a while (see `engine_with_one_shard`).

use std::mem::{size_of, zeroed};

/// The current thread, pinned to the CPU it was running on; its CPUs are given back on drop.
pub(super) struct Pinned {
    cpus: libc::cpu_set_t,
}

impl Pinned {
    /// Pin the current thread to the CPU it runs on, or `None` if its affinity cannot be
    /// read or set (a seccomp filter, more CPUs than a `cpu_set_t` holds).
    #[expect(
        unsafe_code,
        reason = "affinity calls on the current thread with a plain-data CPU set"
    )]
    pub(super) fn to_this_cpu() -> Option<Self> {
        // SAFETY: `cpu_set_t` is plain data for which all zeroes is the empty set; each call
        // gets the set's true size and acts on the calling thread (pid 0) only.
        unsafe {
            let mut cpus: libc::cpu_set_t = zeroed();
            if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut cpus) != 0 {
                return None;
            }
            let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
            if cpu >= 8 * size_of::<libc::cpu_set_t>() || !libc::CPU_ISSET(cpu, &cpus) {
                return None;
            }
            let mut one: libc::cpu_set_t = zeroed();
            libc::CPU_SET(cpu, &mut one);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &one) != 0 {
                return None;
            }
            Some(Self { cpus })
        }
    }
}

impl Drop for Pinned {
    #[expect(
        unsafe_code,
        reason = "an affinity call on the current thread with a plain-data CPU set"
    )]
    fn drop(&mut self) {
        // SAFETY: as above; `self.cpus` is the set read from this same thread.
        let failed =
            unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &self.cpus) } != 0;
        if failed {
            tracing::warn!(
                "could not give a thread back its CPUs after making the engine: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
