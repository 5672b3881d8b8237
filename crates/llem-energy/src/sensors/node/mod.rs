//! Whole-node power: a BMC (IPMI DCMI, Redfish) or the hwmon ACPI power meter.
//!
//! These sources are slow to read (a BMC answers in tens to hundreds of milliseconds and
//! updates about once a second), so none is read by the sampler thread itself: each runs in a
//! poller thread of its own ([`Polled`]), and the sampler takes the newest reading when one has
//! arrived, stamped with its age. A node domain encloses every other domain (GPUs, CPU
//! packages, DRAM): its energy is never summed with theirs.

mod child;
mod hwmon;
mod ipmi;
mod polled;
mod redfish;

use std::time::Duration;

use llem_config::user_config::{NodePowerConfig, NodePowerSource};

pub use crate::error::NodeUnavailable;
use crate::sensor::{Sensor, SensorError, SensorKind};
pub use polled::Polled;

/// Default time between reads of a node source, s.
pub const DEFAULT_POLL_S: f64 = 1.0;

/// One reading of a node source.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeReading {
    /// Instantaneous power, W.
    pub power_w: Option<f64>,
    /// The source's average power over `period_s`, W.
    pub average_w: Option<f64>,
    /// The period the source averages over (or updates at), s, as it reports it; 0 or
    /// absent when it does not say.
    pub period_s: Option<f64>,
    /// Cumulative energy, J (hwmon `energy*_input`, Redfish `EnergykWh`).
    pub energy_j: Option<f64>,
}

/// A source of node power, read by its poller thread.
pub trait NodeSource: Send + 'static {
    /// What it is, for humans (`ipmi 10.0.0.5:623 (DCMI power reading)`), no credentials.
    fn describe(&self) -> String;
    /// The sensor family.
    fn kind(&self) -> SensorKind;
    /// Whether readings carry a cumulative energy counter.
    fn has_counter(&self) -> bool;
    /// Reads once; blocking is fine (it runs in the poller thread).
    fn poll(&mut self) -> Result<NodeReading, SensorError>;
    /// Facts that weaken its readings.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The poll interval the config asks for.
fn poll_interval(cfg: &NodePowerConfig) -> Duration {
    Duration::from_secs_f64(
        cfg.poll_interval_s
            .unwrap_or(DEFAULT_POLL_S)
            .clamp(0.05, 60.0),
    )
}

fn open_source(
    which: NodePowerSource,
    cfg: &NodePowerConfig,
    hwmon_root: &std::path::Path,
) -> Result<Box<dyn NodeSource>, NodeUnavailable> {
    Ok(match which {
        NodePowerSource::Hwmon => Box::new(hwmon::HwmonMeter::open(
            hwmon_root,
            cfg.hwmon_name.as_deref().unwrap_or(hwmon::ACPI_POWER_METER),
        )?),
        NodePowerSource::Ipmi => Box::new(ipmi::Dcmi::open(cfg.ipmi.as_ref())?),
        NodePowerSource::Redfish => Box::new(redfish::Redfish::open(cfg.redfish.as_ref())?),
        NodePowerSource::Auto | NodePowerSource::Off => {
            return Err(NodeUnavailable::NoneFound(hwmon_root.to_path_buf()));
        }
    })
}

/// The node sensor opened, if any, and a note when a configured one could not be.
pub type NodeOpened = (Option<Box<dyn Sensor>>, Option<String>);

/// The node sensor the user config asks for: none for `none`; for `auto` the configured BMC
/// (Redfish, else IPMI), else the hwmon power meter, else none — with a note when a
/// configured BMC could not be read. A source named explicitly that cannot be read is an
/// error.
pub fn open(
    cfg: &NodePowerConfig,
    hwmon_root: &std::path::Path,
) -> Result<NodeOpened, NodeUnavailable> {
    let interval = poll_interval(cfg);
    let start = |src: Box<dyn NodeSource>| -> Result<Box<dyn Sensor>, NodeUnavailable> {
        Ok(Box::new(Polled::start(src, interval)?))
    };
    match cfg.source.unwrap_or(NodePowerSource::Auto) {
        NodePowerSource::Off => Ok((None, None)),
        NodePowerSource::Auto => {
            let configured = if cfg.redfish.is_some() {
                Some(NodePowerSource::Redfish)
            } else if cfg.ipmi.is_some() {
                Some(NodePowerSource::Ipmi)
            } else {
                None
            };
            let which = configured.unwrap_or(NodePowerSource::Hwmon);
            match open_source(which, cfg, hwmon_root).and_then(start) {
                Ok(s) => Ok((Some(s), None)),
                // Nothing configured and no meter: most machines; the result says its
                // system figure is the components' sum (`system_scope`).
                Err(NodeUnavailable::NoHwmon { .. }) if configured.is_none() => Ok((None, None)),
                Err(e) => Ok((None, Some(format!("node power not measured: {e}")))),
            }
        }
        which => Ok((Some(start(open_source(which, cfg, hwmon_root)?)?), None)),
    }
}
