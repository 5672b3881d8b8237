//! Enumerations written as names in YAML (`engine: vllm`, `dtype: bfloat16`, ...).
//!
//! One macro gives every such enum the same behaviour: exact YAML spellings plus accepted
//! aliases, `unknown value ... did you mean` errors, JSON Schema `enum`s, `Display` and
//! `FromStr` for the command line.

/// Declares a string enum: `Variant = "yaml-name" | "alias" ...`.
macro_rules! str_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The YAML spelling of every value, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The YAML spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses a YAML spelling or accepted alias.
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($text $(| $alias)* => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::from_name(s).ok_or_else(|| $crate::error::UnknownName {
                    given: s.to_string(),
                    expected: $name::NAMES,
                    suggestion: $crate::error::did_you_mean(s, $name::NAMES.iter().copied())
                        .map(str::to_string),
                })
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(f, "one of {}", $name::NAMES.join(", "))
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        $name::from_name(s).ok_or_else(|| E::unknown_variant(s, $name::NAMES))
                    }
                    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<$name, E> {
                        self.visit_str(if b { "true" } else { "false" })
                    }
                }
                d.deserialize_str(V)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({ "type": "string", "enum": [$($text),+] })
            }
        }
    };
}

pub(crate) use str_enum;

str_enum! {
    /// An inference engine.
    pub enum Engine {
        /// llama.cpp: embedded in-process (default) or `llama-server`.
        LlamaCpp = "llamacpp" | "llama.cpp" | "llama_cpp",
        /// Hugging Face transformers through a Python worker (`pytorch` is the seed's old name).
        Transformers = "transformers" | "pytorch",
        /// vLLM over its OpenAI-compatible server.
        Vllm = "vllm",
        /// TensorRT-LLM (`trtllm-serve`).
        TensorRt = "tensorrt",
        /// SGLang.
        Sglang = "sglang",
        /// Hugging Face Text Generation Inference.
        Tgi = "tgi",
        /// Any OpenAI-compatible server reached by URL.
        OpenAi = "openai",
    }
}

impl Engine {
    /// The engine used when `engine:` is omitted.
    pub const DEFAULT: Engine = Engine::LlamaCpp;

    /// Engines that have a config section (keyed by the engine's name).
    pub const WITH_SECTIONS: &'static [Engine] = &[
        Engine::LlamaCpp,
        Engine::Transformers,
        Engine::Vllm,
        Engine::TensorRt,
        Engine::Sglang,
        Engine::Tgi,
    ];

    /// True for engines that load Hugging Face weights and so honour `dtype`.
    pub fn uses_dtype(self) -> bool {
        match self {
            Engine::Transformers
            | Engine::Vllm
            | Engine::TensorRt
            | Engine::Sglang
            | Engine::Tgi => true,
            Engine::LlamaCpp | Engine::OpenAi => false,
        }
    }
}

str_enum! {
    /// Numeric precision of model weights and compute.
    pub enum Dtype {
        /// 32-bit float.
        Float32 = "float32" | "fp32",
        /// 16-bit float.
        Float16 = "float16" | "fp16",
        /// bfloat16.
        Bfloat16 = "bfloat16" | "bf16",
    }
}

str_enum! {
    /// Energy measurement backend (seed 003, plus the sensors llem adds).
    pub enum EnergySampler {
        /// Best available: GPU energy counter > NVML power > amdgpu > RAPL > estimate.
        Auto = "auto",
        /// NVML power polling.
        Nvml = "nvml",
        /// NVML hardware energy counter (Volta+), the path Zeus uses.
        Zeus = "zeus",
        /// AMD GPUs through amdgpu hwmon.
        Amdgpu = "amdgpu",
        /// CPU package and DRAM through Linux powercap (RAPL).
        Rapl = "rapl",
        /// CPU estimate from TDP x utilisation.
        Estimate = "estimate",
        /// Estimate plus carbon accounting (CodeCarbon-style).
        Codecarbon = "codecarbon",
    }
}

str_enum! {
    /// Prompt ordering within a dataset.
    pub enum DatasetOrder {
        /// Round-robin by source, file order.
        Interleaved = "interleaved",
        /// Sorted by source.
        Grouped = "grouped",
        /// Seeded random order (`random_seed`).
        Shuffled = "shuffled",
    }
}

