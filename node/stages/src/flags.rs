//! Which flags of `node run` and `client` a mode takes, with their defaults, choices and bounds:
//! the one place that says so. Each binary lists a [`FlagRule`] beside its clap arguments for
//! every flag that means something only in some modes or within some bounds; [`check`] refuses a
//! command line that breaks one, and [`describe`] prints the same rules per mode for the harness
//! (`node describe`, `client --describe`), which builds its checks from them instead of keeping
//! lists of modes of its own.
//!
//! Defaults and choices are read from the clap arguments themselves, so they are written once.

use crate::modes::{Execution, Mode, Pipeline};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};
use serde::Serialize;
use std::str::FromStr;
use thiserror::Error;

/// A parser of a flag that takes one of `all` by name: `--help` and [`describe`] list the
/// names, and an unknown one is refused with them (for the executor's settings, which parse
/// themselves with `FromStr`).
pub fn one_of<T>(all: &[T], name: fn(&T) -> &'static str) -> impl TypedValueParser<Value = T>
where
    T: FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    let names: Vec<&'static str> = all.iter().map(name).collect();
    PossibleValuesParser::new(names).try_map(|name| name.parse::<T>())
}

/// What a flag needs of a mode's pipeline to mean anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Every mode takes it.
    Nothing,
    /// A committee: consensus, a mempool, clients that send to nodes.
    Consensus,
    /// The standalone process (`movevm`), where the client runs the stages itself; in the other
    /// modes the nodes take the flag.
    Standalone,
    /// Signed transactions.
    Signatures,
    /// An executor, native or Move: transactions that pay someone.
    Execution,
    /// The Move VM.
    Move,
    /// Opaque transactions of a given size (nothing checks or executes them).
    Opaque,
}

impl Needs {
    pub fn met_by(self, pipeline: &Pipeline) -> bool {
        match self {
            Needs::Nothing => true,
            Needs::Consensus => pipeline.consensus,
            Needs::Standalone => !pipeline.consensus,
            Needs::Signatures => pipeline.signatures,
            Needs::Execution => pipeline.execution.is_some(),
            Needs::Move => pipeline.execution == Some(Execution::Move),
            Needs::Opaque => pipeline.execution.is_none(),
        }
    }

    /// What a mode that fails the need lacks, for an error and for the harness's.
    pub fn what(self) -> &'static str {
        match self {
            Needs::Nothing => "nothing",
            Needs::Consensus => "a committee",
            Needs::Standalone => "the standalone process (nodes take it as a flag of `node run`)",
            Needs::Signatures => "signatures",
            Needs::Execution => "an executor",
            Needs::Move => "the Move VM",
            Needs::Opaque => "opaque transactions",
        }
    }
}

