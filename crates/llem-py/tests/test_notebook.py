"""In a real Jupyter kernel (ipykernel, driven over its ZeroMQ protocol as a notebook front end
drives it): the progress bar is the tqdm widget, and the kernel's interrupt (the notebook's
stop button) stops a run with `KeyboardInterrupt`, removes its partial files and leaves the
kernel usable."""

import time

import pytest
from jupyter_client.manager import start_new_kernel

from conftest import TINY

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def kernel(sandbox):
    # The kernel inherits this process's environment: the sandbox's HOME, sensor roots and
    # asset cache, and the interpreter (with the installed wheel) as the native kernel.
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(sandbox))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc, code, timeout=300.0, on_message=None):
    """Runs `code` in the kernel; every iopub message of it, until the kernel is idle again."""
    msg_id = kc.execute(code)
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"the cell did not finish in {timeout} s: {seen}"
        msg = kc.get_iopub_msg(timeout=left)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(msg)
        if on_message is not None:
            on_message(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen


def stdout(msgs):
    return "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def errors(msgs):
    return [m["content"] for m in msgs if m["msg_type"] == "error"]


def test_progress_in_a_notebook_is_the_tqdm_widget(kernel):
    _, kc = kernel
    cfg = dict(TINY, name="nb", output_dir="results")
    msgs = execute(kc, f"import llem\nr = llem.run_experiment({cfg!r})\nprint('TOKENS', r.total_output_tokens)")
    assert errors(msgs) == [], errors(msgs)
    assert "TOKENS 32" in stdout(msgs)
    # tqdm.auto chose the notebook bar: widgets were displayed, one per phase.
    widgets = [m for m in msgs if m["msg_type"] == "display_data" and WIDGET in m["content"]["data"]]
    assert len(widgets) >= 2, [m["msg_type"] for m in msgs]


def test_the_stop_button_interrupts_a_run_and_the_kernel_lives_on(kernel, sandbox):
    km, kc = kernel
    out = sandbox / "stopped"
    long = dict(TINY, name="long", output_dir=str(out),
                dataset={"source": "synthetic", "n_prompts": 50,
                         "synthetic": {"input_tokens": 32, "output_tokens": 200}})
    code = (
        "import llem\n"
        "def on_event(e):\n"
        "    if e.get('type') == 'phase' and e.get('phase') == 'measure':\n"
        "        print('MEASURING', flush=True)\n"
        f"llem.run_experiment({long!r}, progress=on_event)\n"
    )
    state = {"interrupted_at": None}

    def interrupt_when_measuring(msg):
        if (state["interrupted_at"] is None and msg["msg_type"] == "stream"
                and "MEASURING" in msg["content"]["text"]):
            state["interrupted_at"] = time.monotonic()
            km.interrupt_kernel()

    msgs = execute(kc, code, on_message=interrupt_when_measuring)
    assert state["interrupted_at"] is not None, "the run never reached its measurement"
    took = time.monotonic() - state["interrupted_at"]
    # 50 replies of 200 tokens take minutes; the engine stopped at its next step.
    assert took < 15, took
    errs = errors(msgs)
    assert [e["ename"] for e in errs] == ["KeyboardInterrupt"], errs
    left = list(out.rglob("*")) if out.exists() else []
    assert left == [], left
    # The same kernel runs the next cell, a whole measurement included.
    cfg = dict(TINY, name="after", output_dir="results")
    msgs = execute(kc, f"r = llem.run_experiment({cfg!r}, progress=False)\nprint('TOKENS', r.total_output_tokens)")
    assert errors(msgs) == [] and "TOKENS 32" in stdout(msgs), msgs


def doc_cells():
    """The code cells of docs/python.md's "A notebook session", in order."""
    from conftest import REPO

    text = (REPO / "docs" / "python.md").read_text()
    section = text.split("## A notebook session", 1)[1].split("\n## ", 1)[0]
    return [block.split("```", 1)[0] for block in section.split("```python\n")[1:]]


def test_the_notebook_session_in_the_docs_runs_as_written(kernel):
    _, kc = kernel
    cells = doc_cells()
    assert len(cells) >= 6, cells
    shown = []
    for code in cells:
        msgs = execute(kc, code, timeout=600)
        assert errors(msgs) == [], (code, errors(msgs))
        shown += [m["content"]["data"] for m in msgs if m["msg_type"] == "execute_result"]
    html = [d["text/html"] for d in shown if "text/html" in d]
    # The result, the study and the runs each render as a table; the frame as pandas does.
    assert any("energy per output token" in h and "<table>" in h for h in html), html
    assert any(h.startswith("<div><b>StudyResult(") for h in html), html
    assert any("LLMRuns(4 runs)" in h for h in html), html
    assert any("mj_per_tok_total" in h for h in html), html
    text = stdout(execute(kc, "print(r)"))
    assert text.startswith("ExperimentResult('SmolLM2-135M-Instruct.Q4_1.gguf' on llamacpp, ")
