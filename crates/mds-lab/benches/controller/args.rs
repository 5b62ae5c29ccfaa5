//! The bench's command line. `cargo bench` adds `--bench` to every bench target's arguments;
//! it is accepted and ignored.

use std::path::PathBuf;
use std::time::Duration;

pub const USAGE: &str = "\
usage: cargo bench -p mds-lab --bench controller -- [OPTIONS]

  --scalers N          targets and scalers (default 100)
  --pods N             engine Pods per target, the Server role's replicas (default 16)
  --interval SECONDS   the scalers' sampling interval, 5 to 600 (default 15)
  --window-passes N    length of the measured window in intervals (default 4)
  --create-rate N      targets and scalers created per second (default 50)
  --tick-ms MS         how often the stand-in steps its world and mirrors it (default 1000)
  --mds PATH           the mds binary (default: target/release/mds of this workspace)
  --controller-arg ARG one more argument for `mds controller` (repeatable)
  --json               print the result as one JSON object instead of a table";

#[derive(Clone, Debug)]
pub struct Args {
    pub scalers: usize,
    pub pods: u32,
    pub interval: u32,
    pub window_passes: u32,
    pub create_rate: f64,
    pub tick: Duration,
    pub mds: Option<PathBuf>,
    pub controller_args: Vec<String>,
    pub json: bool,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            scalers: 100,
            pods: 16,
            interval: 15,
            window_passes: 4,
            create_rate: 50.0,
            tick: Duration::from_millis(1000),
            mds: None,
            controller_args: Vec::new(),
            json: false,
        }
    }
}

fn number<T>(
    flag: &str,
    value: Option<String>,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display,
{
    let text = value.ok_or_else(|| format!("{flag} needs a value"))?;
    let n: T = text
        .parse()
        .map_err(|_| format!("{flag} {text}: not a number"))?;
    if !range.contains(&n) {
        return Err(format!(
            "{flag} {text}: must be from {} to {}",
            range.start(),
            range.end()
        ));
    }
    Ok(n)
}

impl Args {
    /// `Ok(None)` for `--help`.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
        let mut out = Args::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            match flag.as_str() {
                "--scalers" => out.scalers = number(&flag, args.next(), 1..=100_000)?,
                "--pods" => out.pods = number(&flag, args.next(), 1..=512)?,
                "--interval" => out.interval = number(&flag, args.next(), 5..=600)?,
                "--window-passes" => out.window_passes = number(&flag, args.next(), 1..=100)?,
                "--create-rate" => out.create_rate = number(&flag, args.next(), 0.1..=10_000.0)?,
                "--tick-ms" => {
                    out.tick = Duration::from_millis(number(&flag, args.next(), 50..=60_000)?)
                }
                "--mds" => {
                    out.mds = Some(
                        args.next()
                            .ok_or_else(|| format!("{flag} needs a path"))?
                            .into(),
                    )
                }
                "--controller-arg" => out
                    .controller_args
                    .push(args.next().ok_or_else(|| format!("{flag} needs a value"))?),
                "--json" => out.json = true,
                "--bench" => {}
                "-h" | "--help" => return Ok(None),
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(Some(out))
    }
}
