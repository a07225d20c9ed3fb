//! The `mcpbox` binary: parse arguments, set up logging on stderr, run, map the outcome to an
//! exit code. Everything else lives in the library.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Parser as _;
use mcpbox::cli::{Cli, run};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = cli.init_logging() {
        // Logging is not set up, so write the one line directly; stdout stays untouched.
        let _ = writeln!(std::io::stderr(), "mcpbox: {e:#}");
        return ExitCode::from(2);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
