//! Tests of the engine's making: on one CPU, and begun early for its sizes.

use std::mem::{size_of, zeroed};

use super::*;

/// The CPUs the current thread may run on.
#[expect(
    unsafe_code,
    reason = "reading the current thread's affinity into plain data"
)]
fn this_threads_cpus() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain data; the call gets its true size, and `CPU_ISSET` is
    // asked only of CPUs within it.
    unsafe {
        let mut cpus: libc::cpu_set_t = zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut cpus),
            0
        );
        (0..8 * size_of::<libc::cpu_set_t>())
            .filter(|&cpu| libc::CPU_ISSET(cpu, &cpus))
            .collect()
    }
}

#[test]
fn the_engine_is_made_on_one_cpu_and_the_thread_gets_its_cpus_back() {
    let before = this_threads_cpus();
    {
        let _pinned = one_cpu::Pinned::to_this_cpu().expect("this thread can be pinned");
        assert_eq!(this_threads_cpus().len(), 1, "pinned to one CPU");
        assert_eq!(
            std::thread::available_parallelism().map(|n| n.get()).ok(),
            Some(1),
            "wasmtime sizes its pools' shards by this"
        );
    }
    assert_eq!(this_threads_cpus(), before, "given back on drop");
    // And through the runtime: the thread that made it runs where it ran before.
    let runtime = Runtime::new(RuntimeConfig {
        state: StateConfig::Unset,
        ..RuntimeConfig::default()
    });
    assert!(runtime.is_ok(), "{:?}", runtime.err());
    assert_eq!(this_threads_cpus(), before);
}

/// An engine begun early is taken for the sizes it was begun for and for no others (the
/// runtime then makes one of its own, for its sizes).
#[test]
fn an_engine_begun_early_is_taken_only_for_its_sizes() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let sizes = EngineSizes {
        max_instances: 4,
        max_memory_bytes: 64 << 20,
    };
    let other = EngineSizes {
        max_instances: 8,
        ..sizes
    };
    rt.block_on(async {
        let made = EngineStart::begin(sizes).take(sizes).await;
        assert!(matches!(made, Some(Ok(_))), "taken for its own sizes");
        let made = EngineStart::begin(sizes).take(other).await;
        assert!(made.is_none(), "not taken for other sizes");
        let config = RuntimeConfig {
            state: StateConfig::Unset,
            max_instances: other.max_instances,
            max_memory_bytes: other.max_memory_bytes,
            ..RuntimeConfig::default()
        };
        let runtime = Runtime::with_start(config, EngineStart::begin(sizes)).await;
        assert!(runtime.is_ok(), "{:?}", runtime.err());
    });
}
