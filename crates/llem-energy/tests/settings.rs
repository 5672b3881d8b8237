//! Device settings: the journal's lock tells a live owner from a dead one; values on written
//! powercap and cpufreq trees and on the NVML stand-in are read, set, refused out of range and
//! put back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

use llem_energy::settings::journal::{self, Entry, Journal};
use llem_energy::settings::{Allowed, Devices, Knob, Value};
use llem_testkit::nvml_standin as standin;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("{text}\n")).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

/// A package zone limited to 25 W (at most 95 W), and one CPU at 3 GHz under `performance`.
fn trees(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let zone = root.join("powercap/intel-rapl:0");
    write(&zone.join("name"), "package-0");
    write(&zone.join("constraint_0_name"), "long_term");
    write(&zone.join("constraint_0_power_limit_uw"), "25000000");
    write(&zone.join("constraint_0_max_power_uw"), "95000000");
    let cpu = root.join("sys/devices/system/cpu/cpu0/cpufreq");
    write(&cpu.join("scaling_max_freq"), "3000000");
    write(&cpu.join("cpuinfo_min_freq"), "800000");
    write(&cpu.join("cpuinfo_max_freq"), "3500000");
    write(&cpu.join("scaling_governor"), "performance");
    write(
        &cpu.join("scaling_available_governors"),
        "performance powersave",
    );
    (zone, cpu)
}

fn journal(entries: Vec<Entry>) -> Journal {
    Journal {
        version: journal::VERSION,
        pid: std::process::id(),
        host: "test".into(),
        written_unix_s: 0.0,
        owner: "a test".into(),
        entries,
    }
}

#[test]
fn cpu_trees_are_set_checked_and_put_back() {
    let root = tempfile::tempdir().unwrap();
    let (zone, cpu) = trees(root.path());
    let mut devices = Devices::new();
    let limit = devices
        .open(&Knob::CpuPowerLimit { zone: zone.clone() })
        .unwrap();
    assert_eq!(limit.read().unwrap(), Some(Value::Watts(25.0)));
    assert_eq!(limit.allowed().unwrap(), Allowed::Watts(1.0, 95.0));
    let why = limit
        .allowed()
        .unwrap()
        .refuses(&Value::Watts(120.0))
        .unwrap();
    assert!(why.contains("1-95 W"), "{why}");
    limit.apply(&Value::Watts(12.5)).unwrap();
    assert_eq!(read(&zone.join("constraint_0_power_limit_uw")), "12500000");

    let max = devices
        .open(&Knob::CpuMaxFrequency {
            cpufreq: cpu.clone(),
        })
        .unwrap();
    let why = max
        .allowed()
        .unwrap()
        .refuses(&Value::Khz(4_000_000))
        .unwrap();
    assert!(why.contains("800-3500 MHz"), "{why}");
    let gov = devices
        .open(&Knob::CpuGovernor {
            cpufreq: cpu.clone(),
        })
        .unwrap();
    let why = gov
        .allowed()
        .unwrap()
        .refuses(&Value::Governor("ondemand".into()))
        .unwrap();
    assert!(why.contains("performance, powersave"), "{why}");

    let entries = vec![Entry {
        device: "package-0".into(),
        knob: Knob::CpuPowerLimit { zone: zone.clone() },
        original: Value::Watts(25.0),
        requested: Value::Watts(12.5),
    }];
    let back = journal::restore(&entries, &mut devices);
    assert!(back.iter().all(|o| o.ok()), "{back:?}");
    assert_eq!(read(&zone.join("constraint_0_power_limit_uw")), "25000000");
}

