//! Node power sources for the tests, real where they can be: a written hwmon ACPI power
//! meter, OpenIPMI's BMC simulator (`ipmi_sim`) answering DCMI power readings through a test
//! module, reached by the real `ipmitool` over LAN, and a Redfish BMC stand-in (sushy-tools'
//! emulator reports no chassis power) serving `Chassis/1/Power` behind Basic auth.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::json;

/// Writes an ACPI power meter (`name` = `power_meter`) under `root/hwmon0` reading `watts`,
/// averaged over `interval_ms`.
pub fn hwmon_meter(root: &Path, watts: f64, interval_ms: u64) -> PathBuf {
    let d = root.join("hwmon0");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("name"), "power_meter\n").unwrap();
    std::fs::write(
        d.join("power1_average_interval"),
        format!("{interval_ms}\n"),
    )
    .unwrap();
    std::fs::write(d.join("power1_accuracy"), "98.5%\n").unwrap();
    set_hwmon_watts(&d, watts);
    d
}

/// Sets the meter's reading (written by rename, as sysfs never shows half a value).
pub fn set_hwmon_watts(dir: &Path, watts: f64) {
    let tmp = dir.join("power1_average.tmp");
    std::fs::write(&tmp, format!("{}\n", (watts * 1e6) as u64)).unwrap();
    std::fs::rename(&tmp, dir.join("power1_average")).unwrap();
}

/// What is needed to run the BMC simulator: `ipmi_sim`, `ipmitool` and OpenIPMI's headers.
pub fn ipmi_tools_present() -> bool {
    let on_path = |p: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    on_path("ipmi_sim")
        && on_path("ipmitool")
        && Path::new("/usr/include/OpenIPMI/mcserv.h").is_file()
}

