//! The embedded llama.cpp engine: a GGUF model loaded in-process through `llama-cpp-2`.
//!
//! A [`LlamaCppEngine`] owns the model; a [`LlamaCppSession`] owns one llama.cpp context
//! (KV cache with one stream per batch slot) and runs workloads on it, so warmup and
//! measurement share the context and its allocation happens before the window opens.

#[cfg(feature = "portable-cpu")]
mod cpu_backends;
mod decode;
pub(crate) mod info;
pub(crate) mod plan;
mod prompt;

pub(crate) use plan::{kv_element, placement};

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::OnceLock;

use llama_cpp_2::context::params::{KvCacheType as LlamaKvType, LlamaContextParams};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use llem_config::model::engines::LlamaCppConfig;
use llem_config::model::engines::llamacpp::{FlashAttn, KvCacheType};

use crate::engine::{
    ContextPlan, Engine, EngineError, EngineInfo, ModelInfo, RequestSink, RunSummary, Session,
};
use crate::placement::Placement;
use crate::workload::Workload;

/// Version of the `llama-cpp-2` bindings (pinned in Cargo.toml), which fixes the llama.cpp
/// source that is compiled in.
pub const BINDINGS_VERSION: &str = "0.1.160";

/// llama.cpp's backend is process-global and may be initialised only once.
fn backend() -> Result<&'static LlamaBackend, EngineError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs every load step to stderr; route it into tracing (shown at -v).
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            #[cfg(feature = "portable-cpu")]
            cpu_backends::load().map_err(|e| e.to_string())?;
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| EngineError::Load {
            model: String::new(),
            reason: format!("llama.cpp backend: {e}"),
        })
}

fn kv_type(t: KvCacheType) -> LlamaKvType {
    match t {
        KvCacheType::F32 => LlamaKvType::F32,
        KvCacheType::F16 => LlamaKvType::F16,
        KvCacheType::Bf16 => LlamaKvType::BF16,
        KvCacheType::Q8_0 => LlamaKvType::Q8_0,
        KvCacheType::Q4_0 => LlamaKvType::Q4_0,
        KvCacheType::Q4_1 => LlamaKvType::Q4_1,
        KvCacheType::Iq4Nl => LlamaKvType::IQ4_NL,
        KvCacheType::Q5_0 => LlamaKvType::Q5_0,
        KvCacheType::Q5_1 => LlamaKvType::Q5_1,
    }
}

/// A loaded GGUF model.
pub struct LlamaCppEngine {
    model: LlamaModel,
    info: ModelInfo,
    settings: LlamaCppConfig,
    template: Option<LlamaChatTemplate>,
    /// End-of-generation tokens (EOS, EOT, ...), masked for min_new_tokens / ignore_eos.
    eog: Vec<LlamaToken>,
    /// Ordinary text tokens, from which synthetic prompts are drawn.
    text_tokens: Vec<LlamaToken>,
    /// The LoRA adapter every context applies, with its scale.
    lora: Option<Lora>,
}

/// A GGUF LoRA adapter loaded with the model.
struct Lora {
    /// Setting it on a context takes it mutably; contexts are opened one at a time.
    adapter: std::sync::Mutex<llama_cpp_2::model::LlamaLoraAdapter>,
    scale: f32,
    path: std::path::PathBuf,
}

/// True when `path` starts with the GGUF magic.
fn is_gguf(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    // A model path that is a FIFO or a device would hang or feed the loader forever.
    let mut f = llem_config::files::open_regular(path)?;
    Ok(f.read_exact(&mut magic).is_ok() && &magic == b"GGUF")
}