/// Where a flag applies and what it may be: a flag without a rule applies to every mode, within
/// what clap's parser takes.
#[derive(Clone, Copy, Debug)]
pub struct FlagRule {
    /// The long name, as typed (`exec-threads`).
    pub flag: &'static str,
    pub needs: Needs,
    /// Another flag's values it needs, when given a value other than its default (`--fees
    /// per-tx` only with `--vm adapter`).
    pub with: Option<(&'static str, &'static [&'static str])>,
    /// Inclusive bounds of a number.
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl FlagRule {
    pub const fn new(flag: &'static str, needs: Needs) -> Self {
        FlagRule {
            flag,
            needs,
            with: None,
            min: None,
            max: None,
        }
    }

    pub const fn with(mut self, flag: &'static str, values: &'static [&'static str]) -> Self {
        self.with = Some((flag, values));
        self
    }

    pub const fn at_least(mut self, min: f64) -> Self {
        self.min = Some(min);
        self
    }

    pub const fn between(mut self, min: f64, max: f64) -> Self {
        self.min = Some(min);
        self.max = Some(max);
        self
    }
}

/// A flag as `describe` prints it for one mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlagDescription {
    /// The long name (`exec-threads`).
    pub name: String,
    /// What the flag does: its `--help` text (the `///` comment above it), the one place that
    /// says so; the harness shows it in `fab local --help`.
    pub help: Option<String>,
    /// The value the binary takes when the flag is not given (none: off, or decided at start).
    pub default: Option<String>,
    /// The values it takes, when they are a list.
    pub choices: Vec<String>,
    /// Whether a switch (given without a value).
    pub switch: bool,
    /// Whether this mode takes it; when not, what the mode lacks.
    pub applies: bool,
    pub needs: Option<&'static str>,
    /// Another flag's values it needs, when given a value other than its default.
    pub with: Option<FlagCondition>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlagCondition {
    pub flag: &'static str,
    pub values: Vec<&'static str>,
}

#[derive(Debug, Error, PartialEq)]
pub enum FlagError {
    #[error("--{flag} needs {needs}: --mode {mode} has none")]
    NotForMode {
        flag: &'static str,
        needs: &'static str,
        mode: &'static str,
    },
    #[error("--{flag} is for --{other} {}, not {value}", .values.join("|"))]
    NotWith {
        flag: &'static str,
        other: &'static str,
        values: &'static [&'static str],
        value: String,
    },
    #[error("--{flag} must be {bounds}, got {value}")]
    OutOfBounds {
        flag: &'static str,
        bounds: String,
        value: String,
    },
    #[error("a rule names --{0}, which this command does not take")]
    UnknownFlag(&'static str),
}

/// Refuses `matches` (of `command`) if a flag given a value other than its default breaks its
/// rule for `mode`: the mode lacks what it needs, another flag has a value it does not go with,
/// or a number is out of its bounds.
pub fn check(
    command: &Command,
    matches: &ArgMatches,
    rules: &[FlagRule],
    mode: Mode,
) -> Result<(), FlagError> {
    let pipeline = mode.pipeline();
    for rule in rules {
        let arg = find(command, rule.flag)?;
        let Some(value) = given_value(arg, matches) else {
            continue;
        };
        if !rule.needs.met_by(&pipeline) {
            return Err(FlagError::NotForMode {
                flag: rule.flag,
                needs: rule.needs.what(),
                mode: mode.as_str(),
            });
        }
        if let Some((other, values)) = rule.with {
            let other_value = value_of(find(command, other)?, matches).unwrap_or_default();
            if !values.contains(&other_value.as_str()) {
                return Err(FlagError::NotWith {
                    flag: rule.flag,
                    other,
                    values,
                    value: other_value,
                });
            }
        }
        let number: Option<f64> = value.parse().ok();
        let below = matches!((number, rule.min), (Some(n), Some(min)) if n < min);
        let above = matches!((number, rule.max), (Some(n), Some(max)) if n > max);
        if below || above {
            return Err(FlagError::OutOfBounds {
                flag: rule.flag,
                bounds: bounds_text(rule),
                value,
            });
        }
    }
    Ok(())
}

/// Every flag of `command` (help and version aside) as `mode` sees it.
pub fn describe(
    command: &Command,
    rules: &[FlagRule],
    mode: Mode,
) -> Result<Vec<FlagDescription>, FlagError> {
    for rule in rules {
        find(command, rule.flag)?;
    }
    let pipeline = mode.pipeline();
    let described = command
        .get_arguments()
        .filter_map(|arg| arg.get_long().map(|long| (arg, long)))
        .filter(|(_, long)| !matches!(*long, "help" | "version"))
        .map(|(arg, long)| {
            let rule = rules.iter().find(|rule| rule.flag == long);
            let needs = rule.map_or(Needs::Nothing, |rule| rule.needs);
            let applies = needs.met_by(&pipeline);
            let switch = matches!(arg.get_action(), ArgAction::SetTrue);
            FlagDescription {
                name: long.to_string(),
                help: arg
                    .get_long_help()
                    .or_else(|| arg.get_help())
                    .map(|help| help.to_string()),
                default: if switch { None } else { default_of(arg) },
                // A switch's `true`/`false` are clap's, not values one types.
                choices: if switch {
                    Vec::new()
                } else {
                    arg.get_possible_values()
                        .iter()
                        .map(|value| value.get_name().to_string())
                        .collect()
                },
                switch,
                applies,
                needs: (!applies).then(|| needs.what()),
                with: rule
                    .and_then(|rule| rule.with)
                    .map(|(flag, values)| FlagCondition {
                        flag,
                        values: values.to_vec(),
                    }),
                min: rule.and_then(|rule| rule.min),
                max: rule.and_then(|rule| rule.max),
            }
        })
        .collect();
    Ok(described)
}

fn find<'a>(command: &'a Command, flag: &'static str) -> Result<&'a Arg, FlagError> {
    command
        .get_arguments()
        .find(|arg| arg.get_long() == Some(flag))
        .ok_or(FlagError::UnknownFlag(flag))
}

fn default_of(arg: &Arg) -> Option<String> {
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|value| value.to_string_lossy().into_owned())
        .collect();
    (!defaults.is_empty()).then(|| defaults.join(","))
}

/// The flag's value as parsed (its default when not given), as text.
fn value_of(arg: &Arg, matches: &ArgMatches) -> Option<String> {
    let raw = matches.try_get_raw(arg.get_id().as_str()).ok()??;
    let values: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
    Some(values.join(","))
}

/// The flag's value when it was given one other than its default; `None` otherwise.
fn given_value(arg: &Arg, matches: &ArgMatches) -> Option<String> {
    let source = matches.value_source(arg.get_id().as_str())?;
    if source == ValueSource::DefaultValue {
        return None;
    }
    let value = value_of(arg, matches)?;
    let default = if matches!(arg.get_action(), ArgAction::SetTrue) {
        Some("false".to_string())
    } else {
        default_of(arg)
    };
    (Some(&value) != default.as_ref()).then_some(value)
}

fn bounds_text(rule: &FlagRule) -> String {
    match (rule.min, rule.max) {
        (Some(min), Some(max)) => format!("within {min}..={max}"),
        (Some(min), None) => format!("at least {min}"),
        (None, Some(max)) => format!("at most {max}"),
        (None, None) => "anything".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Args, FromArgMatches};

    #[derive(Args, Debug)]
    struct Example {
        #[arg(long, value_enum)]
        mode: Mode,
        /// What runs the transactions: said once, here.
        #[arg(long, default_value = "bare")]
        vm: String,
        #[arg(long, default_value = "block")]
        fees: String,
        #[arg(long)]
        threads: Option<usize>,
        #[arg(long, default_value_t = 0.0)]
        share: f64,
        #[arg(long)]
        quiet: bool,
        #[arg(long, default_value_t = 200)]
        size: usize,
    }

    const RULES: &[FlagRule] = &[
        FlagRule::new("vm", Needs::Move),
        FlagRule::new("fees", Needs::Move).with("vm", &["adapter"]),
        FlagRule::new("threads", Needs::Signatures).at_least(1.0),
        FlagRule::new("share", Needs::Signatures).between(0.0, 1.0),
        FlagRule::new("quiet", Needs::Consensus),
        FlagRule::new("size", Needs::Opaque).at_least(9.0),
    ];

    fn command() -> Command {
        Example::augment_args(Command::new("example"))
    }

    fn checked(line: &[&str]) -> Result<(), FlagError> {
        let command = command();
        let matches = command
            .clone()
            .try_get_matches_from(std::iter::once("example").chain(line.iter().copied()))
            .expect("the line parses");
        let mode = Example::from_arg_matches(&matches).expect("fields").mode;
        check(&command, &matches, RULES, mode)
    }

    #[test]
    fn a_flag_at_its_default_is_taken_in_any_mode() {
        assert_eq!(checked(&["--mode", "hotstuff", "--vm", "bare"]), Ok(()));
        assert_eq!(checked(&["--mode", "hotstuff", "--share", "0"]), Ok(()));
        assert_eq!(checked(&["--mode", "movevm"]), Ok(()));
    }

    #[test]
    fn a_flag_the_mode_lacks_the_means_for_is_refused_with_what_it_needs() {
        let refused = checked(&["--mode", "hotcrypto", "--vm", "adapter"]).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "--vm needs the Move VM: --mode hotcrypto has none"
        );
        assert!(checked(&["--mode", "hotmove", "--vm", "adapter"]).is_ok());
        assert!(checked(&["--mode", "movevm", "--quiet"]).is_err());
        assert!(checked(&["--mode", "hotstuff", "--quiet"]).is_ok());
    }

    #[test]
    fn a_flag_that_goes_with_another_value_names_it() {
        let refused = checked(&["--mode", "hotmove", "--fees", "per-tx"]).unwrap_err();
        assert_eq!(refused.to_string(), "--fees is for --vm adapter, not bare");
        assert!(checked(&["--mode", "hotmove", "--fees", "per-tx", "--vm", "adapter"]).is_ok());
    }

    #[test]
    fn numbers_out_of_bounds_are_refused() {
        assert!(checked(&["--mode", "hotcrypto", "--threads", "0"]).is_err());
        assert!(checked(&["--mode", "hotcrypto", "--threads", "1"]).is_ok());
        assert!(checked(&["--mode", "hotcrypto", "--share", "1.5"]).is_err());
        assert!(checked(&["--mode", "hotstuff", "--size", "8"]).is_err());
        assert!(checked(&["--mode", "hotstuff", "--size", "9"]).is_ok());
    }

    #[test]
    fn the_description_says_per_mode_what_applies_with_defaults_and_bounds() {
        let hotstuff = describe(&command(), RULES, Mode::Hotstuff).expect("rules name flags");
        let flag = |name: &str| {
            hotstuff
                .iter()
                .find(|flag| flag.name == name)
                .cloned()
                .expect("described")
        };
        let vm = flag("vm");
        assert_eq!(
            vm.help.as_deref(),
            Some("What runs the transactions: said once, here")
        );
        assert_eq!(flag("fees").help, None);
        assert_eq!(vm.default.as_deref(), Some("bare"));
        assert!(!vm.applies);
        assert_eq!(vm.needs, Some("the Move VM"));
        let size = flag("size");
        assert!(size.applies && size.needs.is_none());
        assert_eq!((size.min, size.max), (Some(9.0), None));
        assert!(flag("quiet").switch);
        assert_eq!(flag("threads").default, None);
        let mode = flag("mode");
        assert!(mode.applies);
        assert_eq!(mode.choices, ["hotstuff", "hotcrypto", "hotmove", "movevm"]);
        let fees = flag("fees");
        assert_eq!(
            fees.with,
            Some(FlagCondition {
                flag: "vm",
                values: vec!["adapter"]
            })
        );
        let movevm = describe(&command(), RULES, Mode::Movevm).expect("rules name flags");
        assert!(movevm.iter().any(|flag| flag.name == "vm" && flag.applies));
    }

    #[test]
    fn a_rule_for_a_flag_the_command_lacks_is_an_error() {
        let rules = [FlagRule::new("nonesuch", Needs::Move)];
        assert_eq!(
            describe(&command(), &rules, Mode::Hotmove).unwrap_err(),
            FlagError::UnknownFlag("nonesuch")
        );
    }
}
