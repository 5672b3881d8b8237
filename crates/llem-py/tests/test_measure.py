"""Measuring from Python: the real SmolLM2 on the embedded llama.cpp engine, in this process
(`run_experiment`) and in child processes (`run_study`), the dry run, and the errors."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import pytest

import llem
from conftest import TINY


def test_run_experiment_from_a_dict_gives_every_field_and_the_sidecars(sandbox):
    events = []
    r = llem.run_experiment(dict(TINY, name="pydict", output_dir=str(sandbox / "results")), progress=events.append)
    on_disk = json.loads((r.cell_dir / "result.json").read_text())
    # Every field of result.json is an attribute, with the same value.
    for k, v in on_disk.items():
        got = getattr(r, k)
        assert (got.to_dict() if isinstance(got, llem.Section) else
                [x.to_dict() if isinstance(x, llem.Section) else x for x in got] if isinstance(got, list) else got) == v, k
    assert r.to_dict() == on_disk
    assert r.engine == "llamacpp" and r.total_output_tokens == 4 * 8
    assert r.total_energy_j > 0 and r.mj_per_tok_total > 0
    assert isinstance(r.process_results, list)
    # Nested objects are attributes too, and a typo names the field meant.
    assert r.latency_stats.ttft_median_ms > 0
    with pytest.raises(AttributeError, match="total_energy_j"):
        r.total_enrgy_j
    ts, req = r.timeseries(), r.requests()
    assert len(req) == 4 and (req["output_tokens"] == 8).all()
    assert len(ts) > 0 and "timestamp_s" in ts.columns or len(ts.columns) > 2
    # Progress arrived as it happened: the phases in order, with advances.
    phases = [e["phase"] for e in events if e.get("type") == "phase"]
    assert "measure" in phases and any(e.get("type") == "advance" for e in events)


def test_keyword_arguments_mirror_the_yaml_and_a_path_works_too(sandbox):
    r = llem.run_experiment(progress=False, name="kw", output_dir="results", **{k: v for k, v in TINY.items()})
    assert r.model_name.endswith("SmolLM2-135M-Instruct.Q4_1.gguf") or "SmolLM2" in r.model_name
    yaml = sandbox / "e.yaml"
    yaml.write_text(
        "name: fromfile\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
    )
    r2 = llem.run_experiment(yaml, progress=False)
    assert r2.total_output_tokens == 2 * 4
    assert r2.cell_dir.parent.name.startswith("fromfile_")
    # The directory stays valid wherever the notebook goes next.
    assert r2.cell_dir.is_absolute() and (r2.cell_dir / "result.json").is_file()


def test_a_config_error_keeps_file_line_column_and_the_nearest_key(sandbox):
    yaml = sandbox / "bad.yaml"
    yaml.write_text("name: bad\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nmax_output_tokns: 4\n")
    with pytest.raises(llem.ConfigError) as e:
        llem.run_experiment(yaml, progress=False)
    msg = str(e.value)
    assert "bad.yaml:3:1" in msg and "max_output_tokens" in msg, msg
    assert isinstance(e.value, ValueError)
    with pytest.raises(llem.ConfigError, match="max_output_tokens") as e:
        llem.plan(dict(TINY, max_output_tokns=4))
    # A dict's error names the dict, not the temporary file it was written to.
    assert "<dict>:" in str(e.value) and "/llem-" not in str(e.value), str(e.value)
    with pytest.raises(TypeError):
        llem.run_experiment(yaml, model="x")
    # Nothing was created for a configuration that never ran.
    assert not (sandbox / "results").exists()


def test_a_bad_argument_is_a_python_error_that_names_it(sandbox):
    # Keyword arguments become typed options, never command-line strings: a bad value is a
    # ValueError or TypeError naming the argument, before anything runs.
    study = dict(TINY, name="args", sweep={"llamacpp.batch_size": [1, 2]})
    with pytest.raises(ValueError, match="^cycles: -1 ") as e:
        llem.run_study(study, cycles=-1, progress=False)
    assert not isinstance(e.value, llem.ConfigError)
    with pytest.raises(TypeError, match="^cycles must be an int, not bool"):
        llem.run_study(study, cycles=True, progress=False)
    with pytest.raises(ValueError, match="^timeout_hours: "):
        llem.run_study(study, timeout_hours=0, progress=False)
    with pytest.raises(TypeError, match="^gaps must be True or False, not int"):
        llem.run_study(study, gaps=0, progress=False)
    with pytest.raises(ValueError, match="^resume_dir: "):
        llem.run_study(study, resume=True, resume_dir=str(sandbox), progress=False)
    with pytest.raises(ValueError, match="^order: "):
        llem.plan(study, order="sideways")
    with pytest.raises(ValueError, match="^sampling_interval: "):
        llem.run_experiment(TINY, sampling_interval="fast", progress=False)
    with pytest.raises(TypeError, match="^progress must be"):
        llem.run_experiment(TINY, progress=42)
    with pytest.raises(TypeError, match="^config must be a path or a dict"):
        llem.plan(42)
    # An output directory that looks like a flag is a directory like any other.
    p = llem.plan(dict(study, output_dir="-x"))
    assert p["output_dir"] == "-x"
    assert not (sandbox / "results").exists() and not (sandbox / "-x").exists()


def test_a_missing_file_is_file_not_found_and_config_errors_are_structured(sandbox):
    with pytest.raises(FileNotFoundError, match="nothere.yaml") as e:
        llem.run_study(sandbox / "nothere.yaml", progress=False)
    assert e.value.errno == 2 and "nothere.yaml" in e.value.filename
    with pytest.raises(FileNotFoundError):
        llem.plan(str(sandbox / "nothere.yaml"))
    yaml = sandbox / "bad.yaml"
    yaml.write_text("name: bad\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nmax_output_tokns: 4\n")
    with pytest.raises(llem.ConfigError) as e:
        llem.run_study(yaml, progress=False)
    (first,) = e.value.errors
    assert first["file"] == str(yaml) and (first["line"], first["column"]) == (3, 1), first
    assert first["kind"] == "unknown_key" and "max_output_tokns" in first["message"], first
    assert "max_output_tokens" in first["help"], first
    # A dict's errors name the dict, in the list as in the message.
    with pytest.raises(llem.ConfigError) as e:
        llem.plan(dict(TINY, max_output_tokns=4))
    assert [d["file"] for d in e.value.errors] == ["<dict>"], e.value.errors


def test_a_slurm_study_is_refused_not_run_here(sandbox):
    study = dict(TINY, name="cluster", sweep={"llamacpp.batch_size": [1, 2]},
                 study_execution={"executor": {"slurm": {"partition": "gpu"}}})
    with pytest.raises(llem.ConfigError, match="llem run"):
        llem.run_study(study, progress=False)
    assert not (sandbox / "results").exists()


def test_plan_is_the_dry_run_and_runs_nothing(sandbox):
    study = dict(TINY, name="sw", sweep={"llamacpp.batch_size": [1, 2]})
    p = llem.plan(study, cycles=2)
    assert p["kind"] == "study"
    assert len(p["runs"]) == 4 and len(p["configurations"]) == 2
    assert not (sandbox / "results").exists()


def test_relative_paths_in_a_dict_are_the_callers(sandbox):
    # A notebook's dict names files as the notebook sees them (its working directory), not
    # as the temporary file the dict is written to would.
    (sandbox / "configs").mkdir()
    (sandbox / "configs" / "base.yaml").write_text(json.dumps(dict(TINY, max_input_tokens=40)))
    p = llem.plan({"name": "rel", "base": "configs/base.yaml", "sweep": {"llamacpp.batch_size": [1, 2]}})
    assert [c["config"]["max_input_tokens"] for c in p["configurations"]] == [40, 40]
    p = llem.plan({"_extends": "configs/base.yaml", "name": "ext"})
    assert p["configurations"][0]["config"]["max_input_tokens"] == 40
    with pytest.raises(llem.ConfigError, match="nothere.yaml") as e:
        llem.plan({"name": "rel", "base": "configs/nothere.yaml", "sweep": {"llamacpp.batch_size": [1, 2]}})
    assert "<dict>:" in str(e.value), str(e.value)


def test_configuration_warnings_come_before_the_run(sandbox):
    # Replies of 8 tokens capped at 6: a warning a notebook sees before it waits for the run.
    capped = dict(TINY, name="capped", max_output_tokens=6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        before_first_event = []
        r = llem.run_experiment(capped, progress=lambda e: before_first_event.append(len(seen)))
    assert before_first_event and before_first_event[0] == 1, before_first_event
    assert "capped at 6 tokens" in str(seen[0].message)
    assert seen[0].filename == __file__, "attributed to the caller"
    assert r.total_output_tokens == 4 * 6
    # Warnings as errors stop it before it starts: nothing measured, nothing written.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="capped at 6"):
            llem.run_experiment(dict(capped, output_dir="strict"), progress=False)
        with pytest.raises(UserWarning, match="capped at 6"):
            llem.run_study(dict(capped, output_dir="strict", sweep={"llamacpp.batch_size": [1, 2]}), progress=False)
    assert not (sandbox / "strict").exists()


def test_run_study_runs_cells_in_child_processes_and_returns_the_study(sandbox):
    yaml = sandbox / "study.yaml"
    yaml.write_text(
        "name: pystudy\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
        "sweep: {llamacpp.batch_size: [1, 2]}\n"
        "study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n"
    )
    events = []
    s = llem.run_study(yaml, progress=events.append)
    assert s.status == "completed", s
    assert s.summary.completed == 4 and len(s.experiments) == 4
    assert all(e.total_output_tokens == 8 for e in s.experiments)
    assert s.experiments[0].requests().shape[0] == 2
    assert len(s.statistics) == 2
    assert {c.status for c in s.cells} == {"completed"}
    assert s.manifest.summary.total_experiments == 4
    # The cells ran as separate processes, each reporting its phases back.
    assert [e["event"] for e in events].count("cell_started") == 4
    for c in s.cells:
        cell = s.study_dir / c.cell_dir
        assert (cell / "cell.log").is_file() and (cell / "result.json").is_file(), c


def test_a_search_study_gives_its_answer_as_study_search(sandbox):
    yaml = sandbox / "search.yaml"
    yaml.write_text(
        "name: pysearch\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
        "sweep: {llamacpp.batch_size: [1, 2, 4], llamacpp.n_threads: [1, 2]}\n"
        "search: {objective: mj_per_tok_total, constraints: ['itl_p90_ms <= 5000'], budget: 6, seed: 2}\n"
        "study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n"
    )
    s = llem.run_study(yaml, progress=False)
    assert s.status == "completed", s
    search = s.search
    assert search is not None and search.phase == "done"
    assert search.stop_reason in ("identified", "budget_spent", "unresolved")
    assert search.runs_used <= 6 == search.budget_runs and search.grid_runs == 12
    assert search.answer.objective_mean > 0 and search.answer.config_hash
    assert len(search.candidates) == 6 and len(search.evaluations) == search.runs_used
    # A study that measured its grid has none.
    plain = sandbox / "plain.yaml"
    plain.write_text(yaml.read_text().replace("name: pysearch", "name: pyplain")
                     .split("search:")[0] + "study_execution: {n_cycles: 1}\n")
    assert llem.run_study(plain, progress=False).search is None


NO_TQDM = textwrap.dedent(
    """
    import sys
    sys.modules["tqdm"] = None  # as on a machine without tqdm
    import llem
    llem.run_study(sys.argv[1], progress=True)
    """
)


def test_progress_without_tqdm_is_lines_in_words(sandbox):
    yaml = sandbox / "lines.yaml"
    yaml.write_text(
        "name: lines\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 2, synthetic: {input_tokens: 8, output_tokens: 4}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
        "sweep: {llamacpp.batch_size: [1, 2]}\n"
        "study_execution: {n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n"
    )
    done = subprocess.run([sys.executable, "-c", NO_TQDM, str(yaml)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [l for l in done.stderr.splitlines() if l.startswith("llem: ")]
    # No bare counts such as "(5)": every number says what it counts.
    import re
    assert not [l for l in lines if re.search(r"\(\d+\)$", l)], lines
    assert "llem: study: 2 cells" in lines, lines
    assert any(re.fullmatch(r"llem: study: 1 of 2 cells done \(completed\)", l) for l in lines), lines
    assert any(l.startswith("llem: study: 2 of 2 cells done") for l in lines), lines
    assert any(l.startswith("llem: measure done") for l in lines), lines


def interrupt_when_measuring(command):
    """Starts `command`, sends SIGINT half a second after it prints MEASURING, and checks it
    then printed only KEYBOARDINTERRUPT and exited 130; returns how long it took to stop."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("MEASURING"):
            break
    assert lines[-1:] == ["MEASURING"], lines
    time.sleep(0.5)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    rest = child.stdout.read().split()
    code = child.wait(timeout=120)
    assert rest == ["KEYBOARDINTERRUPT"] and code == 130, (rest, code)
    return time.monotonic() - sent