/// What the GGUF file at `path` says of its model (architecture, sizes), from its metadata
/// only: the weights are not loaded. For a model another process serves (llama-server).
pub fn describe_gguf(path: &Path) -> Result<ModelInfo, String> {
    if !is_gguf(path).map_err(|e| e.to_string())? {
        return Err(format!("{} is not a GGUF file", path.display()));
    }
    let backend = backend().map_err(|e| e.to_string())?;
    let params = LlamaModelParams::default()
        .with_n_gpu_layers(0)
        .with_vocab_only(true);
    let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| e.to_string())?;
    let size = std::fs::metadata(path).ok().map(|m| m.len());
    Ok(info::model_info(&model, size))
}

impl LlamaCppEngine {
    /// Loads the GGUF model at `path` with the `llamacpp:` settings.
    pub fn load(path: &Path, settings: &LlamaCppConfig) -> Result<LlamaCppEngine, EngineError> {
        let fail = |reason: String| EngineError::Load {
            model: path.display().to_string(),
            reason,
        };
        match is_gguf(path) {
            Ok(true) => {}
            Ok(false) => return Err(fail("not a GGUF file (llamacpp loads .gguf models)".into())),
            Err(e) => return Err(fail(e.to_string())),
        }
        let backend = backend()?;
        let n_gpu_layers = match settings.n_gpu_layers {
            n if n < 0 => u32::MAX,
            n => n.unsigned_abs(),
        };
        let params = LlamaModelParams::default()
            .with_n_gpu_layers(n_gpu_layers)
            .with_use_mmap(settings.use_mmap);
        crate::engine_log::clear();
        let model = LlamaModel::load_from_file(backend, path, &params).map_err(|e| {
            // The bindings only say the result was null; llama.cpp's log says why.
            let said = crate::engine_log::take_recent();
            let why = if said.is_empty() {
                e.to_string()
            } else {
                said.join("; ")
            };
            fail(format!("llama.cpp could not load it: {why}"))
        })?;
        let size = std::fs::metadata(path).ok().map(|m| m.len());
        let info = info::model_info(&model, size);
        let template = model.chat_template(None).ok();
        let vocab = model.vocab();
        let mut eog = Vec::new();
        let mut text_tokens = Vec::new();
        for t in vocab.tokens() {
            if vocab.is_eog(t) {
                eog.push(t);
            } else if !vocab.is_control(t) {
                let piece = vocab.token_to_piece(t, false, None);
                if piece.iter().any(u8::is_ascii_alphanumeric) {
                    text_tokens.push(t);
                }
            }
        }
        Ok(LlamaCppEngine {
            model,
            info,
            settings: settings.clone(),
            template,
            eog,
            text_tokens,
            lora: None,
        })
    }

    /// Loads the GGUF LoRA adapter at `path`; every context opened afterwards applies it at
    /// `scale` (0 = the base model). llama.cpp refuses an adapter made for another
    /// architecture or with shapes that do not match the model's; its log says which.
    pub fn apply_lora(&mut self, path: &Path, scale: f32) -> Result<(), EngineError> {
        let fail = |reason: String| EngineError::Load {
            model: path.display().to_string(),
            reason: format!("LoRA adapter: {reason}"),
        };
        match is_gguf(path) {
            Ok(true) => {}
            Ok(false) => {
                return Err(fail(
                    "not a GGUF file (convert a PEFT adapter with llama.cpp's \
                     convert_lora_to_gguf.py)"
                        .into(),
                ));
            }
            Err(e) => return Err(fail(e.to_string())),
        }
        crate::engine_log::clear();
        let adapter = self.model.lora_adapter_init(path).map_err(|e| {
            let said = crate::engine_log::take_recent();
            fail(if said.is_empty() {
                e.to_string()
            } else {
                said.join("; ")
            })
        })?;
        self.lora = Some(Lora {
            adapter: std::sync::Mutex::new(adapter),
            scale,
            path: path.to_path_buf(),
        });
        Ok(())
    }

    /// The adapter applied, and its scale.
    pub fn lora(&self) -> Option<(&Path, f32)> {
        self.lora.as_ref().map(|l| (l.path.as_path(), l.scale))
    }