str_enum! {
    /// How synthetic prompt and reply lengths are drawn.
    pub enum LengthDistribution {
        /// Every request the same length.
        Fixed = "fixed",
        /// Uniform over mean x [1 - spread, 1 + spread].
        Uniform = "uniform",
        /// Normal with coefficient of variation `spread`, at least 1 token.
        Normal = "normal",
        /// Log-normal with coefficient of variation `spread` (long tail, like real traffic).
        Lognormal = "lognormal",
    }
}

str_enum! {
    /// Decoder presets, expanded into concrete sampling values.
    pub enum Preset {
        /// Greedy: temperature 0, no sampling.
        Deterministic = "deterministic",
        /// temperature 1.0, top_p 0.95.
        Standard = "standard",
        /// temperature 0.8, top_p 0.9, repetition_penalty 1.1.
        Creative = "creative",
        /// temperature 0.3.
        Factual = "factual",
    }
}

str_enum! {
    /// How the idle (baseline) power is obtained.
    pub enum BaselineStrategy {
        /// Disk cache with TTL.
        Cached = "cached",
        /// Cached, with a short spot check every N experiments.
        Validated = "validated",
        /// Measured before every experiment.
        Fresh = "fresh",
    }
}

str_enum! {
    /// Which slice of the run produces the headline metrics.
    pub enum Methodology {
        /// The whole measured run.
        Total = "total",
        /// The steady-state window (all slots busy).
        SteadyState = "steady_state",
        /// An explicit `[start, end]` window.
        Windowed = "windowed",
        /// Consecutive windows after a ramp, each measured, valid when their energy per
        /// token agrees (`measurement.windows`; served engines).
        Windows = "windows",
    }
}

str_enum! {
    /// How a result splits its energy into prefill and decode.
    pub enum PhaseSplit {
        /// From the engine's own log of its passes, or the requests in flight (no extra run).
        Attributed = "attributed",
        /// optimum-benchmark's way: the same prompts again with one output token; that run's
        /// energy is the prefill, the rest of the window's the decode.
        Difference = "difference",
        /// Both, side by side.
        Both = "both",
    }
}

str_enum! {
    /// Request arrival process for serving engines.
    pub enum Arrival {
        /// Every request at t = 0 (concurrency bounded by the server or `max_concurrency`).
        AllAtOnce = "all_at_once",
        /// Fixed inter-arrival time `1 / rate_qps`.
        Constant = "constant",
        /// Exponential inter-arrival times at `rate_qps`.
        Poisson = "poisson",
        /// Gamma inter-arrival times at `rate_qps` with coefficient of variation `burstiness`.
        Gamma = "gamma",
    }
}

str_enum! {
    /// The layout of a replayed trace file.
    pub enum TraceFormatName {
        /// Azure LLM inference trace 2023/2024: CSV `TIMESTAMP,ContextTokens,GeneratedTokens`.
        Azure = "azure",
        /// BurstGPT: CSV `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`.
        BurstGpt = "burstgpt",
        /// Mooncake: JSONL `timestamp` (ms), `input_length`, `output_length`, `hash_ids`.
        Mooncake = "mooncake",
        /// Any CSV with a header row, its columns named in `columns:`.
        Csv = "csv",
        /// Any JSON Lines file, its keys named in `columns:`.
        Jsonl = "jsonl",
    }
}

str_enum! {
    /// How a trace's timestamps are written.
    pub enum TraceTimeUnit {
        /// Seconds (a number).
        Seconds = "s",
        /// Milliseconds (a number).
        Milliseconds = "ms",
        /// Microseconds (a number).
        Microseconds = "us",
        /// `YYYY-MM-DD HH:MM:SS[.fraction]`, UTC.
        DateTime = "datetime",
    }
}

str_enum! {
    /// How prompts are grouped into batches (seed 004, MLPerf-style).
    pub enum BatchingStrategy {
        /// Fixed batch size, dataset order.
        Static = "static",
        /// Fixed batch size, prompts sorted by input length.
        SortedStatic = "sorted_static" | "sorted",
        /// Batches filled up to a token budget.
        Dynamic = "dynamic",
        /// Sorted by length, then filled up to a token budget.
        SortedDynamic = "sorted_dynamic",
    }
}

str_enum! {
    /// Execution order of cells across cycles.
    pub enum ExperimentOrder {
        /// A A A B B B.
        Sequential = "sequential",
        /// A B A B A B.
        Interleave = "interleave" | "interleaved",
        /// Seeded random order per cycle.
        Shuffle = "shuffle" | "shuffled",
        /// Forward, reversed, forward, ...
        Reverse = "reverse",
        /// Rows of a balanced Williams design.
        LatinSquare = "latin_square",
    }
}