CTRL_C = textwrap.dedent(
    """
    import sys, llem
    def on_event(e):
        if e.get("type") == "phase" and e.get("phase") == "measure":
            print("MEASURING", flush=True)
    try:
        llem.run_experiment(
            name="long", model="SmolLM2-135M-Instruct.Q4_1.gguf", output_dir=sys.argv[1],
            dataset={"source": "synthetic", "n_prompts": 50,
                     "synthetic": {"input_tokens": 32, "output_tokens": 200}},
            warmup={"enabled": False}, baseline={"enabled": False}, progress=on_event)
    except KeyboardInterrupt:
        print("KEYBOARDINTERRUPT", flush=True)
        sys.exit(130)
    print("FINISHED", flush=True)
    """
)


def test_ctrl_c_raises_keyboard_interrupt_and_leaves_nothing_half_written(sandbox):
    out = sandbox / "results"
    took = interrupt_when_measuring([sys.executable, "-c", CTRL_C, str(out)])
    # The engine stopped at its next step (200-token replies would take far longer).
    assert took < 10, took
    left = list(out.rglob("*")) if out.exists() else []
    assert left == [], left


def test_the_gil_is_released_while_measuring(sandbox):
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    t = threading.Thread(target=tick)
    t.start()
    try:
        llem.run_experiment(dict(TINY, name="gil", output_dir="results"), progress=False)
    finally:
        stop.set()
        t.join()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    # A thread held off by the GIL would see one gap as long as the whole run.
    assert len(ticks) > 20 and max(gaps) < 0.5, max(gaps)


