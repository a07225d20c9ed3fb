//! The `mcpbox` binary: parse arguments, set up logging on stderr, run, map the outcome to an
//! exit code. Everything else lives in the library.

use std::io::Write as _;
use std::process::ExitCode;

use mcpbox::cli::{ArgsError, Cli, run};

/// Allocations this large or larger are mapped on their own and unmapped when freed.
const MMAP_THRESHOLD_BYTES: libc::c_int = 128 << 10;

/// Tune glibc's allocator, before any other thread exists:
///
/// - Fix its threshold for mapping allocations on their own. Left dynamic, it rises with
///   every large buffer freed (up to 32 MiB), after which large request bodies and trees come
///   from the heap and stay with the process once freed: measured, eight 3 MiB requests left
///   30 MiB behind for good; fixed, nothing (BENCHMARKS.md, memory per request).
/// - Serving one client (`one_client`: stdio, and the one-shot commands), one heap for all
///   threads, unless the operator chose with `MALLOC_ARENA_MAX` or
///   `GLIBC_TUNABLES=glibc.malloc.arena_max=…`. glibc gives each thread that meets a locked
///   heap a heap of its own (up to eight per core), each kept at its own peak: under 64 calls
///   at once over stdio one heap held 1.2–1.7 MiB less, for the same CPU a call (the one
///   client's pipe is the bottleneck). Serving HTTP keeps glibc's heaps: there two busy
///   workers allocating behind one lock cost 40% of the throughput (BENCHMARKS.md, "The peak
///   under load").
#[expect(
    unsafe_code,
    reason = "libc calls with no preconditions, made before any other thread exists"
)]
fn tune_the_allocator(one_client: bool) {
    // SAFETY: `mallopt` only sets an allocator parameter; it is called from `main` before any
    // thread that could allocate concurrently is started.
    let _ = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) };
    let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.arena_max"));
    if one_client && !chosen {
        // SAFETY: as above.
        let _ = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    }
}

fn main() -> ExitCode {
    // The loader is done with the relocation records: 1.3 MiB that would otherwise stay
    // resident through start-up, adding to its peak (`file_pages`).
    let _ = mcpbox::file_pages::give_back_relocation_records();
    quiet_library_backtraces();
    let cli = match Cli::load(std::env::args_os().collect()) {
        Ok(cli) => cli,
        // Help, version and usage errors, printed as clap prints them.
        Err(ArgsError::Clap(e)) => e.exit(),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcpbox: {e}");
            return ExitCode::from(2);
        }
    };
    tune_the_allocator(!cli.serves_http());
    let telemetry = match cli.init_logging() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            // Logging is not set up, so write the one line directly; stdout stays untouched.
            let _ = writeln!(std::io::stderr(), "mcpbox: {e:#}");
            return ExitCode::from(2);
        }
    };
    let outcome = run(cli);
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    match outcome {
        Ok(outcome) => {
            if let Some(output) = outcome.output {
                // `call`'s result: the one thing it writes to stdout.
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{output}");
                let _ = stdout.flush();
            }
            if outcome.failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Wasmtime builds an error value whenever a call's store is dropped; with `RUST_BACKTRACE` set,
/// each would capture a backtrace, about a tenth of a call's CPU time. mcpbox never shows those
/// backtraces, so library backtraces stay off unless `RUST_LIB_BACKTRACE` asks for them; panics
/// still print theirs under `RUST_BACKTRACE`.
#[allow(
    unsafe_code,
    reason = "setting an environment variable is sound before any other thread exists"
)]
fn quiet_library_backtraces() {
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none()
        && std::env::var_os("RUST_BACKTRACE").is_some()
    {
        // SAFETY: the first thing `main` does; the process has no other thread yet.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
}
