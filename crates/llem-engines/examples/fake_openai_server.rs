//! The test suite's zero-compute OpenAI-compatible streaming server as a program, for
//! benchmarks and by-hand checks:
//! `fake_openai_server [--port N] [--first-token-ms MS] [--gap-ms MS] [--tokens-per-chunk K] [--no-usage]`.
//! Prints `listening on http://127.0.0.1:PORT` once it accepts connections.

use llem_testkit::fake_openai;

fn main() {
    let mut cfg = fake_openai::FakeConfig::default();
    let mut port = 0u16;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |what: &str| -> u64 {
            it.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{what} needs a number");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--port" => port = num("--port") as u16,
            "--first-token-ms" => cfg.first_token_ms = num("--first-token-ms"),
            "--gap-ms" => cfg.gap_ms = num("--gap-ms"),
            "--tokens-per-chunk" => cfg.tokens_per_chunk = num("--tokens-per-chunk") as u32,
            "--no-usage" => cfg.usage = false,
            "--continuous-usage" => cfg.continuous_usage = true,
            other => {
                eprintln!("unknown argument {other}");
                std::process::exit(2)
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1)
        }
    };
    rt.block_on(async move {
        let l = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("bind: {e}");
                std::process::exit(1)
            }
        };
        if let Ok(a) = l.local_addr() {
            println!("listening on http://{a}");
        }
        fake_openai::serve(cfg, l).await;
    });
}
