"""llem's transformers worker.

llem writes this file out and runs it with the configured Python. It reads one JSON op per
line on stdin and writes one JSON event per line on the stdout it was started with; library
output (prints, progress bars, warnings) goes to stderr, which llem keeps in the cell
directory. Every event carries `t`, time.monotonic() -- the same CLOCK_MONOTONIC llem's clock
reads, so llem places token times on its own experiment clock without a round trip.

Ops:      load, prepare, mark, generate, shutdown
Events:   hello, ready, loaded, prepared, marked, token, progress, request_done, batch_done,
          error
"""

import json
import os
import platform
import random
import re
import sys
import time
import traceback

PROTOCOL = 1

# Under torchrun (transformers.tp_plan) every rank runs this script: rank 0 reads the ops and
# hands each to the others, and only rank 0 speaks the protocol.
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))

# The protocol owns the original stdout; anything else that writes to fd 1 (C libraries,
# print) lands on stderr instead of corrupting the event stream.
_events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr


def log(message):
    """A line for the worker log (the cell directory's worker.log)."""
    sys.stderr.write("llem-worker%s: %s\n" % (" rank %d" % RANK if WORLD > 1 else "", message))
    sys.stderr.flush()


def emit(event, **fields):
    if RANK != 0:
        return
    fields["event"] = event
    fields.setdefault("t", time.monotonic())
    _events.write(json.dumps(fields, separators=(",", ":"), allow_nan=False) + "\n")
    _events.flush()


class Rejected(Exception):
    """A setting the installed libraries refuse, with the config field it came from."""

    def __init__(self, field, message):
        super().__init__(message)
        self.field = field


def blame(exc, fields):
    """The config field whose keyword an exception message names (longest match wins)."""
    text = str(exc)
    hits = [k for k in fields if re.search(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(k), text)]
    if not hits:
        return None
    return fields[max(hits, key=len)]


