//! Why a server cannot be started for a configuration: its flags cannot be built, or its
//! program is not here.

/// A configuration a server cannot be started with, or a server that cannot be started here.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A field set in the configuration that llem's flag table for the engine lacks.
    #[error(
        "{path}.{key} has no command-line flag in llem's table for this engine; remove it or \
         pass the flag through passthrough_kwargs"
    )]
    NoFlag {
        /// The section (`vllm.engine`).
        path: String,
        /// The field.
        key: String,
    },
    /// A section that does not serialise to flags (a bug of its types).
    #[error(transparent)]
    Serialise(#[from] serde_json::Error),
    /// A setting this engine's server cannot honour; the message names it and the way out.
    #[error("{0}")]
    Refused(String),
    /// The engine runs only at a URL someone else serves.
    #[error("engine `{0}` needs a server URL: runners: {{{0}: \"external:http://host:port\"}}")]
    NeedsUrl(llem_config::Engine),
    /// The engine is embedded, not a server.
    #[error("engine `{0}` is not a server")]
    NotAServer(llem_config::Engine),
    /// The engine has no server llem can start.
    #[error("engine `{0}` has no local server")]
    NoLocalServer(llem_config::Engine),
    /// `docker` is not installed.
    #[error("runner docker: `docker` is not on PATH (install Docker, or use runner local)")]
    NoDocker,
    /// The server's program is not installed.
    #[error("runner local for {engine}: `{program}` is not on PATH ({hint})")]
    NotInstalled {
        /// The engine.
        engine: llem_config::Engine,
        /// The program looked for.
        program: String,
        /// How to install it.
        hint: &'static str,
    },
    /// No llama-server anywhere llem looks.
    #[error(
        "runner local for {engine} needs `llama-server`: not on PATH, not in \
         LLEM_LLAMA_SERVER, not in llem's tool cache ({hint})"
    )]
    NoLlamaServer {
        /// The engine.
        engine: llem_config::Engine,
        /// How to get it.
        hint: &'static str,
    },
}

/// A traffic plan whose send times cannot be drawn.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TrafficError {
    /// A timed arrival process without a positive rate.
    #[error("traffic.arrival {0} needs traffic.rate_qps > 0")]
    NoRate(llem_config::Arrival),
    /// Gamma arrivals without a positive burstiness.
    #[error("traffic.arrival gamma needs traffic.burstiness > 0 (1 = Poisson)")]
    NoBurstiness,
    /// A send time past the longest schedule (or not a number).
    #[error(
        "traffic: request {index} would be sent {at_s:?} s after the start (rate_qps \
         {rate_qps:?}, burstiness {burstiness:?}); llem sends schedules of at most {max_s} s"
    )]
    TooLate {
        /// The request.
        index: usize,
        /// When it would be sent, s.
        at_s: f64,
        /// The rate, requests/s.
        rate_qps: f64,
        /// The coefficient of variation of the gaps.
        burstiness: f64,
        /// The longest schedule, s.
        max_s: f64,
    },
}

/// Why one streamed request failed; its text is the request's error in `requests.parquet`.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// No response headers within the stall timeout.
    #[error("no response within {0} s")]
    NoResponse(f64),
    /// The request could not be sent (its error chain).
    #[error("request failed: {0}")]
    Request(String),
    /// A status that is not success, with the body's start.
    #[error("HTTP {status}: {body}")]
    Status {
        /// The status line.
        status: String,
        /// The first 300 characters of the body.
        body: String,
    },
    /// A 200 that is not an event stream (a proxy's login page, `stream: true` ignored).
    #[error("HTTP {status} with content-type {content_type}, not an event stream: {body}")]
    NotAStream {
        /// The status line.
        status: String,
        /// What it said it is.
        content_type: String,
        /// The first 300 characters of the body.
        body: String,
    },
    /// An error object in the stream, with its start.
    #[error("server error in stream: {0}")]
    InStream(String),
    /// A chunk that is not JSON.
    #[error(transparent)]
    Chunk(#[from] ChunkError),
    /// No data for the stall timeout.
    #[error("stream stalled: no data for {0} s")]
    Stalled(f64),
    /// The connection broke mid-stream (its error chain).
    #[error("stream broken: {0}")]
    Broken(String),
    /// One event longer than the framer holds.
    #[error("stream event longer than {0} MiB: not an OpenAI chunk stream")]
    EventTooLong(usize),
    /// The stream ended with no event at all.
    #[error("the stream ended without a single event")]
    NoEvent,
}

/// A stream chunk that is not JSON.
#[derive(Debug, thiserror::Error)]
#[error("unreadable stream chunk ({source}): {start}")]
pub struct ChunkError {
    /// Why it does not parse.
    pub source: serde_json::Error,
    /// Its first 200 bytes, as text.
    pub start: String,
}

/// A ShareGPT file that is not one.
#[derive(Debug, thiserror::Error)]
pub enum ShareGptError {
    /// Not a JSON array.
    #[error("not a ShareGPT file: expected a JSON array of conversations")]
    NotAnArray,
    /// A conversation that is not valid JSON.
    #[error("invalid record near byte {at}: {source}")]
    Record {
        /// Where, from the file's start.
        at: usize,
        /// Why.
        source: serde_json::Error,
    },
}

/// A trace file that cannot be replayed as written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// It cannot be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A column (CSV) or key (JSONL) the format needs is not there.
    #[error("{path}: no column `{column}` in the header (it has {found}){hint}")]
    MissingColumn {
        /// The file.
        path: std::path::PathBuf,
        /// The column.
        column: String,
        /// The columns it has.
        found: String,
        /// ", did you mean `x`?" or nothing.
        hint: String,
    },
    /// A value that is not what its column holds.
    #[error("{path}:{line}: `{column}` is {value:?}, expected {expected}")]
    Value {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line.
        line: usize,
        /// The column or key.
        column: String,
        /// What was there (shortened).
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A line that is not a record of the format (a broken quote, a line that is not JSON).
    #[error("{path}:{line}: {message}")]
    Record {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A record earlier than the one before it: a slice of an unsorted trace would be wrong.
    #[error(
        "{path}:{line}: this request arrives {back_s:.3} s before the one above it; a trace is \
         replayed in time order (sort it by its timestamp first)"
    )]
    NotInOrder {
        /// The file.
        path: std::path::PathBuf,
        /// 1-based line.
        line: usize,
        /// How far back it goes, s.
        back_s: f64,
    },
    /// A setting of the replay that cannot hold.
    #[error("trace {what}")]
    Setting {
        /// What is wrong, naming the setting.
        what: String,
    },
}
