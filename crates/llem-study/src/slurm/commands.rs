//! The Slurm commands llem uses, and what their output means: `sbatch --parsable`, `squeue`
//! for the tasks still queued or running, `sacct` for how the others ended, `scancel`.
//! Nothing else talks to Slurm, so a cluster's commands are the whole interface (no REST, no
//! libslurm), the same on every site.

use std::collections::HashMap;
use std::process::Command;

use crate::StudyError;

fn failed(command: &str, message: String) -> StudyError {
    StudyError::Slurm {
        command: command.to_string(),
        message,
    }
}

/// Runs a Slurm command; its stdout, or an error with what it printed on stderr.
fn run<S: AsRef<std::ffi::OsStr>>(program: &str, args: &[S]) -> Result<String, StudyError> {
    run_with(program, args, &[])
}

/// [`run`] with variables added to the command's environment.
fn run_with<S: AsRef<std::ffi::OsStr>>(
    program: &str,
    args: &[S],
    env: &[(String, String)],
) -> Result<String, StudyError> {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            failed(
                program,
                if e.kind() == std::io::ErrorKind::NotFound {
                    format!("`{program}` is not on PATH; is this a Slurm login node?")
                } else {
                    e.to_string()
                },
            )
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        Err(failed(
            program,
            if err.is_empty() {
                format!("exited with {}", out.status)
            } else {
                err.to_string()
            },
        ))
    }
}

/// Submits with `sbatch --parsable ARGS`; the job id. `env` is added to the environment
/// sbatch hands the job (its default `--export=ALL`), never written into a script.
pub fn sbatch(args: &[String], env: &[(String, String)]) -> Result<String, StudyError> {
    let mut all = vec!["--parsable".to_string()];
    all.extend(args.iter().cloned());
    let out = run_with("sbatch", &all, env)?;
    parse_job_id(&out)
        .ok_or_else(|| failed("sbatch", format!("printed no job id: {:?}", out.trim_end())))
}

/// The job id of `sbatch --parsable` (`123` or `123;cluster`).
fn parse_job_id(out: &str) -> Option<String> {
    let line = out.lines().rfind(|l| !l.trim().is_empty())?;
    let id = line.split(';').next()?.trim();
    (!id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())).then(|| id.to_string())
}

/// A task Slurm still has in its queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedTask {
    /// `PENDING`, `RUNNING`, `COMPLETING`, `CONFIGURING`, ...
    pub state: String,
    /// Its node, once it has one.
    pub node: Option<String>,
}

impl QueuedTask {
    /// Whether the task has started on a node.
    pub fn started(&self) -> bool {
        !matches!(self.state.as_str(), "PENDING" | "REQUEUED" | "SUSPENDED")
    }
}

/// The tasks of `job_ids` still queued or running, by `ARRAYJOB_TASK` (a job that is not an
/// array by its id alone). One `squeue` of the user's own jobs: naming jobs that already left
/// the queue would make it fail.
pub fn queued(job_ids: &[String]) -> Result<HashMap<String, QueuedTask>, StudyError> {
    let args = ["-h", "-r", "--me", "-o", "%F|%K|%T|%N"];
    Ok(parse_queue(&run("squeue", &args)?, job_ids))
}

fn parse_queue(out: &str, job_ids: &[String]) -> HashMap<String, QueuedTask> {
    let mut tasks = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        let [array, task, state, node] = f.as_slice() else {
            continue;
        };
        if !job_ids.iter().any(|j| j == array) {
            continue;
        }
        let key = if task.bytes().all(|b| b.is_ascii_digit()) && !task.is_empty() {
            format!("{array}_{task}")
        } else {
            array.to_string()
        };
        let node = (!node.is_empty() && !node.starts_with('(')).then(|| node.to_string());
        tasks.insert(
            key,
            QueuedTask {
                state: state.to_string(),
                node,
            },
        );
    }
    tasks
}

/// How a job ended, as `sacct` has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    /// `COMPLETED`, `FAILED`, `TIMEOUT`, `CANCELLED`, `NODE_FAIL`, `OUT_OF_MEMORY`,
    /// `PREEMPTED`, ... (`CANCELLED by 1000` is `CANCELLED`).
    pub state: String,
    /// Nodes.
    pub nodes: Option<String>,
    /// `exit:signal`.
    pub exit_code: Option<String>,
}

