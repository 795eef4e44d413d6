//! `--profile DIR`: samples every thread of the process with pprof from start to exit, then
//! writes `DIR/flamegraph.svg` and `DIR/profile.folded` (one `thread;outer;...;inner count` per
//! line, the input of flame graph tools and of the harness's top-functions table).
//!
//! Function names come from the symbol table, which release builds keep (they are not
//! stripped), so the profile needs no debug info.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use thiserror::Error;
use tracing::info;

/// Samples per second: not a multiple of common timer rates, so the samples do not lock step
/// with periodic work (the 1 s METRICS tick, 50 ms bursts).
pub const FREQUENCY: i32 = 99;

#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("profiler: {0}")]
    Pprof(#[from] pprof::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub struct Profiler {
    dir: PathBuf,
    guard: pprof::ProfilerGuard<'static>,
}

impl Profiler {
    /// Starts sampling now; creates `dir` so a wrong path fails at start, not at exit.
    pub fn start(dir: &Path) -> Result<Self, ProfileError> {
        std::fs::create_dir_all(dir).map_err(|source| ProfileError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let guard = pprof::ProfilerGuardBuilder::default()
            .frequency(FREQUENCY)
            // Unwinding through these from a signal handler can deadlock or crash.
            .blocklist(&["libc", "libgcc", "pthread", "vdso"])
            .build()?;
        info!("profiling at {FREQUENCY} Hz into {}", dir.display());
        Ok(Profiler {
            dir: dir.to_path_buf(),
            guard,
        })
    }

    /// Writes the flame graph and the folded stacks of everything sampled so far; returns the
    /// number of folded lines.
    pub fn finish(self) -> Result<usize, ProfileError> {
        let report = self.guard.report().build()?;
        let svg = self.dir.join("flamegraph.svg");
        let file = std::fs::File::create(&svg).map_err(|source| ProfileError::Write {
            path: svg.clone(),
            source,
        })?;
        report.flamegraph(std::io::BufWriter::new(file))?;
        let mut folded = String::new();
        let mut lines = 0;
        for (frames, count) in &report.data {
            folded.push_str(&frames.thread_name_or_id());
            // Frames are stored innermost first; folded stacks go from the root.
            for frame in frames.frames.iter().rev() {
                for symbol in frame.iter().rev() {
                    folded.push(';');
                    // A ';' or a newline inside a name would break the line's format.
                    folded.extend(symbol.name().chars().map(|c| match c {
                        ';' | '\n' => '_',
                        c => c,
                    }));
                }
            }
            let _ = writeln!(folded, " {count}");
            lines += 1;
        }
        let path = self.dir.join("profile.folded");
        std::fs::File::create(&path)
            .and_then(|mut file| file.write_all(folded.as_bytes()))
            .map_err(|source| ProfileError::Write { path, source })?;
        info!("profile written to {} ({lines} stacks)", self.dir.display());
        Ok(lines)
    }
}
