//! The peer for `bench/decode.sh`: llama.cpp driven directly through `llama-cpp-2`, with no
//! llem code on the path — `npl` sequences of `pp` prompt tokens prefilled in one batch, then
//! `tg` decode steps of one token per sequence, greedy, end-of-sequence ignored (the shape of
//! llama.cpp's llama-batched-bench). Prints one JSON line per run.
//!
//! cargo run --release -p llem-engines --example raw_decode -- MODEL PP TG NPL THREADS REPEATS
//!
//! An example, not a bench target, so it links the llama.cpp that the release profile
//! compiles for `llem` itself (the bench profile would build it again with other flags).

#![allow(clippy::indexing_slicing, missing_docs)]

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;

fn arg(args: &[String], i: usize, default: &str) -> String {
    args.get(i).cloned().unwrap_or_else(|| default.to_string())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model_path = arg(&args, 0, "SmolLM2-135M-Instruct.Q4_1.gguf");
    let pp: usize = arg(&args, 1, "128").parse()?;
    let tg: usize = arg(&args, 2, "128").parse()?;
    let npl: usize = arg(&args, 3, "1").parse()?;
    let threads: i32 = arg(&args, 4, "2").parse()?;
    let repeats: usize = arg(&args, 5, "3").parse()?;

    let mut backend = LlamaBackend::init()?;
    backend.void_logs();
    let model = LlamaModel::load_from_file(&backend, &model_path, &LlamaModelParams::default())?;
    let per_seq = u32::try_from(pp + tg + 16)?;
    let n_ctx = NonZeroU32::new(per_seq * u32::try_from(npl)?).ok_or("empty context")?;
    let params = LlamaContextParams::default()
        .with_n_ctx(Some(n_ctx))
        .with_n_batch(n_ctx.get().min(2048))
        .with_n_ubatch(n_ctx.get().min(2048).min(512))
        .with_n_seq_max(u32::try_from(npl)?)
        .with_kv_unified(false)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(&backend, params)?;
    let mut prompt = model.vocab().tokenize(
        "the quick brown fox jumps ".repeat(pp).as_bytes(),
        true,
        false,
    );
    prompt.truncate(pp);
    let mut batch = LlamaBatch::new(n_ctx.get().min(2048) as usize, i32::try_from(npl)?);

    for rep in 0..repeats + 1 {
        ctx.clear_kv_cache();
        let mut samplers: Vec<LlamaSampler> = (0..npl).map(|_| LlamaSampler::greedy()).collect();
        let t0 = Instant::now();
        batch.clear();
        for s in 0..npl {
            for (j, &t) in prompt.iter().enumerate() {
                batch.add(
                    t,
                    i32::try_from(j)?,
                    &[i32::try_from(s)?],
                    j + 1 == prompt.len(),
                )?;
            }
        }
        ctx.decode(&mut batch)?;
        let mut last: Vec<_> = (0..npl)
            .map(|s| {
                samplers[s].sample(&ctx, i32::try_from((s + 1) * prompt.len() - 1).unwrap_or(0))
            })
            .collect();
        let t_pp = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        for step in 0..tg.saturating_sub(1) {
            batch.clear();
            for (s, tok) in last.iter().enumerate() {
                batch.add(
                    *tok,
                    i32::try_from(prompt.len() + step)?,
                    &[i32::try_from(s)?],
                    true,
                )?;
            }
            ctx.decode(&mut batch)?;
            for (s, tok) in last.iter_mut().enumerate() {
                *tok = samplers[s].sample(&ctx, i32::try_from(s)?);
            }
        }
        let t_tg = t1.elapsed().as_secs_f64();
        if rep == 0 {
            continue; // warmup
        }
        println!(
            "{{\"peer\": \"raw\", \"npl\": {npl}, \"pp\": {pp}, \"tg\": {tg}, \"t_pp_s\": {t_pp:.6}, \"t_tg_s\": {t_tg:.6}, \"decode_tps\": {:.3}, \"total_tps\": {:.3}}}",
            (npl * (tg - 1)) as f64 / t_tg,
            (npl * (pp + tg)) as f64 / (t_pp + t_tg)
        );
    }
    Ok(())
}