/// What Slurm's accounting says of the given jobs: keyed by `ARRAYJOB_TASK` and by the raw
/// job id. Without accounting (no slurmdbd), the job completion log (`sacct --completion`)
/// answers by raw job id only; the second value says which was read.
pub fn ended(array_ids: &[String]) -> Result<(HashMap<String, Ended>, &'static str), StudyError> {
    if array_ids.is_empty() {
        return Ok((HashMap::new(), "accounting"));
    }
    let args = vec![
        "-n".into(),
        "-P".into(),
        "-X".into(),
        "-j".into(),
        array_ids.join(","),
        "-o".into(),
        "JobID,JobIDRaw,State,NodeList,ExitCode".into(),
    ];
    match run("sacct", &args) {
        Ok(out) => Ok((parse_accounting(&out), "accounting")),
        Err(StudyError::Slurm { message, .. })
            if message.contains("accounting storage is disabled") =>
        {
            let args = ["-c", "-n", "-P", "-o", "JobID,State,NodeList,ExitCode"];
            let out = run("sacct", &args)?;
            Ok((parse_completion(&out), "the job completion log"))
        }
        Err(e) => Err(e),
    }
}

fn ended_of(state: &str, nodes: &str, exit: &str) -> Ended {
    Ended {
        state: state.split_whitespace().next().unwrap_or("").to_string(),
        nodes: (!nodes.is_empty() && nodes != "None assigned").then(|| nodes.to_string()),
        exit_code: (!exit.is_empty()).then(|| exit.to_string()),
    }
}

fn parse_accounting(out: &str) -> HashMap<String, Ended> {
    let mut m = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        let [id, raw, state, nodes, exit] = f.as_slice() else {
            continue;
        };
        let e = ended_of(state, nodes, exit);
        m.insert(raw.to_string(), e.clone());
        m.insert(id.to_string(), e);
    }
    m
}

fn parse_completion(out: &str) -> HashMap<String, Ended> {
    let mut m = HashMap::new();
    for line in out.lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if let [id, state, nodes, exit] = f.as_slice() {
            m.insert(id.to_string(), ended_of(state, nodes, exit));
        }
    }
    m
}

/// `scancel` of whole jobs.
pub fn cancel(job_ids: &[String]) -> Result<(), StudyError> {
    if job_ids.is_empty() {
        return Ok(());
    }
    run("scancel", job_ids).map(|_| ())
}

/// `scancel --state=PENDING`: the tasks not started yet; running ones finish their cells.
pub fn cancel_pending(job_ids: &[String]) -> Result<(), StudyError> {
    if job_ids.is_empty() {
        return Ok(());
    }
    let mut args = vec!["--state=PENDING".to_string()];
    args.extend(job_ids.iter().cloned());
    run("scancel", &args).map(|_| ())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn sbatch_parsable_ids_with_and_without_a_cluster() {
        assert_eq!(parse_job_id("123\n").as_deref(), Some("123"));
        assert_eq!(parse_job_id("4567;gpu-cluster\n").as_deref(), Some("4567"));
        assert_eq!(
            parse_job_id("sbatch: warning: x\n89\n").as_deref(),
            Some("89")
        );
        assert_eq!(parse_job_id("Submitted batch job 12\n"), None);
        assert_eq!(parse_job_id(""), None);
    }

    #[test]
    fn the_queue_keeps_our_jobs_by_array_task() {
        let out = "12|0|RUNNING|n1\n12|1|PENDING|\n13|N/A|PENDING|(Dependency)\n99|0|RUNNING|n2\n";
        let q = parse_queue(out, &["12".into(), "13".into()]);
        assert_eq!(q.len(), 3);
        assert_eq!(q["12_0"].node.as_deref(), Some("n1"));
        assert!(q["12_0"].started() && !q["12_1"].started());
        assert_eq!(q["13"].node, None);
        assert!(!q.contains_key("99_0"));
    }

    #[test]
    fn accounting_and_completion_log_rows() {
        let a = parse_accounting(
            "12_0|13|COMPLETED|n1|0:0\n12_1|14|CANCELLED by 1000|n1|0:15\n12_2|15|TIMEOUT|n2|0:0\n12_3|12|PENDING|None assigned|0:0\n",
        );
        assert_eq!(a["12_1"].state, "CANCELLED");
        assert_eq!(a["14"], a["12_1"]);
        assert_eq!(a["12_2"].nodes.as_deref(), Some("n2"));
        assert_eq!(a["12_3"].nodes, None);
        let c = parse_completion("7|OUT_OF_MEMORY|vm|0:125\n6|NODE_FAIL|vm|0:0\n");
        assert_eq!(c["7"].state, "OUT_OF_MEMORY");
        assert_eq!(c["6"].exit_code.as_deref(), Some("0:0"));
    }
}
