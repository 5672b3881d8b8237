"""What llenergymeasure 0.7.0 itself makes of every YAML example it ships (its configs/ study
files and the ```yaml blocks of its docs/), for llem's test of the 0.7 dialect
(crates/llem-config/tests/llem07_files.rs). A block without `serving_mode` is a fragment: it is
planned merged onto a minimal 0.7 experiment (serving_mode offline, or server with engine vllm
when the fragment has a server: section; task.model gpt2), exactly as the test does.

usage: python llem07_plans.py SDIST_DIR OUT_JSON   (run by scripts/llem07-plans.sh)
"""
import glob, json, os, re, subprocess, sys, tempfile

import yaml

root, out = sys.argv[1], sys.argv[2]
llem = os.environ["LLEM07"].split()


def merge(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        r = dict(a)
        for k, v in b.items():
            r[k] = merge(a[k], v) if k in a else v
        return r
    return b


items = []
for f in sorted(glob.glob(root + "/configs/**/*.yaml", recursive=True)):
    items.append((os.path.relpath(f, root), open(f).read()))
for f in sorted(glob.glob(root + "/docs/**/*.md", recursive=True)):
    if not os.path.isfile(f):  # the sdist holds a dangling symlink (docs/changelog.md)
        continue
    text = open(f).read()
    for m in re.finditer(r"```yaml\n(.*?)```", text, re.S):
        line = text[: m.start()].count("\n") + 1
        items.append((f"{os.path.relpath(f, root)}:{line}", m.group(1)))

res = {}
work = tempfile.mkdtemp()
for name, text in items:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        res[name] = {"kind": "not-yaml"}
        continue
    if not isinstance(doc, dict):
        res[name] = {"kind": "not-a-mapping"}
        continue
    kind = "file"
    if "serving_mode" not in doc:
        kind = "fragment"
        skel = {"serving_mode": "server" if "server" in doc else "offline", "task": {"model": "gpt2"}}
        if "server" in doc:
            skel["engine"] = "vllm"
        text = yaml.safe_dump(merge(skel, doc), sort_keys=False)
    path = os.path.join(work, "x.yaml")
    open(path, "w").write(text)
    r = subprocess.run(llem + ["run", path, "--dry-run"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, COLUMNS="200"))
    o = r.stdout + r.stderr
    m = re.search(r"(\d+) unique configs total", o) or re.search(r"Experiments\s+(\d+) configs", o)
    n = int(m.group(1)) if m else (1 if r.returncode == 0 else None)
    res[name] = {"kind": kind, "planned": r.returncode == 0, "configurations": n}
json.dump(res, open(out, "w"), indent=1, sort_keys=True)
print(f"{len(res)} examples, {sum(v.get('planned', False) for v in res.values())} planned by llem 0.7")
