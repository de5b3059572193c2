//! wagate configuration, shared by `wagate` and `wagate-worker`: the knob definitions (`knobs`), the value
//! rules (`values`), where values come from ([`Source`]: the process environment, then `.env` in the working
//! directory) and how a binary stops on `--help` or a bad value ([`load`], [`Stop`]).
//!
//! Values are read through a [`Source`], never from `std::env` directly, so tests pass a map and the process
//! environment is never changed. Surrounding whitespace is ignored and an empty value reads as unset. A
//! command-line option (`--api-port 8080`) wins over the environment.

pub mod cases;
pub mod knobs;
pub mod values;

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Command, CommandFactory, FromArgMatches};

pub use knobs::{
    DatabaseType, EngineType, LogFormat, LogLevel, MainDbReplication, NodeCli, NodeEnv, NodeRole,
    S3Config, StorageConfig, StorageType, TraceSampler, WorkerCli,
};

/// The exit code of a refused configuration, the same for both binaries.
pub const EXIT_REFUSED: u8 = 2;

/// Why boot refuses: the variable and the rule it broke. Printed as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub var: String,
    pub rule: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: {} {}", self.var, self.rule)
    }
}

impl std::error::Error for ConfigError {}

pub fn refuse(var: impl Into<String>, rule: impl Into<String>) -> ConfigError {
    ConfigError {
        var: var.into(),
        rule: rule.into(),
    }
}

/// Why a binary stops before starting anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `--help` or `--version`: the text to print on stdout, then exit 0.
    Show(String),
    /// A bad value: print the one line on stderr, then exit [`EXIT_REFUSED`].
    Refused(ConfigError),
}

impl From<ConfigError> for Stop {
    fn from(e: ConfigError) -> Stop {
        Stop::Refused(e)
    }
}

impl Stop {
    /// Prints what the binary must print and gives its exit code.
    pub fn exit(self) -> ExitCode {
        match self {
            Stop::Show(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Stop::Refused(e) => {
                eprintln!("{e}");
                ExitCode::from(EXIT_REFUSED)
            }
        }
    }
}

type Lookup = Box<dyn Fn(&str) -> Option<String>>;

/// Where knob values come from: one lookup. [`Source::process`] reads the environment, then `.env`.
pub struct Source {
    lookup: Lookup,
}

impl Source {
    pub fn new(lookup: impl Fn(&str) -> Option<String> + 'static) -> Source {
        Source {
            lookup: Box::new(lookup),
        }
    }

    /// A fixed set of values (tests).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Source {
        let map: HashMap<String, String> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Source::new(move |k| map.get(k).cloned())
    }

    /// The process environment, then `.env` in the working directory when one exists.
    pub fn process() -> Result<Source, ConfigError> {
        Source::layered(|k| std::env::var(k).ok(), Path::new(".env"))
    }

    /// `first`, then the env file at `path` when it exists (a variable `first` has, even empty, wins). A
    /// file that cannot be read or parsed refuses boot.
    pub fn layered(
        first: impl Fn(&str) -> Option<String> + 'static,
        path: &Path,
    ) -> Result<Source, ConfigError> {
        let file = read_dotenv(path)?;
        Ok(Source::new(move |k| {
            first(k).or_else(|| file.get(k).cloned())
        }))
    }

    /// The value of `var`, trimmed; empty reads as unset.
    pub fn get(&self, var: &str) -> Option<String> {
        (self.lookup)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }
}

fn read_dotenv(path: &Path) -> Result<HashMap<String, String>, ConfigError> {
    let iter = match dotenvy::from_path_iter(path) {
        Ok(iter) => iter,
        Err(e) if e.not_found() => return Ok(HashMap::new()),
        Err(e) => return Err(refuse(".env", format!("cannot be read: {e}"))),
    };
    iter.map(|item| item.map_err(|e| refuse(".env", format!("cannot be parsed: {e}"))))
        .collect()
}

/// Reads the knobs of `K` from `source`, with `args` (the command line, program name first) winning. Stops
/// on `--help`/`--version` or on the first bad value, naming its variable.
pub fn load<K: CommandFactory + FromArgMatches>(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    source: &Source,
) -> Result<K, Stop> {
    let shown = K::command().mut_args(|a| a.hide_env_values(true));
    // clap captured the process environment when the command was built; values come from `source` alone,
    // so the copy that parses has no `env` and gets every value as an option.
    let parser = shown
        .clone()
        .args_override_self(true)
        .mut_args(|a| a.env(None));
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let (program, given) = args
        .split_first()
        .map(|(p, rest)| (p.clone(), rest.to_vec()))
        .unwrap_or_else(|| (OsString::from(shown.get_name()), Vec::new()));
    // The command line alone first, so `--help` answers even when a value in the environment is bad.
    let command_line = std::iter::once(program.clone()).chain(given.iter().cloned());
    if let Err(e) = parser.clone().try_get_matches_from(command_line) {
        return Err(stop(&shown, e));
    }
    let mut argv = vec![program];
    for arg in shown.get_arguments() {
        if let (Some(var), Some(long)) = (arg.get_env(), arg.get_long())
            && let Some(value) = var.to_str().and_then(|var| source.get(var))
        {
            argv.push(OsString::from(format!("--{long}={value}")));
        }
    }
    argv.extend(given);
    let matches = parser
        .try_get_matches_from(argv)
        .map_err(|e| stop(&shown, e))?;
    K::from_arg_matches(&matches).map_err(|e| stop(&shown, e))
}

/// Reads the knobs of `K` from this process: its command line, its environment and `.env`.
pub fn load_process<K: CommandFactory + FromArgMatches>() -> Result<K, Stop> {
    load(std::env::args_os(), &Source::process()?)
}

fn stop(shown: &Command, e: clap::Error) -> Stop {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Stop::Show(shown.clone().render_long_help().to_string())
        }
        ErrorKind::DisplayVersion => Stop::Show(shown.render_version()),
        _ => Stop::Refused(refusal(shown, &e)),
    }
}

/// One line naming the variable: the rule a value parser gave, or the allowed values of an enumeration.
fn refusal(shown: &Command, e: &clap::Error) -> ConfigError {
    let text = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let arg = text(ContextKind::InvalidArg).and_then(|spec| {
        let long = spec
            .strip_prefix("--")?
            .split([' ', '='])
            .next()?
            .to_owned();
        shown
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
    });
    let var = arg
        .and_then(|a| a.get_env())
        .map(|v| v.to_string_lossy().into_owned());
    let value = text(ContextKind::InvalidValue).unwrap_or_default();
    match (var, e.kind()) {
        (Some(var), ErrorKind::InvalidValue) => {
            let allowed = match e.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(v)) => one_of(v),
                _ => "a known value".to_owned(),
            };
            refuse(var, format!("must be {allowed} (got '{value}')"))
        }
        (Some(var), ErrorKind::ValueValidation) => {
            let rule = std::error::Error::source(e)
                .map(ToString::to_string)
                .unwrap_or_else(|| format!("is not valid (got '{value}')"));
            refuse(var, rule)
        }
        _ => {
            let first = e.to_string();
            let line = first.lines().next().unwrap_or_default();
            refuse("arguments", line.trim_start_matches("error: ").to_owned())
        }
    }
}

/// `a, b or c`.
fn one_of(values: &[String]) -> String {
    match values.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests;