def version_tuple(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


class Worker:
    def __init__(self, torch, transformers):
        self.torch = torch
        self.tf = transformers
        self.model = None
        self.tok = None
        self.device = "cpu"
        self.prepared = []
        self.gen = {}
        self.gen_fields = {}
        self.autocast = None
        self.eos = []
        self.text_pool = None
        self.gpus = []

    # -- load -------------------------------------------------------------------------

    def load(self, op):
        torch, tf = self.torch, self.tf
        s = op.get("transformers") or {}
        passthrough = dict(op.get("passthrough_kwargs") or {})
        load_extra = passthrough.pop("from_pretrained", None) or {}
        gen_extra = passthrough.pop("generate", None) or {}
        gen_extra.update(passthrough)

        kwargs, fields = {}, {}

        def put(key, value, field):
            if value is not None:
                kwargs[key] = value
                fields[key] = field

        dtype = getattr(torch, op["dtype"]) if op.get("dtype") else None
        # transformers 4.56 renamed torch_dtype to dtype; older releases reject the new name.
        dtype_key = "dtype" if version_tuple(tf.__version__) >= (4, 56) else "torch_dtype"
        put(dtype_key, dtype, "dtype")
        put("gguf_file", op.get("gguf_file"), "transformers.gguf_file")
        put("attn_implementation", s.get("attn_implementation"), "transformers.attn_implementation")
        put("low_cpu_mem_usage", s.get("low_cpu_mem_usage"), "transformers.low_cpu_mem_usage")
        if s.get("max_memory"):
            mm = {(int(k) if str(k).isdigit() else k): v for k, v in s["max_memory"].items()}
            put("max_memory", mm, "transformers.max_memory")
        quantized = s.get("load_in_4bit") or s.get("load_in_8bit")
        if quantized:
            try:
                import bitsandbytes  # noqa: F401
            except ImportError as e:
                raise Rejected(
                    "transformers.load_in_4bit" if s.get("load_in_4bit") else "transformers.load_in_8bit",
                    "BitsAndBytes quantisation needs the bitsandbytes package (%s): "
                    "%s -m pip install bitsandbytes" % (e, sys.executable),
                )
            q = {}
            for key in ("load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant"):
                if s.get(key) is not None:
                    q[key] = s[key]
            if s.get("bnb_4bit_compute_dtype"):
                q["bnb_4bit_compute_dtype"] = getattr(torch, s["bnb_4bit_compute_dtype"])
            put("quantization_config", tf.BitsAndBytesConfig(**q), "transformers.load_in_4bit")
        if s.get("tp_plan"):
            if hasattr(tf, "DistributedConfig"):
                # transformers 5.x takes the plan through a DistributedConfig.
                dc = {"tp_plan": s["tp_plan"]}
                if s.get("tp_size"):
                    dc["tp_size"] = s["tp_size"]
                put("distributed_config", tf.DistributedConfig(**dc), "transformers.tp_plan")
            else:
                put("tp_plan", s["tp_plan"], "transformers.tp_plan")
                put("tp_size", s.get("tp_size"), "transformers.tp_size")
        elif s.get("device_map"):
            put("device_map", s["device_map"], "transformers.device_map")
        elif quantized and torch.cuda.is_available():
            put("device_map", {"": 0}, "transformers.device_map")
        for k, v in load_extra.items():
            put(k, v, "passthrough_kwargs.from_pretrained.%s" % k)

        tok_kwargs = {k: v for k, v in kwargs.items() if k in ("gguf_file", "revision", "trust_remote_code", "token")}
        started = time.monotonic()
        log("loading %s%s with %s" % (op["model"], " (%s)" % op["gguf_file"] if op.get("gguf_file") else "",
                                      ", ".join("%s=%r" % kv for kv in sorted(kwargs.items())) or "defaults"))
        try:
            self.tok = tf.AutoTokenizer.from_pretrained(op["model"], **tok_kwargs)
            self.model = tf.AutoModelForCausalLM.from_pretrained(op["model"], **kwargs)
        except Exception as e:
            field = blame(e, fields)
            if field is not None:
                raise Rejected(field, "%s: %s" % (type(e).__name__, e)) from e
            raise
        model = self.model
        placed = "device_map" in kwargs or "tp_plan" in kwargs or "distributed_config" in kwargs
        if not placed:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
            model.to(self.device)
        else:
            self.device = str(next(model.parameters()).device)
        if op.get("lora"):
            model = self.model = self.apply_lora(model, op["lora"])
        model.eval()
        # Every GPU holding weights (device_map may spread them): synced, and their peaks summed.
        self.gpus = sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
        if s.get("allow_tf32") is not None:
            torch.backends.cuda.matmul.allow_tf32 = bool(s["allow_tf32"])
            torch.backends.cudnn.allow_tf32 = bool(s["allow_tf32"])
        if s.get("torch_compile"):
            ck = {}
            if s.get("torch_compile_mode"):
                ck["mode"] = s["torch_compile_mode"]
            if s.get("torch_compile_backend"):
                ck["backend"] = s["torch_compile_backend"]
            model.forward = torch.compile(model.forward, **ck)
        if s.get("autocast_enabled"):
            ad = s.get("autocast_dtype") or op.get("dtype") or "bfloat16"
            self.autocast = (self.device.split(":")[0], getattr(torch, ad))

        tok = self.tok
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        eos = model.generation_config.eos_token_id
        if eos is None:
            eos = tok.eos_token_id
        self.eos = [e for e in (eos if isinstance(eos, list) else [eos]) if e is not None]

        self.gen, self.gen_fields = self.generation_kwargs(s, op.get("sampling") or {}, gen_extra)
        cache = str(self.gen.get("cache_implementation") or "")
        if cache.startswith("offloaded") and not self.device.startswith("cuda"):
            raise Rejected("transformers.cache_implementation",
                           "cache_implementation %r offloads the KV cache from a GPU; the model is on %s"
                           % (cache, self.device))
        # Two tokens through generate() now, so a keyword the installed transformers refuses
        # fails the load (naming its field) instead of the measurement.
        probe = tok("Hello", return_tensors="pt").to(self.device)
        self.generate_raw(probe["input_ids"], probe["attention_mask"], 2, None, None, None)
        log("loaded on %s in %.1f s; generate() gets %s" % (
            self.device, time.monotonic() - started,
            ", ".join("%s=%r" % kv for kv in sorted(self.gen.items()) if kv[1] is not None) or "defaults"))

        c = model.config
        text_cfg = getattr(c, "text_config", None) or c
        heads = getattr(text_cfg, "num_attention_heads", None)
        hidden = getattr(text_cfg, "hidden_size", None)
        head_dim = getattr(text_cfg, "head_dim", None) or (hidden // heads if hidden and heads else None)
        size = None
        if op.get("gguf_file"):
            try:
                size = os.path.getsize(os.path.join(op["model"], op["gguf_file"]))
            except OSError:
                size = None
        dtype_name = str(model.dtype).replace("torch.", "")
        if s.get("load_in_4bit"):
            dtype_name = "bnb-4bit-" + (s.get("bnb_4bit_quant_type") or "nf4")
        elif s.get("load_in_8bit"):
            dtype_name = "bnb-8bit"
        emit(
            "loaded",
            architecture=getattr(c, "model_type", None),
            parameters=int(sum(p.numel() for p in model.parameters())),
            layers=getattr(text_cfg, "num_hidden_layers", None),
            hidden_size=hidden,
            attention_heads=heads,
            kv_heads=getattr(text_cfg, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            ffn_size=getattr(text_cfg, "intermediate_size", None),
            vocab_size=getattr(text_cfg, "vocab_size", None),
            context_length=getattr(text_cfg, "max_position_embeddings", None),
            tied_embeddings=bool(getattr(c, "tie_word_embeddings", False)),
            dtype=dtype_name,
            weights_bytes=int(model.get_memory_footprint()),
            file_size_bytes=size,
            device=self.device,
            device_name=", ".join(torch.cuda.get_device_name(i) for i in self.gpus) if self.gpus else platform.processor() or "cpu",
            device_total_bytes=sum(torch.cuda.get_device_properties(i).total_memory for i in self.gpus) if self.gpus else None,
            gpus=list(self.gpus),
            chat_template=bool(getattr(tok, "chat_template", None)),
        )

    def apply_lora(self, model, lora):
        """The model with the PEFT adapter `lora` names, its every LoRA layer scaled by
        `lora.scale` (0 = the base model), merged into the weights when asked."""
        field = "lora.adapter_path" if lora.get("adapter_path") else "lora.adapter_id"
        try:
            import peft
        except ImportError as e:
            raise Rejected(field, "LoRA adapters need the peft package (%s): %s -m pip install peft"
                           % (e, sys.executable))
        source = lora.get("adapter_path") or lora.get("adapter_id")
        try:
            model = peft.PeftModel.from_pretrained(model, source)
        except Exception as e:
            raise Rejected(field, "PEFT could not load the adapter %s: %s: %s" % (source, type(e).__name__, e)) from e
        scale = float(lora.get("scale", 1.0))
        layers = 0
        for m in model.modules():
            if isinstance(m, peft.tuners.lora.LoraLayer):
                layers += 1
                for name in list(m.scaling):
                    m.scaling[name] *= scale
        if layers == 0:
            raise Rejected(field, "the adapter %s holds no LoRA layer for this model" % source)
        if lora.get("merge_weights"):
            model = model.merge_and_unload()
        log("LoRA adapter %s on %d layers at scale %g%s" % (source, layers, scale, ", merged" if lora.get("merge_weights") else ""))
        return model

    def generation_kwargs(self, s, sampling, extra):
        gen, fields = {}, {}

        def put(key, value, field):
            if value is not None:
                gen[key] = value
                fields[key] = field

        for key in ("use_cache", "cache_implementation", "num_beams", "early_stopping",
                    "length_penalty", "no_repeat_ngram_size", "prompt_lookup_num_tokens"):
            put(key, s.get(key), "transformers." + key)
        if sampling.get("greedy", True):
            put("do_sample", False, "decoder.do_sample")
            # The model's own sampling defaults would only draw warnings under greedy.
            for key in ("temperature", "top_p", "top_k", "min_p"):
                gen[key] = None
        else:
            put("do_sample", True, "decoder.do_sample")
            put("temperature", sampling.get("temperature"), "decoder.temperature")
            put("top_k", sampling.get("top_k"), "decoder.top_k")
            put("top_p", sampling.get("top_p"), "decoder.top_p")
            put("min_p", sampling.get("min_p"), "decoder.min_p")
        rp = sampling.get("repetition_penalty")
        if rp is not None and rp != 1.0:
            put("repetition_penalty", rp, "decoder.repetition_penalty")
        put("min_new_tokens", sampling.get("min_new_tokens"), "decoder.min_new_tokens")
        for k, v in extra.items():
            put(k, v, "passthrough_kwargs.%s" % k)
        return gen, fields

    # -- prompts ----------------------------------------------------------------------

    def templated(self, text):
        return self.tok.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )

    def ids(self, text, special):
        return self.tok(text, add_special_tokens=special)["input_ids"]

    def synthetic(self, n, seed):
        tok = self.tok
        if self.text_pool is None:
            special = set(tok.all_special_ids)
            pieces = tok.convert_ids_to_tokens(list(range(len(tok))))
            self.text_pool = [
                i for i, p in enumerate(pieces)
                if i not in special and p is not None and any(ch.isascii() and ch.isalnum() for ch in p)
            ]
        prefix = self.ids("", True)
        rng = random.Random(seed)
        out = list(prefix)
        while len(out) < n and self.text_pool:
            out.append(self.text_pool[rng.randrange(len(self.text_pool))])
        return out

    def tokenize(self, p, max_in):
        limit = max(1, max_in) if max_in else None
        if "tokens" in p:
            want = p["tokens"]
            n = max(1, min(want, limit) if limit else want)
            return self.synthetic(n, p.get("seed", 0)), want > n
        text = p.get("text", "")
        if p.get("chat") and getattr(self.tok, "chat_template", None):
            ids = self.ids(self.templated(text), False)
            if limit is None or len(ids) <= limit:
                return ids, False
            # Cut inside the user turn so the template and the assistant header stay whole.
            overhead = len(self.ids(self.templated(""), False))
            keep = max(1, limit - overhead)
            body = self.ids(text, False)[:keep]
            cut = self.tok.decode(body)
            return self.ids(self.templated(cut), False)[:limit], True
        ids = self.ids(text, True)
        if limit is not None and len(ids) > limit:
            return ids[:limit], True
        return ids, False

    def prepare(self, op):
        max_in = op.get("max_input_tokens")
        self.prepared = []
        lengths, truncated, references = [], [], []
        for p in op["prompts"]:
            ids, cut = self.tokenize(p, max_in)
            self.prepared.append(ids)
            lengths.append(len(ids))
            truncated.append(cut)
            ref = p.get("reference")
            references.append(None if ref is None else len(self.ids(ref, False)))
        emit("prepared", input_tokens=lengths, truncated=truncated, reference_tokens=references)

    # -- generation -------------------------------------------------------------------

    def sync(self):
        for i in self.gpus:
            self.torch.cuda.synchronize(i)

    def mark(self, _op):
        self.sync()
        for i in self.gpus:
            self.torch.cuda.reset_peak_memory_stats(i)
        emit("marked")

    def generate_raw(self, input_ids, attention_mask, max_new, limits, ignore_eos, streamer):
        torch, tf = self.torch, self.tf
        worker = self
        prompt_len = input_ids.shape[1]
        beams = int(self.gen.get("num_beams") or 1)

        class Steps(tf.StoppingCriteria):
            """Per-row token limits (a row stops alone, as a server slot does) and a
            heartbeat, so a long non-streamed batch still shows it is alive."""

            def __init__(self):
                self.steps = 0
                # When each forward pass ended (the first is the prefill): llem attributes
                # the energy between them to prefill, decode and the requests in each.
                self.ends = []
                self.last = time.monotonic()
                self.limits = None if limits is None or beams > 1 else torch.tensor(limits, device=input_ids.device)

            def __call__(self, ids, scores, **kw):
                self.steps += 1
                now = time.monotonic()
                self.ends.append(now)
                if now - self.last >= 1.0:
                    self.last = now
                    emit("progress", steps=self.steps)
                if self.limits is None:
                    return torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
                return (ids.shape[1] - prompt_len) >= self.limits

        class MaskEos(tf.LogitsProcessor):
            def __init__(self, rows):
                self.rows = rows

            def __call__(self, ids, scores):
                for r in self.rows:
                    scores[r, worker.eos] = -float("inf")
                return scores

        processors = tf.LogitsProcessorList()
        if ignore_eos and any(ignore_eos) and beams == 1:
            processors.append(MaskEos([i for i, v in enumerate(ignore_eos) if v]))
        steps = Steps()
        kwargs = dict(self.gen)
        kwargs.update(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max_new,
            stopping_criteria=tf.StoppingCriteriaList([steps]),
            logits_processor=processors,
            pad_token_id=self.tok.pad_token_id,
        )
        if streamer is not None:
            kwargs["streamer"] = streamer
        try:
            with torch.inference_mode():
                if self.autocast:
                    with torch.autocast(self.autocast[0], dtype=self.autocast[1]):
                        out = self.model.generate(**kwargs)
                else:
                    out = self.model.generate(**kwargs)
        except Exception as e:
            if is_oom(torch, e):
                raise
            field = blame(e, self.gen_fields)
            if field is not None:
                raise Rejected(field, "%s: %s" % (type(e).__name__, e)) from e
            raise
        if not torch.is_tensor(out):
            out = out.sequences
        return out[:, prompt_len:], steps.steps, steps.ends

    def generate(self, op):
        torch = self.torch
        reqs = op["requests"]
        seqs = [self.prepared[r["index"]] for r in reqs]
        width = max(len(s) for s in seqs)
        pad = self.tok.pad_token_id
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            ids[row, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[row, width - len(s):] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        limits = [int(r["max_new_tokens"]) for r in reqs]
        ignore = [bool(r.get("ignore_eos")) for r in reqs]
        streamer = TokenTimes(self.eos, reqs[0]["index"], ignore[0]) if op.get("stream") else None
        if streamer is not None and len(reqs) != 1:
            raise ValueError("a streamed batch holds exactly one request")
        torch.manual_seed(int(op.get("seed", 0)))
        log("generate batch %s: %d requests, prompts of %d tokens (padded), up to %d new tokens%s" % (
            op.get("batch"), len(reqs), width, max(limits), ", streamed" if streamer else ""))
        self.sync()
        t0 = time.monotonic()
        out, steps, step_ends = self.generate_raw(ids, mask, max(limits), limits, ignore, streamer)
        self.sync()
        t1 = time.monotonic()
        eos = set(self.eos)
        rows = out.tolist()
        for row, r in enumerate(reqs):
            toks = rows[row][: limits[row]]
            n, finish = len(toks), "length"
            if not ignore[row]:
                for k, t in enumerate(toks):
                    if t in eos:
                        n, finish = k, "stop"
                        break
            emit(
                "request_done",
                request=r["index"],
                output_tokens=n,
                finish_reason=finish,
                token_ids=toks[:n] if op.get("return_ids") else None,
                end_t=t1 if streamer is None else (streamer.end_t or t1),
            )
        peak = None
        if self.gpus:
            peak = int(sum(torch.cuda.max_memory_allocated(i) for i in self.gpus))
        emit("batch_done", batch=op.get("batch"), t0=t0, t1=t1, steps=steps, step_ends=step_ends,
             device_peak_bytes=peak, rss_peak_bytes=rss_peak_bytes())


class TokenTimes:
    """A generate() streamer: the time of every token of a one-request batch, sent live."""

    def __init__(self, eos, request, ignore_eos):
        self.eos = set(eos)
        self.request = request
        self.ignore_eos = ignore_eos
        self.prompt_seen = False
        self.stopped = False
        self.end_t = None

    def put(self, value):
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        now = time.monotonic()
        for t in value.reshape(-1).tolist():
            if self.stopped:
                return
            if t in self.eos and not self.ignore_eos:
                self.stopped = True
                self.end_t = now
                return
            self.end_t = now
            emit("token", request=self.request, t=now)

    def end(self):
        pass


def rss_peak_bytes():
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    except Exception:
        return None


def is_oom(torch, e):
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return isinstance(e, MemoryError) or (oom is not None and isinstance(e, oom))


def ops(torch):
    """The ops from stdin; under torchrun, rank 0 reads them and every rank gets each one."""
    if WORLD > 1:
        import torch.distributed as dist

        if not dist.is_initialized():
            if torch.cuda.is_available():
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    while True:
        op = None
        if RANK == 0:
            line = sys.stdin.readline()
            if not line:
                op = {"op": "shutdown"}
            elif line.strip():
                try:
                    op = json.loads(line)
                except ValueError as e:
                    emit("error", kind="exception", message="not an op: %s" % e)
                    continue
            else:
                continue
        if WORLD > 1:
            box = [op]
            dist.broadcast_object_list(box, src=0)
            op = box[0]
        yield op
        if op.get("op") == "shutdown":
            return


def main():
    emit("hello", protocol=PROTOCOL, python=platform.python_version(), executable=sys.executable, pid=os.getpid())
    try:
        import torch
    except Exception as e:
        emit("error", kind="missing_package", package="torch", message="%s: %s" % (type(e).__name__, e))
        return 3
    try:
        import transformers
    except Exception as e:
        emit("error", kind="missing_package", package="transformers", message="%s: %s" % (type(e).__name__, e))
        return 3
    devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    log("python %s, torch %s, transformers %s, CUDA devices: %s" % (
        platform.python_version(), torch.__version__, transformers.__version__, devices or "none"))
    emit("ready", torch=torch.__version__, transformers=transformers.__version__, cuda=torch.version.cuda, devices=devices)
    worker = Worker(torch, transformers)
    handlers = {"load": worker.load, "prepare": worker.prepare, "mark": worker.mark, "generate": worker.generate}
    for op in ops(torch):
        try:
            name = op.get("op")
            if name == "shutdown":
                return 0
            handler = handlers.get(name)
            if handler is None:
                raise ValueError("unknown op %r" % (name,))
            handler(op)
        except Rejected as e:
            emit("error", kind="rejected", field=e.field, message=str(e), traceback=traceback.format_exc())
        except Exception as e:
            kind = "oom" if is_oom(torch, e) else "exception"
            if kind == "oom" and torch.cuda.is_available():
                torch.cuda.empty_cache()
            if kind == "exception" and isinstance(e, ImportError):
                kind = "missing_package"
            emit("error", kind=kind, message="%s: %s" % (type(e).__name__, e), traceback=traceback.format_exc())
        sys.stderr.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