    /// Engine name, version and devices.
    pub fn engine_info(&self) -> EngineInfo {
        let listed = llama_cpp_2::list_llama_ggml_backend_devices();
        let mut devices: Vec<String> = listed
            .iter()
            .map(|d| format!("{} ({})", d.description, d.backend))
            .collect();
        if let Some((path, scale)) = self.lora() {
            devices.push(format!("LoRA adapter {} at scale {scale}", path.display()));
        }
        // Layers go to the GPU backends only when asked for and when this build has one; a
        // CPU-only build runs n_gpu_layers: -1 on the CPU.
        let gpus = listed
            .iter()
            .filter(|d| matches!(d.device_type, llama_cpp_2::LlamaBackendDeviceType::Gpu))
            .count();
        let offload = self.settings.n_gpu_layers != 0 && gpus > 0;
        EngineInfo {
            name: "llamacpp",
            version: Some(format!("llama-cpp-2 {BINDINGS_VERSION}")),
            system_info: (!devices.is_empty()).then(|| devices.join("; ")),
            placement: Some(if offload {
                Placement::Gpus((0..u32::try_from(gpus).unwrap_or(u32::MAX)).collect())
            } else {
                Placement::Cpu
            }),
        }
    }

    /// The model as loaded.
    pub fn model_info(&self) -> &ModelInfo {
        &self.info
    }

    /// Training context length.
    pub fn n_ctx_train(&self) -> u32 {
        self.model.n_ctx_train()
    }

    /// True when the model carries a chat template.
    pub fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }

    /// Tokens of `text` as plain text (no template, no BOS).
    pub fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), false, false)
    }

    /// Text of `tokens` (special tokens omitted).
    pub fn detokenize(&self, tokens: &[LlamaToken]) -> String {
        let vocab = self.model.vocab();
        let mut bytes = Vec::new();
        for &t in tokens {
            vocab.token_to_piece_into(t, &mut bytes, false, None);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Opens a context for `plan`: KV cache, threads, batch buffers.
    pub fn session(&self, plan: ContextPlan) -> Result<LlamaCppSession<'_>, EngineError> {
        let backend = backend()?;
        let slots = plan.batching.batch_size.get();
        let n_ctx = slots.saturating_mul(plan.tokens_per_slot);
        let n_ctx = NonZeroU32::new(n_ctx)
            .ok_or_else(|| EngineError::Config("the context would have 0 tokens".into()))?;
        let n_batch = n_ctx.get().min(2048);
        let flash = match self.settings.flash_attn {
            FlashAttn::Auto => -1,
            FlashAttn::Off => 0,
            FlashAttn::On => 1,
        };
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(n_batch)
            .with_n_ubatch(n_batch.min(512))
            .with_n_seq_max(slots)
            // One KV stream per slot: a sequence attends over its own cells only, and a
            // finished sequence's cells are freed without touching the others.
            .with_kv_unified(false)
            .with_n_threads(plan.n_threads)
            .with_n_threads_batch(plan.n_threads)
            .with_flash_attention_policy(flash)
            .with_type_k(kv_type(self.settings.kv_cache_type))
            .with_type_v(kv_type(self.settings.kv_cache_type));
        let mut ctx = self
            .model
            .new_context(backend, params)
            .map_err(|e| EngineError::Config(format!("llama.cpp context ({n_ctx} tokens): {e}")))?;
        if let Some(l) = &self.lora {
            let mut adapter = l
                .adapter
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ctx.lora_adapter_set(&mut adapter, l.scale).map_err(|e| {
                EngineError::Config(format!(
                    "llama.cpp could not apply the LoRA adapter {}: {e}",
                    l.path.display()
                ))
            })?;
        }
        let kv_bytes = kv_cache_bytes(&self.info, n_ctx.get(), self.settings.kv_cache_type);
        Ok(LlamaCppSession {
            engine: self,
            ctx,
            plan,
            n_batch,
            kv_bytes,
        })
    }
}

