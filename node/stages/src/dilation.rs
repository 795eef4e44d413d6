//! `--dilation K`, shared by the replica and the client: the process's clock runs K times slower
//! than real time (`plumbing::clock`), for scale-model runs in which the harness also holds each
//! of its threads to 1/K of a core (`fab local --dilation`, docs/local.md).

use crate::allocator;
use anyhow::{Context, Result};
use clap::Args;
use plumbing::clock::{self, MAX_FACTOR};
use tracing::info;

#[derive(Args, Clone, Debug)]
pub struct DilationArgs {
    /// Time dilation: this process's clock runs K times slower than real time (every timeout,
    /// delay, interval, rate and timestamp), for scale-model runs in which the harness also
    /// holds each of its threads to 1/K of a core (`fab local --dilation`). 1: real time.
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FACTOR)))]
    pub dilation: u32,
    /// The Unix time (ms) at which the dilated clocks of one run's processes read the real
    /// time, so that the timestamps they write compare (default: when this process starts).
    #[arg(long, value_name = "MS")]
    pub dilation_origin_ms: Option<u64>,
}

impl DilationArgs {
    /// Slows the process's clock, and the allocator's purge delay with it; call before
    /// anything reads the clock.
    pub fn apply(&self) -> Result<()> {
        clock::dilate(self.dilation, self.dilation_origin_ms)?;
        allocator::tune(self.dilation).context("tuning the allocator")?;
        if self.dilation > 1 {
            info!(
                "time dilated ×{}: every duration of this process lasts {} times as long",
                self.dilation, self.dilation
            );
        }
        Ok(())
    }
}