def test_the_llem_script_is_the_cli(sandbox):
    exe = Path(sys.executable).parent / "llem"
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and llem.__version__ in out.stdout, out


CTRL_C_STUDY = textwrap.dedent(
    """
    import sys, llem
    def on_event(e):
        if e.get("event") == "cell" and e["message"].get("phase") == "measure":
            print("MEASURING", flush=True)
    try:
        llem.run_study(sys.argv[1], progress=on_event)
    except KeyboardInterrupt:
        print("KEYBOARDINTERRUPT", flush=True)
        sys.exit(130)
    print("FINISHED", flush=True)
    """
)


def test_ctrl_c_stops_a_study_and_checkpoints_its_manifest(sandbox):
    yaml = sandbox / "long.yaml"
    yaml.write_text(
        "name: longstudy\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\noutput_dir: results\n"
        "dataset: {source: synthetic, n_prompts: 50, synthetic: {input_tokens: 32, output_tokens: 200}}\n"
        "warmup: {enabled: false}\nbaseline: {enabled: false}\n"
        "sweep: {llamacpp.batch_size: [1, 2]}\n"
        "study_execution: {n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n"
    )
    interrupt_when_measuring([sys.executable, "-c", CTRL_C_STUDY, str(yaml)])
    (study,) = (sandbox / "results").iterdir()
    manifest = json.loads((study / "manifest.json").read_text())
    assert manifest["status"] == "interrupted", manifest["status"]
    assert [e["status"] for e in manifest["experiments"]][:1] == ["interrupted"]
    # No cell left a result behind, and no cell process outlived the study.
    assert not list(study.rglob("result.json"))
    ps = subprocess.run(["pgrep", "-af", "llem __cell"], capture_output=True, text=True)
    assert str(study) not in ps.stdout