#[test]
fn a_journal_is_a_leftover_only_once_its_owner_lets_go() {
    let root = tempfile::tempdir().unwrap();
    let (zone, cpu) = trees(root.path());
    let dir = root.path().join("journal");
    let entries = vec![
        Entry {
            device: "package-0".into(),
            knob: Knob::CpuPowerLimit { zone: zone.clone() },
            original: Value::Watts(25.0),
            requested: Value::Watts(10.0),
        },
        Entry {
            device: "cpu0".into(),
            knob: Knob::CpuGovernor {
                cpufreq: cpu.clone(),
            },
            original: Value::Governor("performance".into()),
            requested: Value::Governor("powersave".into()),
        },
    ];
    let held = journal::begin(&dir, &journal(entries)).unwrap();
    // The owner changes the values, as a cell does.
    write(&zone.join("constraint_0_power_limit_uw"), "10000000");
    write(&cpu.join("scaling_governor"), "powersave");
    // While it lives, nobody else restores its settings.
    let mut devices = Devices::new();
    assert!(journal::restore_leftovers(&dir, &mut devices).is_empty());
    let (live, dead) = journal::survey(&dir);
    assert_eq!((live.len(), dead.len()), (1, 0));
    // Gone without cleaning up (the lock falls with it): the next look restores it.
    let path = held.path().to_path_buf();
    drop(held);
    assert_eq!(journal::survey(&dir).1, vec![path.clone()]);
    let restored = journal::restore_leftovers(&dir, &mut devices);
    assert_eq!(restored.len(), 1);
    assert!(restored[0].ok(), "{restored:?}");
    assert_eq!(restored[0].journal.as_ref().unwrap().owner, "a test");
    assert_eq!(read(&zone.join("constraint_0_power_limit_uw")), "25000000");
    assert_eq!(read(&cpu.join("scaling_governor")), "performance");
    assert!(!path.exists());
    // A journal that cannot be read stays, loudly.
    write(&dir.join("1-2.json"), "{not json");
    let restored = journal::restore_leftovers(&dir, &mut devices);
    assert!(!restored[0].ok());
    assert!(restored[0].error.as_ref().unwrap().contains("by hand"));
    assert!(dir.join("1-2.json").exists());
}

#[test]
fn a_journal_that_was_never_renamed_into_place_changed_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("journal");
    write(&dir.join(".9-9.json.tmp"), "{");
    assert!(journal::restore_leftovers(&dir, &mut Devices::new()).is_empty());
    assert!(!dir.join(".9-9.json.tmp").exists());
}

const GPU: &str = "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100 power_w=350 idle_w=60 sm_clock_mhz=1980 max_sm_clock_mhz=1980 min_sm_clock_mhz=210 power_limit_w=700 min_power_limit_w=200 max_power_limit_w=700 mem_clock_mhz=2619 mem_clocks=2619,1593
gpu uuid=GPU-bbbb-2222 name=NVIDIA_H100 power_w=350 power_limit_w=700 max_sm_clock_mhz=1980 admin=0
";

#[test]
fn nvml_power_limits_and_clocks_are_read_ranged_set_and_reset() {
    if standin::in_child(
        "settings::nvml_power_limits_and_clocks_are_read_ranged_set_and_reset",
        GPU,
    ) {
        return;
    }
    let mut devices = Devices::new();
    let uuid = "GPU-aaaa-1111".to_string();
    let limit = devices
        .open(&Knob::GpuPowerLimit { uuid: uuid.clone() })
        .unwrap();
    assert_eq!(limit.read().unwrap(), Some(Value::Watts(700.0)));
    assert_eq!(limit.allowed().unwrap(), Allowed::Watts(200.0, 700.0));
    limit.apply(&Value::Watts(300.0)).unwrap();
    assert_eq!(limit.read().unwrap(), Some(Value::Watts(300.0)));
    assert!(limit.apply(&Value::Watts(900.0)).is_err());

    let clocks = devices
        .open(&Knob::GpuLockedClocks { uuid: uuid.clone() })
        .unwrap();
    // NVML cannot read locks back.
    assert_eq!(clocks.read().unwrap(), None);
    assert_eq!(clocks.allowed().unwrap(), Allowed::ClockRange(210, 1980));
    clocks
        .apply(&Value::ClocksMhz {
            min: 900,
            max: 1200,
        })
        .unwrap();
    clocks.apply(&Value::DriverDefault).unwrap();
    let mem = devices
        .open(&Knob::GpuLockedMemoryClocks { uuid: uuid.clone() })
        .unwrap();
    assert_eq!(mem.allowed().unwrap(), Allowed::Clocks(vec![1593, 2619]));

    // Without the privilege the driver refuses, and says how to get it.
    let other = devices
        .open(&Knob::GpuPowerLimit {
            uuid: "GPU-bbbb-2222".into(),
        })
        .unwrap();
    let e = other.apply(&Value::Watts(300.0)).unwrap_err().to_string();
    assert!(
        e.contains("permission denied") && e.contains("need root"),
        "{e}"
    );
    assert!(
        devices
            .open(&Knob::GpuPowerLimit {
                uuid: "GPU-none".into()
            })
            .unwrap()
            .read()
            .is_err()
    );
}
