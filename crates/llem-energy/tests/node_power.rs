//! Node power sources as the sampler sees them: a written hwmon meter polled off the sampler
//! thread, its readings only when fresh and never summed with the components; the `auto`
//! choice and the refusals.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use llem_config::user_config::{IpmiConfig, NodePowerConfig, NodePowerSource};
use llem_energy::sensors::node;
use llem_energy::{DomainKind, Meter, MeterConfig, SensorEnv};
use llem_testkit::node_power::{hwmon_meter, set_hwmon_watts};

fn cfg(source: Option<NodePowerSource>, poll_s: f64) -> NodePowerConfig {
    NodePowerConfig {
        source,
        poll_interval_s: Some(poll_s),
        ..NodePowerConfig::default()
    }
}

fn rapl(root: &Path, uj: u64) {
    let z = root.join("intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    std::fs::write(z.join("energy_uj"), format!("{uj}\n")).unwrap();
}

#[test]
fn a_polled_meter_gives_fresh_readings_only_and_stays_out_of_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let hw = hwmon_meter(&dir.path().join("hwmon"), 50.0, 100);
    let (sensor, note) = node::open(
        &cfg(Some(NodePowerSource::Hwmon), 0.1),
        &dir.path().join("hwmon"),
    )
    .unwrap();
    assert!(note.is_none());
    let mut sensor = sensor.unwrap();
    assert_eq!(sensor.domain().kind, DomainKind::Node);
    assert!(sensor.domain().device.contains("power_meter"));
    assert!(sensor.notes().iter().any(|n| n.contains("98.5%")));
    // The first poll is there once; a read before the next poll brings nothing.
    let first = sensor.read(false).unwrap();
    assert_eq!(first.power_w, Some(50.0));
    assert!(
        first.age_s.unwrap() >= 0.05,
        "an average over 100 ms is its middle's"
    );
    assert_eq!(sensor.read(false).unwrap().power_w, None);

    // Recorded with a package at a constant rate, the node is beside the total, not in it.
    rapl(&dir.path().join("powercap"), 1000);
    let env = SensorEnv {
        powercap_root: dir.path().join("powercap"),
        sysfs_root: dir.path().join("sys"),
        hwmon_root: dir.path().join("hwmon"),
        nvml: false,
        node: cfg(Some(NodePowerSource::Hwmon), 0.1),
        ..SensorEnv::from_process(None)
    };
    let sel = llem_energy::select(llem_config::EnergySampler::Rapl, &env).unwrap();
    assert_eq!(sel.sensors.len(), 2);
    let epoch = Instant::now();
    let meter = Meter::start(
        sel.sensors,
        MeterConfig {
            interval: Duration::from_millis(10),
            ..MeterConfig::default()
        },
        epoch,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    set_hwmon_watts(&hw, 80.0);
    std::thread::sleep(Duration::from_millis(600));
    let t = meter.stop().unwrap();
    let w = t.energy(t.start_s, t.end_s);
    assert_eq!(w.domains.len(), 1);
    assert_eq!(w.node.len(), 1);
    assert_eq!(w.total_j, w.domains[0].energy_j);
    let n = &w.node[0];
    // About ten polls a second, not a hundred: one reading per poll.
    let s = t.series.iter().find(|s| s.domain.name == "node").unwrap();
    let readings = s.samples_in(t.start_s, t.end_s);
    assert!(
        (8..=16).contains(&readings),
        "{readings} readings in 1.2 s at 0.1 s"
    );
    // Ticks between polls leave no rows, so each reading keeps its own (earlier) stamp.
    assert_eq!(s.len(), s.samples_in(f64::MIN, f64::MAX));
    // Between 50 and 80 W, the change seen.
    assert!(n.avg_power_w > 50.0 && n.avg_power_w < 80.0, "{n:?}");
    assert_eq!(n.peak_power_w, Some(80.0));
    // The measured period: the polls' (the value changed once, so no median of changes).
    assert!(s.update_period_s.unwrap() >= 0.1);
}

#[test]
fn auto_reads_what_is_there_and_a_named_source_that_fails_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hwmon");
    std::fs::create_dir_all(&root).unwrap();
    // Nothing configured, nothing found: no node sensor and nothing to say per result.
    let (s, note) = node::open(&cfg(None, 1.0), &root).unwrap();
    assert!(s.is_none() && note.is_none());
    // Named but absent: an error that says where it looked.
    let e = node::open(&cfg(Some(NodePowerSource::Hwmon), 1.0), &root)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("power_meter") && e.contains("hwmon"), "{e}");
    // A device with nothing to read.
    std::fs::create_dir_all(root.join("hwmon3")).unwrap();
    std::fs::write(root.join("hwmon3/name"), "power_meter\n").unwrap();
    let e = node::open(&cfg(Some(NodePowerSource::Hwmon), 1.0), &root)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("power1_average"), "{e}");
    // A device with an energy counter is read through it (µJ), by the name configured.
    std::fs::write(root.join("hwmon3/name"), "chassis\n").unwrap();
    std::fs::write(root.join("hwmon3/energy1_input"), "5000000\n").unwrap();
    let c = NodePowerConfig {
        hwmon_name: Some("chassis".into()),
        ..cfg(Some(NodePowerSource::Hwmon), 1.0)
    };
    let (s, _) = node::open(&c, &root).unwrap();
    let mut s = s.unwrap();
    assert!(s.has_counter());
    assert_eq!(s.read(false).unwrap().energy_j, Some(5.0));
    // A configured BMC that cannot be reached: `auto` notes it and goes on; named, it fails.
    let bmc = NodePowerConfig {
        ipmi: Some(IpmiConfig {
            host: Some("127.0.0.1".into()),
            ipmitool: Some("/nonexistent/ipmitool".into()),
            ..IpmiConfig::default()
        }),
        ..cfg(None, 1.0)
    };
    let (s, note) = node::open(&bmc, &root).unwrap();
    assert!(s.is_none());
    assert!(note.unwrap().contains("cannot run /nonexistent/ipmitool"));
    let named = NodePowerConfig {
        source: Some(NodePowerSource::Ipmi),
        ..bmc
    };
    assert!(node::open(&named, &root).is_err());
    // Redfish without a URL says which key is missing.
    let e = node::open(&cfg(Some(NodePowerSource::Redfish), 1.0), &root)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("node_power.redfish.url"), "{e}");
}