/// KV cache size: 2 (K and V) x layers x KV heads x head dim x cells x element size.
fn kv_cache_bytes(info: &ModelInfo, cells: u32, t: KvCacheType) -> Option<u64> {
    let bytes_per_elem = match t {
        KvCacheType::F32 => 4.0,
        KvCacheType::F16 | KvCacheType::Bf16 => 2.0,
        KvCacheType::Q8_0 => 34.0 / 32.0,
        KvCacheType::Q4_0 | KvCacheType::Iq4Nl => 18.0 / 32.0,
        KvCacheType::Q4_1 => 20.0 / 32.0,
        KvCacheType::Q5_0 => 22.0 / 32.0,
        KvCacheType::Q5_1 => 24.0 / 32.0,
    };
    let elems = 2.0
        * f64::from(info.layers?)
        * f64::from(info.kv_heads?)
        * f64::from(info.head_dim?)
        * f64::from(cells);
    Some((elems * bytes_per_elem) as u64)
}

/// One llama.cpp context on a loaded model.
pub struct LlamaCppSession<'m> {
    engine: &'m LlamaCppEngine,
    ctx: llama_cpp_2::context::LlamaContext<'m>,
    plan: ContextPlan,
    n_batch: u32,
    kv_bytes: Option<u64>,
}

impl LlamaCppSession<'_> {
    /// The context plan.
    pub fn plan(&self) -> ContextPlan {
        self.plan
    }

    /// KV cache size, bytes.
    pub fn kv_cache_bytes(&self) -> Option<u64> {
        self.kv_bytes
    }

    /// Runs `workload`, reporting each request to `sink` as its tokens arrive.
    pub fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        let (mut s, _) = decode::run(self, workload, sink)?;
        s.kv_cache_bytes = self.kv_bytes;
        Ok(s)
    }

    /// Greedy completion of `text` (chat template applied when `chat`), for checks and tests.
    pub fn complete(
        &mut self,
        text: &str,
        chat: bool,
        max_tokens: u32,
    ) -> Result<String, EngineError> {
        let prompts = vec![crate::workload::Prompt {
            dataset_index: 0,
            input: crate::workload::PromptInput::Text {
                text: text.to_string(),
                chat,
            },
            group: None,
            reference_output: None,
            output_tokens: None,
            ignore_eos: false,
            follow_ups: Vec::new(),
        }];
        let wl = Workload {
            prompts,
            sampling: crate::sampling::SamplingParams::greedy(),
            max_input_tokens: None,
            max_output_tokens: Some(max_tokens),
            traffic: None,
        };
        let (_, out) = decode::run(self, &wl, &mut decode::Collect::default())?;
        Ok(out
            .first()
            .map(|t| self.engine.detokenize(t))
            .unwrap_or_default())
    }

    /// Generated token ids per request (in request order), for tests of batch invariance.
    pub fn generate_ids(&mut self, workload: &Workload) -> Result<Vec<Vec<i32>>, EngineError> {
        let (_, out) = decode::run(self, workload, &mut decode::Collect::default())?;
        Ok(out
            .into_iter()
            .map(|v| v.into_iter().map(|t| t.0).collect())
            .collect())
    }
}

impl Engine for LlamaCppEngine {
    fn info(&self) -> EngineInfo {
        self.engine_info()
    }
    fn model_info(&self) -> &ModelInfo {
        &self.info
    }
    fn n_ctx_train(&self) -> u32 {
        self.model.n_ctx_train()
    }
    fn has_chat_template(&self) -> bool {
        self.template.is_some()
    }
    fn open(&self, plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError> {
        Ok(Box::new(self.session(plan)?))
    }
}

impl Session for LlamaCppSession<'_> {
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        LlamaCppSession::run(self, workload, sink)
    }
    fn kv_cache_bytes(&self) -> Option<u64> {
        self.kv_bytes
    }
    fn batching(&self) -> crate::workload::BatchingSpec {
        self.plan.batching
    }
}
