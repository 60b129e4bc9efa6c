"""``symtriton inspect`` (run as ``python -m compiler inspect`` in a subprocess)."""
import json
import re
import os
import subprocess
import sys

import pytest

from compiler import cli
from compiler import symbol as sym

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
KEYS = ("forward_launches", "backward_launches", "unfused_forward_ops", "unfused_backward_ops",
        "bytes_per_step", "unfused_bytes_per_step")


def run_cli(*args, cache_dir):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT
    env["SYMTRITON_CACHE_DIR"] = str(cache_dir)
    env.pop("SYMTRITON_OFFLINE", None)
    return subprocess.run([sys.executable, "-m", "compiler", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def mlp_json(tmp_path_factory):
    """The 784-512-512-10 MLP with SoftmaxOutput, saved with the Symbol API."""
    x = sym.Variable("data")
    y = sym.FullyConnected(x, num_hidden=512, name="fc1")
    y = sym.Activation(y, act_type="relu", name="relu1")
    y = sym.FullyConnected(y, num_hidden=512, name="fc2")
    y = sym.Activation(y, act_type="relu", name="relu2")
    y = sym.FullyConnected(y, num_hidden=10, name="fc3")
    y = sym.SoftmaxOutput(y, name="softmax")
    path = tmp_path_factory.mktemp("cli") / "mlp-symbol.json"
    y.save(str(path))
    return str(path)


def test_inspect_json_training_mlp(mlp_json, tmp_path):
    r = run_cli("inspect", mlp_json, "--shape", "data=16,784", "--shape", "softmax_label=16",
                "--train", "--json", cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    for k in KEYS:
        assert isinstance(info[k], int), k
    # three matmuls with fused epilogues; data gets no gradient
    assert 1 <= info["forward_launches"] <= 3
    assert 1 <= info["backward_launches"] <= 8
    assert info["unfused_forward_ops"] > info["forward_launches"]
    assert info["unfused_backward_ops"] > info["backward_launches"]
    assert info["unfused_bytes_per_step"] > info["bytes_per_step"] > 0
    groups = info["groups"]
    assert len(groups) == info["forward_launches"] + info["backward_launches"]
    assert [g["index"] for g in groups] == list(range(len(groups)))
    assert {g["phase"] for g in groups} == {"fwd", "bwd"}
    assert all(g["ops"] and {"BM", "BN", "BK", "num_warps", "grid"} <= set(g["config"])
               for g in groups)
    assert "dot" in groups[0]["ops"]
    assert info["kernel"]["index"] == 0 and "@triton.jit" in info["kernel"]["source"]
    assert info["mode"] == "training" and info["target"] == "interpret"


def test_inspect_cpu_target_shows_the_torch_code(mlp_json, tmp_path):
    """The same kernel groups as the Triton targets; the source is the cpu lowering."""
    common = ("inspect", mlp_json, "--shape", "data=16,784", "--shape", "softmax_label=16",
              "--train", "--json")
    cpu = json.loads(run_cli(*common, "--target", "cpu", cache_dir=tmp_path).stdout)
    interp = json.loads(run_cli(*common, cache_dir=tmp_path).stdout)
    assert cpu["target"] == "cpu"
    assert [g["ops"] for g in cpu["groups"]] == [g["ops"] for g in interp["groups"]]
    for k in KEYS:
        assert cpu[k] == interp[k], k
    src = cpu["kernel"]["source"]
    assert "def bind(" in src and "as_strided" in src and "torch.addmm(" in src
    assert "import triton" not in src and "tl." not in src


def test_inspect_text_and_kernel_choice(mlp_json, tmp_path):
    r = run_cli("inspect", mlp_json, "--shape", "data=8,784", "--shape", "softmax_label=8",
                "--train", "--inputs-need-grad", "--kernel", "1", "--target", "cuda:90",
                cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "kernel groups" in out and "forward launches" in out and "backward launches" in out
    assert "bytes per step" in out and "unfused" in out
    assert "kernel 1 (" in out and "def kernel(" in out
    # GPU tile sizes for a cuda target (the interpreter's would span the whole tensor)
    tiles = re.findall(r"BM=(\d+) BN=(\d+) BK=(\d+)", out)
    assert tiles and all(int(m) * int(n) <= 4096 and int(k) <= 32 for m, n, k in tiles)
    assert "target cuda:90" in out


def test_inspect_mxnet_fixture_json(tmp_path):
    """tests/fixtures/mlp-symbol.json was written by mxnet 1.9.1."""
    path = os.path.join(FIXTURES, "mlp-symbol.json")
    r = run_cli("inspect", path, "--shape", "data=4,784", "--json", cache_dir=tmp_path)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["mode"] == "inference" and info["backward_launches"] == 0
    assert info["unfused_backward_ops"] == 0
    assert 1 <= info["forward_launches"] < info["unfused_forward_ops"]
    assert all(g["phase"] == "fwd" for g in info["groups"])


def test_inspect_error_exits_2(tmp_path):
    path = os.path.join(FIXTURES, "mlp-symbol.json")
    r = run_cli("inspect", path, "--shape", "nosuch=4,784", cache_dir=tmp_path)
    assert r.returncode == 2
    assert "nosuch" in r.stderr and "arguments: data" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args, message", [
    (["--shape", "data=4,x"], "dimensions must be integers"),
    (["--shape", "data"], "expected NAME=D1,D2"),
    (["--shape", "data=0,784"], "positive dimensions"),
    (["--shape", "data=4,784", "--shape", "data=4,784"], "given twice"),
    (["--shape", "data=4,784", "--kernel", "99"], "--kernel 99"),
    (["--shape", "data=4,784", "--inputs-need-grad"], "needs --train"),
    (["--shape", "data=4,784", "--target", "cuda:20"], "unsupported target"),
    (["--shape", "data=4,784", "--shape", "softmax_label=5"], "does not match"),  # model rejects
    ([], "--shape"),                              # --shape is required
])
def test_inspect_usage_errors(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    path = os.path.join(FIXTURES, "mlp-symbol.json")
    with pytest.raises(SystemExit) as exc:
        sys.exit(cli.main(["inspect", path, *args]))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("symtriton")
    assert len(err.strip().splitlines()) == 1


def test_inspect_bad_symbol_files(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    bad = tmp_path / "bad-symbol.json"
    bad.write_text('{"nodes": [')
    assert cli.main(["inspect", str(bad), "--shape", "data=1,2"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert cli.main(["inspect", str(tmp_path / "missing.json"), "--shape", "data=1,2"]) == 2
    assert "cannot read symbol file" in capsys.readouterr().err


def test_help_lists_inspect():
    text = cli.build_parser().format_help()
    assert "inspect" in text
    with pytest.raises(SystemExit) as exc:
        cli.main(["inspect", "--help"])
    assert exc.value.code == 0


def test_ops_lists_the_registry(capsys):
    """``symtriton ops``: what the unknown-operator error points to."""
    from compiler.ops.registry import REGISTRY
    assert cli.main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {"FullyConnected", "SoftmaxOutput", "Concat"} <= names
    aliases = {a for r in rows for a in r["aliases"]}
    public = {n for n in REGISTRY if not n.startswith("_backward")}
    assert public == names | aliases
    assert cli.main(["ops", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "SoftmaxOutput" in out and "FullyConnected" not in out
