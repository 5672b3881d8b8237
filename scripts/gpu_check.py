"""Helpers of scripts/gpu-check.sh, run on a machine with an NVIDIA GPU (torch, transformers
and nvidia-ml-py installed; no network needed).

  load --seconds N          a bf16 matmul loop on cuda:0 for N seconds
  probe --seconds N         the driver as NVML reports it while `load` runs: the energy
                            counter's update period, and the counter against integrated
                            instantaneous and averaged power
  make-model SRC DST        a SmolLM2-shaped model with random weights from SRC's config and
                            tokenizer (the check needs the architecture, not the weights)
  summary KIND FILE         the figures of `llem measure --json` (KIND=measure) or of a
                            result.json (KIND=result)
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def load(seconds: float) -> None:
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    n = 0
    start = time.monotonic()
    while time.monotonic() < end:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        n += 10
    took = time.monotonic() - start
    print(f"load: {n} matmuls 8192^3 bf16 in {took:.1f} s = {2 * 8192**3 * n / took / 1e12:.0f} TFLOP/s")


def instant_field(pynvml):
    return getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", 186)


def instant_mw(pynvml, h):
    try:
        v = pynvml.nvmlDeviceGetFieldValues(h, [instant_field(pynvml)])[0]
    except pynvml.NVMLError:
        return None
    return v.value.uiVal if v.nvmlReturn == 0 else None


def probe(seconds: float) -> None:
    import pynvml

    pynvml.nvmlInit()
    print(f"driver {pynvml.nvmlSystemGetDriverVersion()}")
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        try:
            persistence = pynvml.nvmlDeviceGetPersistenceMode(h)
        except pynvml.NVMLError as e:
            persistence = f"? ({e})"
        print(
            f"gpu {i}: {pynvml.nvmlDeviceGetName(h)} {pynvml.nvmlDeviceGetUUID(h)} "
            f"persistence={persistence} instant_power={'yes' if instant_mw(pynvml, h) is not None else 'no'}"
        )
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    loader = subprocess.Popen([sys.executable, __file__, "load", "--seconds", str(seconds + 2)])
    time.sleep(1.0)  # past the load's start-up
    t0 = time.monotonic()
    e0 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    changes, last_e = [], e0
    inst, avg = [], []
    next_power = t0
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        e = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        if e != last_e:
            changes.append(now)
            last_e = e
        if now >= next_power:
            i = instant_mw(pynvml, h)
            if i is not None:
                inst.append((now, i / 1000.0))
            avg.append((now, pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0))
            next_power += 0.02
        time.sleep(0.0005)
    t1 = time.monotonic()
    e1 = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    throttle = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
    loader.wait()

    def integral(points):
        return sum((t2 - t1_) * (p1 + p2) / 2 for (t1_, p1), (t2, p2) in zip(points, points[1:]))

    counter_j = (e1 - e0) / 1000.0
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    period = f"{statistics.median(gaps) * 1000:.1f} ms (min {min(gaps) * 1000:.1f}, max {max(gaps) * 1000:.1f}, {len(gaps)} updates)" if gaps else "no update seen"
    print(f"window {t1 - t0:.2f} s under load")
    print(f"energy counter: {counter_j:.1f} J, mean {counter_j / (t1 - t0):.1f} W; update period {period}")
    for name, points in (("instantaneous", inst), ("averaged", avg)):
        if len(points) < 2:
            print(f"{name} power: not available")
            continue
        j = integral(points)
        span = points[-1][0] - points[0][0]
        scaled = j * (t1 - t0) / span if span > 0 else float("nan")
        print(
            f"{name} power integrated: {scaled:.1f} J ({100 * (scaled - counter_j) / counter_j:+.1f} % vs counter), "
            f"{len(points)} samples, peak {max(p for _, p in points):.0f} W"
        )
    print(f"throttle reasons at the end: {throttle:#x}")


def make_model(src: Path, dst: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(src)
    model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    model.save_pretrained(dst)
    for f in src.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("generation_config.json", "chat_template.jinja"):
            shutil.copy(f, dst / f.name)
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M random parameters in {dst}")


def summary(kind: str, path: Path) -> None:
    r = json.loads(path.read_text())
    if kind == "measure":
        print(f"llem measure: {r['total_energy_j']:.1f} J over {r['duration_s']:.2f} s ({r['energy_source']}), {r['n_samples']} samples")
        for d in r["domains"]:
            dis = d.get("disagreement")
            print(
                f"  {d['name']}: {d['energy_j']:.1f} J from {d['energy_source']}; counter {d.get('counter_j')}, "
                f"integrated {d.get('integrated_j')}, disagreement {'n/a' if dis is None else f'{100 * dis:.2f} %'}, "
                f"peak {d.get('peak_power_w')} W"
            )
        for t in r.get("throttle", []):
            print(f"  throttle {t['domain']}: thermal {t['thermal_s']:.1f} s, power cap {t['power_cap_s']:.1f} s, hw {t['hw_slowdown_s']:.1f} s")
    else:
        keys = [
            "engine", "energy_scope", "energy_source", "total_tokens", "total_energy_j",
            "mj_per_tok_total", "mj_per_tok_adjusted", "system_energy_j", "avg_tokens_per_second",
            "total_inference_time_sec", "total_flops", "thermal_throttle",
        ]
        for k in keys:
            print(f"  {k}: {r.get(k)}")
    for w in r.get("warnings", []) + r.get("measurement_warnings", []):
        print(f"  warning: {w}")


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("load").add_argument("--seconds", type=float, default=15)
    sub.add_parser("probe").add_argument("--seconds", type=float, default=5)
    m = sub.add_parser("make-model")
    m.add_argument("src", type=Path)
    m.add_argument("dst", type=Path)
    s = sub.add_parser("summary")
    s.add_argument("kind", choices=["measure", "result"])
    s.add_argument("path", type=Path)
    a = p.parse_args()
    if a.cmd == "load":
        load(a.seconds)
    elif a.cmd == "probe":
        probe(a.seconds)
    elif a.cmd == "make-model":
        make_model(a.src, a.dst)
    else:
        summary(a.kind, a.path)


if __name__ == "__main__":
    main()
