//! `device:` — the device settings a cell runs under (power limits, locked clocks, CPU
//! frequency), applied before its baseline and put back after it.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Device settings applied around each cell and restored after it (from a journal written
/// before the first change). GPU settings need root (NVML), CPU ones their sysfs files
/// writable; each is checked before the first cell against what the device allows. Null
/// leaves the setting as found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceConfig {
    /// Power limit of every GPU the cell measures, W (NVML power management limit).
    #[schemars(range(min = 1.0, max = 10000.0))]
    pub gpu_power_limit_w: Option<f64>,
    /// Locked graphics clocks of every GPU the cell measures, MHz: one value (`1410`) or a
    /// range (`"900-1410"`).
    pub gpu_locked_clocks_mhz: Option<ClockSetting>,
    /// Locked memory clocks of every GPU the cell measures, MHz: a clock the GPU supports,
    /// or a range of two.
    pub gpu_locked_memory_clocks_mhz: Option<ClockSetting>,
    /// Long-term power limit of every CPU package, W (RAPL powercap constraint 0).
    #[schemars(range(min = 1.0, max = 10000.0))]
    pub cpu_power_limit_w: Option<f64>,
    /// Highest frequency of every CPU, MHz (cpufreq `scaling_max_freq`).
    #[schemars(range(min = 1, max = 100_000))]
    pub cpu_max_frequency_mhz: Option<u32>,
    /// Frequency governor of every CPU (cpufreq `scaling_governor`: `performance`,
    /// `powersave`, `schedutil`, ...).
    pub cpu_governor: Option<String>,
}

impl DeviceConfig {
    /// Whether any GPU setting is asked for.
    pub fn touches_gpus(&self) -> bool {
        self.gpu_power_limit_w.is_some()
            || self.gpu_locked_clocks_mhz.is_some()
            || self.gpu_locked_memory_clocks_mhz.is_some()
    }

    /// Whether any CPU setting is asked for.
    pub fn touches_cpus(&self) -> bool {
        self.cpu_power_limit_w.is_some()
            || self.cpu_max_frequency_mhz.is_some()
            || self.cpu_governor.is_some()
    }

    /// Whether any setting is asked for.
    pub fn any(&self) -> bool {
        self.touches_gpus() || self.touches_cpus()
    }
}

/// Locked clocks: one clock, or the range the driver may choose in, MHz.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSetting {
    /// Lowest, MHz.
    pub min_mhz: u32,
    /// Highest, MHz.
    pub max_mhz: u32,
}

const CLOCK_FORMS: &str = "a clock in MHz (1410) or a range \"MIN-MAX\" (\"900-1410\")";

impl fmt::Display for ClockSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min_mhz == self.max_mhz {
            write!(f, "{}", self.min_mhz)
        } else {
            write!(f, "{}-{}", self.min_mhz, self.max_mhz)
        }
    }
}

impl std::str::FromStr for ClockSetting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mhz = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|v| (1..=100_000).contains(v))
                .ok_or_else(|| format!("`{s}`: expected {CLOCK_FORMS}"))
        };
        let (min_mhz, max_mhz) = match s.split_once('-') {
            Some((a, b)) => (mhz(a)?, mhz(b)?),
            None => {
                let v = mhz(s)?;
                (v, v)
            }
        };
        if min_mhz > max_mhz {
            return Err(format!("`{s}`: the lowest clock comes first"));
        }
        Ok(ClockSetting { min_mhz, max_mhz })
    }
}

impl Serialize for ClockSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.min_mhz == self.max_mhz {
            s.serialize_u32(self.min_mhz)
        } else {
            s.collect_str(self)
        }
    }
}

impl<'de> Deserialize<'de> for ClockSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ClockSetting;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(CLOCK_FORMS)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ClockSetting, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ClockSetting, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ClockSetting, E> {
                s.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for ClockSetting {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClockSetting".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "a clock in MHz, or \"MIN-MAX\"",
            "anyOf": [
                {"type": "integer", "minimum": 1, "maximum": 100000},
                {"type": "string", "pattern": "^[0-9]+-[0-9]+$"}
            ]
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_is_one_value_or_a_range() {
        let one: ClockSetting = "1410".parse().unwrap();
        assert_eq!((one.min_mhz, one.max_mhz), (1410, 1410));
        let r: ClockSetting = "900-1410".parse().unwrap();
        assert_eq!((r.min_mhz, r.max_mhz), (900, 1410));
        assert_eq!(r.to_string(), "900-1410");
        assert!("1410-900".parse::<ClockSetting>().is_err());
        assert!("fast".parse::<ClockSetting>().is_err());
        assert!("0".parse::<ClockSetting>().is_err());
    }
}
