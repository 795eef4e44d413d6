//! Compiles the Move sources in `executor/move/` once per process.
//!
//! Why at start-up and not in a build script: a build script would make `mv-compiler` (and the
//! Move crates under it) a build dependency, compiled a second time in the build-script profile,
//! which costs minutes on the 2-core machines this runs on; compiling the three tiny files at
//! start took about 4 ms for the coin (measured in debug and release), and happens once per process.
//! The sources are embedded in the binary, so a deployed binary does not need the source tree: they
//! are written to a private temporary directory because the compiler only reads files.

use move_compiler::compiled_unit::CompiledUnitEnum;
use move_compiler::diagnostics::report_diagnostics_to_buffer;
use move_compiler::shared::NumericalAddress;
use move_compiler::{Compiler, Flags};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use thiserror::Error;

const COIN_SOURCE: &str = include_str!("../../move/Coin.move");
const TRANSFER_SOURCE: &str = include_str!("../../move/transfer.move");
const ACCOUNT_SOURCE: &str = include_str!("../../move/Account.move");
const WORKLOAD_SOURCES: [(&str, &str); 5] = [
    ("DoNothing.move", include_str!("../../move/DoNothing.move")),
    ("CpuHeavy.move", include_str!("../../move/CpuHeavy.move")),
    ("KvStore.move", include_str!("../../move/KvStore.move")),
    ("SmallBank.move", include_str!("../../move/SmallBank.move")),
    ("workloads.move", include_str!("../../move/workloads.move")),
];
/// A dependency only: its functions compile to vector instructions (see the file).
const VECTOR_SOURCE: &str = include_str!("../../move/vector.move");

/// The modules every Move executor publishes at genesis, in an order where each one's
/// dependencies come first. `Coin` names `SmallBank` its friend, so both are always published
/// (the VM loads a stored module's friends with it), whatever the workload.
pub(crate) const WORKLOAD_MODULES: [&str; 4] = ["DoNothing", "CpuHeavy", "KvStore", "SmallBank"];

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MoveCompileError {
    #[error("cannot stage Move sources in {path}: {message}")]
    Io { path: String, message: String },
    #[error("Move compilation failed:\n{0}")]
    Compile(String),
    #[error("Move sources compiled to an unexpected set of units: {0}")]
    UnexpectedUnits(String),
}

/// The bytecode of the coin: its module and the transfer script every Move transfer carries,
/// the adapter's account module (published only under `--vm=adapter`), and the workloads' modules
/// and scripts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledMove {
    pub coin_module: Vec<u8>,
    pub account_module: Vec<u8>,
    pub transfer_script: Vec<u8>,
    /// In [`WORKLOAD_MODULES`] order.
    pub workload_modules: Vec<Vec<u8>>,
    /// The workloads' scripts by the name of their function (`do_nothing`, `send_payment`, ...).
    pub workload_scripts: BTreeMap<String, Vec<u8>>,
}

impl CompiledMove {
    /// The compiled sources, compiled on first use and shared by every executor in the process.
    pub fn get() -> Result<&'static CompiledMove, MoveCompileError> {
        static COMPILED: OnceLock<Result<CompiledMove, MoveCompileError>> = OnceLock::new();
        COMPILED.get_or_init(compile).as_ref().map_err(Clone::clone)
    }
}

/// A directory only this call uses, removed when dropped.
struct StagingDir(PathBuf);

impl StagingDir {
    fn create() -> Result<Self, MoveCompileError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "hotmove-move-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).map_err(|e| io_error(&path, e))?;
        Ok(StagingDir(path))
    }

    fn write(&self, name: &str, text: &str) -> Result<String, MoveCompileError> {
        let path = self.0.join(name);
        std::fs::write(&path, text).map_err(|e| io_error(&path, e))?;
        Ok(path.display().to_string())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn io_error(path: &std::path::Path, error: std::io::Error) -> MoveCompileError {
    MoveCompileError::Io {
        path: path.display().to_string(),
        message: error.to_string(),
    }
}

fn compile() -> Result<CompiledMove, MoveCompileError> {
    let dir = StagingDir::create()?;
    let mut targets = vec![
        dir.write("Coin.move", COIN_SOURCE)?,
        dir.write("transfer.move", TRANSFER_SOURCE)?,
        dir.write("Account.move", ACCOUNT_SOURCE)?,
    ];
    for (name, source) in WORKLOAD_SOURCES {
        targets.push(dir.write(name, source)?);
    }
    let deps = vec![dir.write("vector.move", VECTOR_SOURCE)?];
    let std_address = NumericalAddress::parse_str("0x1").map_err(MoveCompileError::Compile)?;
    let named_addresses = BTreeMap::from([("std".to_string(), std_address)]);
    let (files, result) = Compiler::from_files(targets, deps, named_addresses)
        .set_flags(Flags::empty())
        .build()
        .map_err(|e| MoveCompileError::Compile(e.to_string()))?;
    // Warnings are ignored: the sources are ours and fixed; errors are reported in full.
    let (units, _warnings) = result.map_err(|diagnostics| {
        let report = report_diagnostics_to_buffer(&files, diagnostics);
        MoveCompileError::Compile(String::from_utf8_lossy(&report).into_owned())
    })?;

    let mut modules = BTreeMap::new();
    let mut scripts = BTreeMap::new();
    for unit in units {
        let unit = unit.into_compiled_unit();
        let bytes = unit.serialize(None);
        match unit {
            CompiledUnitEnum::Module(module) => {
                modules.insert(module.name.to_string(), bytes);
            }
            CompiledUnitEnum::Script(script) => {
                scripts.insert(script.name.to_string(), bytes);
            }
        }
    }
    let take = |units: &mut BTreeMap<String, Vec<u8>>, name: &str| {
        units
            .remove(name)
            .ok_or_else(|| MoveCompileError::UnexpectedUnits(format!("{name} is missing")))
    };
    let coin = take(&mut modules, "Coin")?;
    let account = take(&mut modules, "Account")?;
    let workload_modules = WORKLOAD_MODULES
        .iter()
        .map(|name| take(&mut modules, name))
        .collect::<Result<_, _>>()?;
    // The transfer script's function is `main`; every other script is a workload's.
    let transfer_script = take(&mut scripts, "main")?;
    if !modules.is_empty() {
        return Err(MoveCompileError::UnexpectedUnits(format!(
            "extra modules {:?}",
            modules.keys().collect::<Vec<_>>(),
        )));
    }
    Ok(CompiledMove {
        coin_module: coin,
        account_module: account,
        transfer_script,
        workload_modules,
        workload_scripts: scripts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_compile_to_the_modules_and_scripts() {
        let compiled = CompiledMove::get().expect("compile");
        assert!(!compiled.coin_module.is_empty());
        assert!(!compiled.transfer_script.is_empty());
        assert_eq!(compiled.workload_modules.len(), WORKLOAD_MODULES.len());
        assert_eq!(
            compiled.workload_scripts.keys().collect::<Vec<_>>(),
            [
                "amalgamate",
                "cpu_heavy",
                "deposit_checking",
                "do_nothing",
                "get_balance",
                "kv_store",
                "send_payment",
                "transact_savings",
                "write_check"
            ]
        );
        // Compiling again gives the same bytes: clients and nodes must agree on the script.
        assert_eq!(&compile().expect("compile again"), compiled);
    }
}
