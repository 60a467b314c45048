"""``mfu-sweep steps``: a real model's steps on the CPU, each run a real fresh process (no fake device).

One tiny decoder (hidden 64, 2 layers) keeps the eager tests at a few seconds of torch start-up each; the
compile tests pay inductor's real cold compile (tens of seconds on a loaded 2-core machine), so there are few.
Timings are never asserted: what is checked is what the file says and that it says it consistently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.records.results import ResultError, load_sweeps
from mfu_sweep.records.step_files import load_step_file, steady_of

TINY = "llm:llama-3-8b:hidden=64:ffn=128:layers=2:heads=4:kv_heads=2:vocab=256:seq=32:tokens=64"
FAST = ["--device", "cpu", "--steps", "4", "--warmup", "1", "--profile-steps", "1", "--quiet"]

PY_MODEL = '''
import os
import time

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x, scale=1.0):
        if os.path.exists(os.environ.get("STEPS_TEST_HANG", "/nonexistent")):
            time.sleep(600)
        return {"y": self.b(torch.relu(self.a(x))) * scale}


def make():
    return Net(), {"x": torch.randn(16, 32), "scale": 2.0}


def broken():
    raise ValueError("no such checkpoint: weights.pt")


def crash_compile():
    import torch._inductor.config as config

    config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
    return Net(), (torch.randn(16, 32),)
'''


def steps_cli(*args: str) -> object:
    return CliRunner().invoke(main, ["steps", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def eager_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("steps") / "eager.json"
    res = steps_cli(*FAST, "--model", TINY, "--mode", "eager", "--repeats", "2", "--threads", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    return out


def test_eager_training_steps_make_a_valid_step_file(eager_file: Path) -> None:
    from mfu_sweep.measure.steps.models import build
    from mfu_sweep.measure.steps.spec import parse_model_spec

    data = json.loads(eager_file.read_text())
    assert data["schema_version"] == 1 and data["kind"] == "steps" and data["step_kind"] == "train"
    assert data["dtype"] == "fp32" and data["label"] == data["device"]["label"]
    assert data["device"]["threads"] == 1 and data["settings"]["threads"] == 1
    assert data["provenance"]["finished_at"] and data["provenance"]["argv"][:2] == ["mfu-sweep", "steps"]
    model = data["model"]
    assert model["spec"] == TINY and model["source"] == "llm"
    assert model["params"] == build(parse_model_spec(TINY), "train").params
    assert ":attn=sdpa" in model["gemm_family"]
    runs = data["runs"]
    assert [(r["mode"], r["cache"], r["compile_mode"], r["repeat"]) for r in runs] == [
        ("eager", None, None, 0), ("eager", None, None, 1)]
    for r in runs:
        assert r["status"] == "ok" and r["error"] is None and len(r["steps_s"]) == 4
        assert r["first_step_s"] == r["steps_s"][0] and r["steady_step_s"] == steady_of(r["steps_s"], 1)
        assert r["warmup_steps"] == 1 and r["timeout_s"] == 600.0
        assert r["compile"] == {} and r["graphs"] is None
        assert r["peak_memory_bytes"] > 10 * 2**20 and r["peak_memory_source"].startswith("ru_maxrss")
        assert 0 < r["gemm_share"] <= 1.5 and r["profiled_steps"] == 1
        assert r["contended"] == ("contended" in r["flags"]) and "other_share" in r["machine"]
    res = CliRunner().invoke(main, ["validate", str(eager_file)])
    assert res.exit_code == 0 and "2 runs: 2 ok, 0 timeout, 0 oom, 0 error" in res.output, res.output


def test_readers_of_sweeps_refuse_a_step_file_in_one_line(eager_file: Path) -> None:
    with pytest.raises(ResultError, match="a step file"):
        load_sweeps([eager_file])
    res = CliRunner().invoke(main, ["fit", str(eager_file)])
    assert res.exit_code == 1 and "a step file" in res.output and len(res.output.strip().splitlines()) == 1


def test_validate_checks_what_a_step_file_means(eager_file: Path, tmp_path: Path) -> None:
    data = json.loads(eager_file.read_text())
    data["runs"][1]["steady_step_s"] *= 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["validate", str(bad)])
    assert res.exit_code == 1 and "runs/1/steady_step_s" in res.output and "median" in res.output
    data = json.loads(eager_file.read_text())
    data["runs"][0]["status"] = "finished"
    bad.write_text(json.dumps(data))
    assert "runs/0/status" in CliRunner().invoke(main, ["validate", str(bad)]).output
    with pytest.raises(ResultError, match="runs/0/status"):
        load_step_file(bad)


def test_inference_steps(tmp_path: Path) -> None:
    out = tmp_path / "infer.json"
    res = steps_cli(*FAST, "--model", TINY, "--kind", "infer", "--mode", "eager", "--repeats", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    (run,) = steps.runs
    assert steps.step_kind == "infer" and run.ok and run.gemm_share is not None


@pytest.mark.slow
def test_compile_cold_misses_and_warm_hits_the_cache(tmp_path: Path) -> None:
    out = tmp_path / "compile.json"
    res = steps_cli("--device", "cpu", "--model", TINY, "--mode", "compile", "--cache", "cold", "--cache", "warm",
                    "--repeats", "1", "--steps", "3", "--warmup", "1", "--profile-steps", "1", "--quiet",
                    "-o", str(out))
    assert res.exit_code == 0, res.output
    cold, warm = load_step_file(out).runs
    assert (cold.cache, warm.cache) == ("cold", "warm") and cold.ok and warm.ok
    assert cold.compile_mode == warm.compile_mode == "default"
    # the caches are what the names say: the cold run compiled every graph, the warm one found them all
    assert cold.compile["cache_misses"] >= 1 and cold.compile["cache_hits"] == 0
    assert warm.compile["cache_hits"] >= 1 and warm.compile["cache_misses"] == 0
    assert warm.extra["primed_by"] == "cold run, repeat 0"
    for run in (cold, warm):
        assert run.graphs >= 1 and run.graph_breaks == 0 and run.recompiles == 0
        assert run.compile["dynamo_s"] > 0 and run.compile["backend_s"] > 0
    assert "compile cold: first step" in res.output and "compile warm: first step" in res.output


def test_a_first_step_past_the_timeout_did_not_compile(tmp_path: Path) -> None:
    out = tmp_path / "timeout.json"
    res = steps_cli("--device", "cpu", "--model", TINY, "--mode", "compile", "--repeats", "1", "--steps", "3",
                    "--warmup", "0", "--timeout", "1", "--quiet", "-o", str(out))
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    cold, warm = steps.runs
    assert cold.status == "timeout" and cold.error == "did not compile within 1 s (step 1 did not finish)"
    assert cold.steps_s == () and cold.first_step_s is None and cold.steady_step_s is None
    # nothing primed the warm cache: its priming run timed out too, and the warm run says so
    (priming,) = steps.extra["priming"]
    assert priming["status"] == "timeout"
    assert warm.status == "error" and warm.error.startswith("no warm cache: the run that was to prime it ended timeout")
    assert "1 ok" not in res.output and "0 ok, 1 timeout, 0 oom, 1 error" in res.output
    assert "did not compile within 1 s (step 1 did not finish): 1 of 1" in res.output


def test_out_of_memory_is_recorded_as_oom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a real failed allocation: the run process may grow by 64 MiB, the model's embedding alone needs 128 MiB
    monkeypatch.setenv("MFU_SWEEP_STEPS_MEMORY_LIMIT_BYTES", str(64 * 2**20))
    out = tmp_path / "oom.json"
    big = "llm:llama-3-8b:hidden=512:ffn=512:layers=1:heads=8:kv_heads=8:vocab=65536:seq=16:tokens=16"
    res = steps_cli(*FAST, "--model", big, "--mode", "eager", "--repeats", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    (run,) = load_step_file(out).runs
    assert run.status == "oom" and "allocate" in run.error and run.steps_s == ()
    assert "0 ok, 0 timeout, 1 oom, 0 error" in res.output


@pytest.mark.slow
def test_a_compile_that_crashes_is_an_error_with_its_class(tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text(PY_MODEL)
    out = tmp_path / "crash.json"
    res = steps_cli("--device", "cpu", "--model", f"py:{model}:crash_compile", "--mode", "eager", "--mode",
                    "compile", "--cache", "cold", "--repeats", "1", "--steps", "2", "--warmup", "0", "--quiet",
                    "-o", str(out))
    assert res.exit_code == 0, res.output
    eager, crashed = load_step_file(out).runs
    assert eager.ok
    assert crashed.status == "error" and crashed.error.split(":")[0] in ("BackendCompilerFailed", "CppCompileError",
                                                                        "InductorError"), crashed.error
    assert crashed.steps_s == () and crashed.extra["stderr_tail"]


def test_py_models_run_with_a_dict_batch_and_the_sum_as_loss(tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text(PY_MODEL)
    out = tmp_path / "py.json"
    res = steps_cli(*FAST, "--model", f"py:{model}:make", "--mode", "eager", "--repeats", "1", "-o", str(out))
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    assert steps.model.source == "py" and steps.model.gemm_family is None
    assert steps.model.params == 32 * 64 + 64 + 64 * 8 + 8 and steps.runs[0].ok


def test_a_py_function_that_raises_is_its_own_error_line_and_nothing_is_written(tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text(PY_MODEL)
    out = tmp_path / "never.json"
    res = CliRunner().invoke(main, ["steps", *FAST, "--model", f"py:{model}:broken", "-o", str(out)])
    assert res.exit_code == 1 and not out.exists()
    lines = [line for line in res.output.strip().splitlines() if not line.startswith("note: ")]  # the cache note
    assert lines == ["Error: net.py:broken() raised ValueError: no such checkpoint: weights.pt"]


def test_hf_models_build_from_a_local_config(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="the hf extra (transformers) is in the test extras")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                  "vocab_size": 256, "max_position_embeddings": 64}))
    out = tmp_path / "hf.json"
    res = steps_cli(*FAST, "--model", f"hf:{config}:tokens=64:seq=32", "--mode", "eager", "--repeats", "1",
                    "-o", str(out))
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    assert steps.model.source == "hf" and steps.model.params > 64 * 256 and steps.runs[0].ok
    # a model id whose config is not in the local cache: one line, nothing downloaded, nothing written
    res = CliRunner().invoke(main, ["steps", *FAST, "--model", "hf:nobody/no-such-model-xyz",
                                    "-o", str(tmp_path / "x.json")], env={"HF_HOME": str(tmp_path / "hf")})
    assert res.exit_code == 1 and "local Hugging Face cache" in res.output and not (tmp_path / "x.json").exists()


def test_hf_without_transformers_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))
    res = CliRunner().invoke(main, ["steps", *FAST, "--model", "hf:org/model", "-o", str(tmp_path / "x.json")])
    assert res.exit_code == 1 and "mfu-sweep[hf]" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("args", "fragment"), [
    (["--model", "gguf:x"], "start with one of llm:, hf:, py:"),
    (["--model", "llm:llama-4"], "unknown model 'llama-4'"),
    (["--model", "llm:llama-3-8b:layerz=2"], "unknown option 'layerz=2'"),
    (["--model", "llm:llama-3-8b:heads=8:kv_heads=3"], "kv_heads=3 does not divide heads=8"),
    (["--model", "llm:gpt-oss-20b:layers=1"], "mixture-of-experts"),
    (["--model", "llm:llama-3-8b:tp=2"], "option tp=2"),
    (["--model", "py:nowhere.py:make"], "no such file 'nowhere.py'"),
    (["--model", "py:model.txt:make"], "is not a .py file"),
    (["--model", TINY, "--mode", "lazy"], "'lazy' does not run on cpu"),
    (["--model", TINY, "--steps", "2", "--warmup", "1"], "leaves no steady step"),
    (["--model", TINY, "--resume"], "no such file"),
    (["--model", TINY, "--dtype", "fp8"], "'fp8' is not one of"),
    (["--model", TINY, "--timeout", "0"], "must be a positive number"),
    ([], "give --model"),
])
def test_bad_input_is_one_line(args: list[str], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "bad.json"
    res = CliRunner().invoke(main, ["steps", "--device", "cpu", *args, "-o", str(out)])
    assert res.exit_code in (1, 2) and fragment in res.output, res.output
    assert "Traceback" not in res.output and not out.exists()


def test_an_existing_file_needs_resume_or_force(eager_file: Path) -> None:
    res = CliRunner().invoke(main, ["steps", *FAST, "--model", TINY, "-o", str(eager_file)])
    assert res.exit_code == 1 and "--resume" in res.output and "--force" in res.output


def test_ctrl_c_keeps_finished_runs_and_resume_goes_on(tmp_path: Path) -> None:
    model = tmp_path / "net.py"
    model.write_text(PY_MODEL)
    hang = tmp_path / "hang"
    out = tmp_path / "r.json"
    args = ["steps", *FAST, "--model", f"py:{model}:make", "--mode", "eager", "--repeats", "3", "-o", str(out)]
    env = {**os.environ, "STEPS_TEST_HANG": str(hang)}
    # a shell that starts the suite in the background ignores SIGINT for its children: give it the default
    proc = subprocess.Popen([sys.executable, "-m", "mfu_sweep", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and not (out.exists() and json.loads(out.read_text())["runs"]):
        time.sleep(0.1)
    hang.touch()  # the next run's first step now sleeps for 600 s
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume" in err and str(out) in err
    data = json.loads(out.read_text())
    assert data["provenance"]["finished_at"] is None and len(data["runs"]) in (1, 2)
    assert all(r["status"] == "ok" for r in data["runs"])
    hang.unlink()
    res = CliRunner().invoke(main, ["steps", "--resume", "--quiet", "-o", str(out)], env={"STEPS_TEST_HANG": str(hang)})
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    assert [r.repeat for r in steps.runs] == [0, 1, 2] and all(r.ok for r in steps.runs)
    assert steps.provenance["finished_at"] and len(steps.provenance["resumed_at"]) == 1


def test_runs_interleave_by_repeat_cold_before_warm(tmp_path: Path) -> None:
    from mfu_sweep.measure.steps.loop import CacheDirs, StepPlan, plan_slots

    plan = StepPlan(device="cpu", model=TINY, output=tmp_path / "x.json", modes=("compile", "eager"),
                    caches=("warm", "cold"), repeats=2, compile_mode="max-autotune")
    assert [s.key for s in plan_slots(plan)] == [
        ("compile", "max-autotune", "cold", 0), ("compile", "max-autotune", "warm", 0), ("eager", None, None, 0),
        ("compile", "max-autotune", "cold", 1), ("compile", "max-autotune", "warm", 1), ("eager", None, None, 1)]
    caches = CacheDirs()
    try:
        primed = caches.fresh()
        (primed / "fxgraph").mkdir()
        (primed / "fxgraph" / "entry").write_text("compiled")
        caches.prime(("compile", "default"), primed, "cold run, repeat 0")
        caches.prime(("compile", "default"), caches.fresh(), "a later cold run")  # the first one primes
        one, by = caches.warm(("compile", "default"))
        two, _ = caches.warm(("compile", "default"))
        assert by == "cold run, repeat 0" and one != two != primed
        assert (one / "fxgraph" / "entry").read_text() == (two / "fxgraph" / "entry").read_text() == "compiled"
        root = caches.root
    finally:
        caches.cleanup()
    assert not root.exists()