/// A running `ipmi_sim` on `127.0.0.1:<port>` (UDP) whose DCMI power reading comes from a
/// file; killed on drop.
pub struct IpmiSim {
    child: Child,
    dir: tempfile::TempDir,
    /// The UDP port.
    pub port: u16,
    /// The admin user's name.
    pub user: &'static str,
    /// Its password.
    pub password: &'static str,
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl IpmiSim {
    /// Builds the DCMI module, starts the simulator reading `watts` (averaged over
    /// `period_ms`, active) and waits until ipmitool reads it.
    pub fn start(watts: f64, period_ms: u32) -> IpmiSim {
        let dir = tempfile::tempdir().unwrap();
        let so = dir.path().join("dcmi.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/dcmi_module.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
            .arg(&so)
            .arg(&src)
            .output()
            .expect("cc must be installed to build the DCMI module");
        assert!(
            out.status.success(),
            "building the DCMI module failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_udp_port();
        let power = dir.path().join("power");
        let (user, password) = ("admin", "s3cret-bmc");
        let conf = format!(
            "name \"llemtest\"\nset_working_mc 0x20\n  startlan 1\n    addr 127.0.0.1 {port}\n    \
             priv_limit admin\n    allowed_auths_callback none md2 md5 straight\n    \
             allowed_auths_user none md2 md5 straight\n    \
             allowed_auths_operator none md2 md5 straight\n    \
             allowed_auths_admin none md2 md5 straight\n    \
             guid a123456789abcdefa123456789abcdef\n  endlan\n  \
             user 2 true \"{user}\" \"{password}\" admin 10 none md2 md5 straight\n\
             loadlib \"{}\" \"{}\"\n",
            so.display(),
            power.display()
        );
        std::fs::write(dir.path().join("lan.conf"), conf).unwrap();
        std::fs::write(
            dir.path().join("emu.cmds"),
            "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n\
             mc_enable 0x20\n",
        )
        .unwrap();
        let mut sim = IpmiSim {
            child: Command::new("ipmi_sim")
                .arg("-c")
                .arg(dir.path().join("lan.conf"))
                .arg("-f")
                .arg(dir.path().join("emu.cmds"))
                .args(["-n", "-p", "-s"])
                .arg(dir.path().join("state"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("ipmi_sim"),
            dir,
            port,
            user,
            password,
        };
        sim.set(watts, period_ms, true);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let o = sim.ipmitool(&["dcmi", "power", "reading"]);
            if o.status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "ipmi_sim did not answer: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        sim
    }

    /// Sets the reading: instantaneous and average `watts`, its period and state.
    pub fn set(&mut self, watts: f64, period_ms: u32, active: bool) {
        let w = watts.round() as u64;
        let p = self.dir.path().join("power");
        let tmp = p.with_extension("tmp");
        std::fs::write(
            &tmp,
            format!("{w} {w} {w} {w} {period_ms} {}\n", u8::from(active)),
        )
        .unwrap();
        std::fs::rename(&tmp, &p).unwrap();
    }

    /// Runs ipmitool against the simulator as the admin user.
    pub fn ipmitool(&self, args: &[&str]) -> std::process::Output {
        Command::new("ipmitool")
            // ipmi_sim speaks cipher suite 3 and does not answer Get Channel Cipher Suites,
            // which ipmitool otherwise asks first (10 s).
            .args(["-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .args(["-U", self.user, "-E"])
            .args(args)
            .env("IPMI_PASSWORD", self.password)
            .output()
            .unwrap()
    }
}

impl Drop for IpmiSim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redfish BMC stand-in on `127.0.0.1:0`: `/redfish/v1/Chassis` with one chassis whose
/// `Power` reports the watts set; every request needs Basic auth `admin`/`password`.
pub struct RedfishStandIn {
    /// Base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    watts_bits: Arc<AtomicU64>,
    /// Requests served.
    pub requests: Arc<AtomicU64>,
}

/// The stand-in's password.
pub const REDFISH_PASSWORD: &str = "redfish-pw";

#[derive(Clone)]
struct Bmc {
    watts: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
}

fn authorized(h: &HeaderMap) -> bool {
    // base64("admin:redfish-pw")
    h.get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "Basic YWRtaW46cmVkZmlzaC1wdw==")
}

impl RedfishStandIn {
    /// Starts it reading `watts`.
    pub fn start(watts: f64) -> RedfishStandIn {
        let bmc = Bmc {
            watts: Arc::new(AtomicU64::new(watts.to_bits())),
            requests: Arc::new(AtomicU64::new(0)),
        };
        let (w, r) = (bmc.watts.clone(), bmc.requests.clone());
        type Reply = (StatusCode, axum::Json<serde_json::Value>);
        let guard = |b: &Bmc, h: &HeaderMap, body: serde_json::Value| -> Reply {
            b.requests.fetch_add(1, Ordering::Relaxed);
            if authorized(h) {
                (StatusCode::OK, axum::Json(body))
            } else {
                (
                    StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"error": "auth"})),
                )
            }
        };
        let app = Router::new()
            .route(
                "/redfish/v1/Chassis",
                get(move |State(b): State<Bmc>, h: HeaderMap| async move {
                    guard(
                        &b,
                        &h,
                        json!({"Members": [{"@odata.id": "/redfish/v1/Chassis/1"}]}),
                    )
                }),
            )
            .route(
                "/redfish/v1/Chassis/1",
                get(move |State(b): State<Bmc>, h: HeaderMap| async move {
                    guard(
                        &b,
                        &h,
                        json!({"Id": "1",
                        "Power": {"@odata.id": "/redfish/v1/Chassis/1/Power"}}),
                    )
                }),
            )
            .route(
                "/redfish/v1/Chassis/1/Power",
                get(move |State(b): State<Bmc>, h: HeaderMap| async move {
                    let watts = f64::from_bits(b.watts.load(Ordering::Relaxed));
                    guard(
                        &b,
                        &h,
                        json!({"PowerControl": [{"PowerConsumedWatts": watts,
                        "PowerMetrics": {"IntervalInMin": 1, "AverageConsumedWatts": watts}}]}),
                    )
                }),
            )
            .with_state(bmc);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(l.local_addr().unwrap()).unwrap();
                let _ = axum::serve(l, app).await;
            });
        });
        let addr = rx.recv().unwrap();
        RedfishStandIn {
            url: format!("http://{addr}"),
            watts_bits: w,
            requests: r,
        }
    }

    /// Sets the chassis power.
    pub fn set_watts(&self, watts: f64) {
        self.watts_bits.store(watts.to_bits(), Ordering::Relaxed);
    }
}
