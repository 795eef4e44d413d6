//! How the binaries log: `tracing` events to standard error, filtered by `RUST_LOG` (`info` when
//! it is unset or does not parse). The replica and the client set it up the same way, here.

use tracing_subscriber::EnvFilter;

/// Installs the process-wide subscriber; call once, first thing in `main`.
pub fn init() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
}
