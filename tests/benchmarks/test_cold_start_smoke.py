"""benchmarks/cold_start.py runs with tiny flags (each figure in its own process, cold
then warm), and its Inception-BN is mxnet's: the CIFAR-size variant it builds is the
symbol mxnet 1.9.1 saved in tests/fixtures/image_symbols."""
import importlib.util
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "cold_start.py")


def test_cold_start_benchmark_quick(tmp_path):
    env = dict(os.environ, SYMTRITON_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, SCRIPT, "--chain", "60", "--image-size", "28",
                          "--classes", "10", "--lstm-buckets", "3,5", "--lstm-batch", "2",
                          "--lstm-hidden", "8", "--lstm-embed", "8", "--lstm-vocab", "30",
                          "--threads", "1", "--busy", "1"],
                         capture_output=True, text=True, env=env, timeout=600, check=True).stdout
    found = dict(re.findall(r"RESULT cold_start side=after figure=(\w+) seconds=([\d.]+)", out))
    assert set(found) == {"chain", "inception_cold", "inception_warm", "lstm"}, out
    assert all(float(v) > 0 for v in found.values())
    assert "busy: 1 spinning process" in out and "threads=1 busy=1" in out
    # the warm run finds every program on disk and compiles nothing
    warm = re.search(r"after inception_warm: .*compiles (\d+), .*disk_hits (\d+)", out)
    assert warm and warm.group(1) == "0" and int(warm.group(2)) >= 1, out
    work = re.search(r"fuse work: (\{.*\})", out)
    assert work and "tile_program_nodes" in work.group(1)


def _names_normalised(doc):
    """Nodes of a symbol JSON with auto names (``fullyconnected3``) made position-free."""
    out = []
    for node in doc["nodes"]:
        name = node["name"]
        for auto in ("fullyconnected", "flatten"):
            if name.startswith(auto):
                name = auto + name[name.index("_"):] if "_" in name else auto
        out.append((node["op"], name, json.dumps(node.get("attrs", {}), sort_keys=True),
                    [tuple(i[:2]) for i in node["inputs"]]))
    return out


def test_inception_bn_is_mxnets():
    import module_api as mx
    spec = importlib.util.spec_from_file_location("cold_start", SCRIPT)
    cold_start = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cold_start)
    ours = json.loads(cold_start.inception_bn(mx, 10, (3, 28, 28)).tojson())
    with open(os.path.join(ROOT, "tests", "fixtures", "image_symbols",
                           "inception-bn-symbol.json")) as f:
        theirs = json.load(f)
    assert _names_normalised(ours) == _names_normalised(theirs)
    assert ours["heads"] == theirs["heads"] and ours["arg_nodes"] == theirs["arg_nodes"]
