"""Is `mfu-sweep steps` right, and is it cheaper than a GEMM sweep? (issue 45's measured goal)

Accuracy: for each model (about 20M and 100M parameters, Hugging Face LlamaForCausalLM from a config, random
weights) and each step kind (train, infer), R rounds, each round one tool run per series (eager, compile cold,
compile warm: `mfu-sweep steps --model hf:CONFIG --repeats 1`) and the same three runs by an independent
timer (the tool first in even rounds, the independent side first in odd ones): this script's own worker
(`--worker`), plain torch and transformers in a fresh process, `time.perf_counter` around each step, its
own private inductor cache (cold: empty; warm: primed by its cold run of the round). The independent side
imports nothing of mfu_sweep. Per series it reports the tool's and the independent first step and steady
step (medians over the rounds), their ratio against the goals (first within 20%, steady within 10%), and how
many of the independent runs fall inside the tool's 95% interval from its R runs (a t interval of the mean
of log times; goal: at least 2 of 3).

Cost: the tool's measurement of the 20M model (train; eager and compile, cold and warm, 3 runs) against a
cold GEMM sweep of the same GEMMs (`sweep --shapes <its llm: family> --mode eager --mode compile
--cold-compile --repeats 3`), run side by side: goal, steps at most 1/3 of the sweep's wall time.

    python benchmarks/steps_accuracy.py --out out/steps-accuracy            # the whole benchmark (quiet machine)
    python benchmarks/steps_accuracy.py --smoke --out /tmp/steps-smoke      # a tiny model, 2 rounds, no cost part

Every number is measured in this run; nothing is written outside --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = {
    # the model: 21M parameters
    "20m": {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 4, "vocab_size": 8192},
    # about 100M parameters
    "100m": {"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
             "num_key_value_heads": 4, "vocab_size": 16384},
    # the smoke test's
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 256},
}
SEQ = 128
SERIES = (("eager", None), ("compile", "cold"), ("compile", "warm"))
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


# --------------------------------------------------------------------------- the independent worker


def worker(config_path: str, kind: str, mode: str, steps: int) -> None:
    """One fresh-process run: plain torch + transformers, perf_counter around every step; JSON on stdout."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = json.loads(Path(config_path).read_text())
    config = AutoConfig.for_model(data.pop("model_type"), **data)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    ids = torch.randint(config.vocab_size, (1, SEQ), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "labels": ids} if kind == "train" else {"input_ids": ids}
    run = torch.compile(model) if mode == "compile" else model
    if kind == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def step() -> object:
            opt.zero_grad(set_to_none=True)
            loss = run(**batch).loss
            loss.backward()
            opt.step()
            return loss
    else:
        model.eval()

        def step() -> object:
            with torch.inference_mode() if mode == "eager" else torch.no_grad():
                return run(**batch)

    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        out = step()
        times.append(time.perf_counter() - t0)
        del out
    print(json.dumps({"steps_s": times}))


def independent(config: Path, kind: str, mode: str, steps: int, cache: Path) -> list[float]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "TRITON_CACHE_DIR": str(cache / "triton")}
    out = subprocess.run([sys.executable, __file__, "--worker", str(config), kind, mode, str(steps)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["steps_s"]


# --------------------------------------------------------------------------- the tool


def tool(config: Path, kind: str, steps: int, warmup: int, out: Path) -> dict[str, dict]:
    """One tool invocation: eager, compile cold, compile warm (the cold run primes the warm cache); its runs."""
    args = [sys.executable, "-m", "mfu_sweep", "steps", "--device", "cpu", "--model", f"hf:{config}:tokens={SEQ}",
            "--kind", kind, "--mode", "eager", "--mode", "compile", "--cache", "cold", "--cache", "warm",
            "--repeats", "1", "--steps", str(steps), "--warmup", str(warmup), "--profile-steps", "0", "--quiet",
            "-o", str(out), "--force"]
    subprocess.run(args, check=True, capture_output=True, text=True)
    return {" ".join(filter(None, (r["mode"], r["cache"]))): r for r in json.loads(out.read_text())["runs"]}


def steady(steps_s: list[float], warmup: int) -> float:
    return statistics.median(steps_s[1 + warmup:])


def t_interval(values: list[float]) -> tuple[float, float]:
    """95% t interval of the mean of log values, back on the time scale."""
    logs = [math.log(v) for v in values]
    if len(logs) < 2:
        return values[0], values[0]
    mean, sd = statistics.mean(logs), statistics.stdev(logs)
    half = T975[len(logs) - 1] * sd / math.sqrt(len(logs))
    return math.exp(mean - half), math.exp(mean + half)


def _round(config: Path, kind: str, steps: int, warmup: int, work: Path, r: int) -> dict:
    """One round: the tool's three series and the independent runs of the same three, the tool first in even
    rounds and last in odd ones (ABBA: neither side always runs first, after the other's compile)."""
    if r % 2:
        mine = _independent_round(config, kind, steps, work)
        runs = tool(config, kind, steps, warmup, work / f"tool-{config.stem}-{kind}-{r}.json")
    else:
        runs = tool(config, kind, steps, warmup, work / f"tool-{config.stem}-{kind}-{r}.json")
        mine = _independent_round(config, kind, steps, work)
    return {name: {"tool": runs[name]["steps_s"], "tool_status": runs[name]["status"], "indep": mine[name]}
            for name in mine}


def _independent_round(config: Path, kind: str, steps: int, work: Path) -> dict[str, list[float]]:
    """The independent side's three series: eager, compile with an empty cache, compile with the cache that cold
    run primed."""
    got: dict[str, list[float]] = {}
    primed = None
    for series in SERIES:
        name = " ".join(filter(None, series))
        cache = Path(tempfile.mkdtemp(dir=work, prefix="indep-"))
        if series[1] == "warm" and primed is not None:
            shutil.rmtree(cache)
            shutil.copytree(primed, cache)
        got[name] = independent(config, kind, series[0], steps, cache)
        if series[1] == "cold":
            primed = cache
    return got


def accuracy(models: list[str], rounds: int, steps: int, warmup: int, work: Path) -> list[dict]:
    rows = []
    for key in models:
        config = work / f"{key}.json"
        config.write_text(json.dumps({"model_type": "llama", "max_position_embeddings": SEQ, **MODELS[key]}))
        for kind in ("train", "infer"):
            per_round = [_round(config, kind, steps, warmup, work, r) for r in range(rounds)]
            for series in per_round[0]:
                tool_runs = [pr[series]["tool"] for pr in per_round if pr[series]["tool_status"] == "ok"]
                indep_runs = [pr[series]["indep"] for pr in per_round]
                for metric, pick in (("first", lambda s: s[0]), ("steady", lambda s: steady(s, warmup))):
                    t_vals, i_vals = [pick(s) for s in tool_runs], [pick(s) for s in indep_runs]
                    lo, hi = t_interval(t_vals)
                    ratio = statistics.median(t_vals) / statistics.median(i_vals)
                    goal = 0.20 if metric == "first" else 0.10
                    rows.append({"model": key, "kind": kind, "series": series, "metric": metric,
                                 "tool_s": statistics.median(t_vals), "indep_s": statistics.median(i_vals),
                                 "ratio": ratio, "within_goal": abs(ratio - 1) <= goal,
                                 "interval": [lo, hi], "inside": sum(lo <= v <= hi for v in i_vals),
                                 "indep_runs": len(i_vals), "tool_runs": len(t_vals)})
                    print(_row(rows[-1]), flush=True)
    return rows


def _row(row: dict) -> str:
    return (f"{row['model']:>5} {row['kind']:<5} {row['series']:<13} {row['metric']:<6} tool {row['tool_s']:9.4g} s  "
            f"indep {row['indep_s']:9.4g} s  x{row['ratio']:.3f} {'ok' if row['within_goal'] else 'MISS'}  "
            f"95% [{row['interval'][0]:.4g}, {row['interval'][1]:.4g}] holds {row['inside']}/{row['indep_runs']}")


# --------------------------------------------------------------------------- cost against a GEMM sweep


def family(model: dict) -> str:
    """The llm: family of a Llama config's step (separate q/k/v and gate/up projections, SDPA attention)."""
    return (f"llm:llama-3-8b:hidden={model['hidden_size']}:ffn={model['intermediate_size']}:"
            f"layers={model['num_hidden_layers']}:heads={model['num_attention_heads']}:"
            f"kv_heads={model['num_key_value_heads']}:vocab={model['vocab_size']}:seq={SEQ}:tokens={SEQ}:"
            "qkv=split:attn=sdpa")


def cost(work: Path, steps: int) -> dict:
    config = work / "20m.json"
    config.write_text(json.dumps({"model_type": "llama", "max_position_embeddings": SEQ, **MODELS["20m"]}))
    steps_cmd = [sys.executable, "-m", "mfu_sweep", "steps", "--device", "cpu", "--model", f"hf:{config}:tokens={SEQ}",
                 "--mode", "eager", "--mode", "compile", "--cache", "cold", "--cache", "warm", "--repeats", "3",
                 "--steps", str(steps), "--quiet", "-o", str(work / "cost-steps.json"), "--force"]
    sweep_cmd = [sys.executable, "-m", "mfu_sweep", "sweep", "--device", "cpu", "--dtype", "fp32",
                 "--shapes", family(MODELS["20m"]), "--mode", "eager", "--mode", "compile", "--cold-compile",
                 "--repeats", "3", "--quiet", "-o", str(work / "cost-sweep.json"), "--force"]
    out = {}
    for name, cmd in (("steps", steps_cmd), ("sweep", sweep_cmd)):
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        out[f"{name}_s"] = time.monotonic() - t0
        print(f"cost: {name} took {out[f'{name}_s']:.1f} s", flush=True)
    out["ratio"] = out["steps_s"] / out["sweep_s"]
    print(f"cost: steps / cold GEMM sweep = {out['ratio']:.3f} (goal <= 0.333: "
          f"{'met' if out['ratio'] <= 1 / 3 else 'MISSED'})", flush=True)
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the step files, configs and summary.json")
    ap.add_argument("--models", nargs="+", default=["20m", "100m"], choices=sorted(MODELS))
    ap.add_argument("--rounds", type=int, default=3, help="rounds (runs per series on each side)")
    ap.add_argument("--steps", type=int, default=10, help="steps per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-cost", action="store_true", help="skip the cost comparison with a cold GEMM sweep")
    ap.add_argument("--smoke", action="store_true", help="tiny model, 2 rounds, 4 steps, no cost part")
    args = ap.parse_args()
    if args.smoke:
        args.models, args.rounds, args.steps, args.warmup, args.no_cost = ["tiny"], 2, 4, 1, True
    args.out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    print(f"steps_accuracy: models {args.models}, {args.rounds} rounds, {args.steps} steps per run; "
          f"load average at start {load:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows = accuracy(args.models, args.rounds, args.steps, args.warmup, args.out)
    summary = {"rows": rows, "load_at_start": load, "load_at_end": os.getloadavg()[0]}
    if not args.no_cost:
        summary["cost"] = cost(args.out, args.steps)
    missed = [r for r in rows if not r["within_goal"]]
    short = [r for r in rows if r["inside"] < min(2, r["indep_runs"])]
    print(f"accuracy: {len(rows) - len(missed)} of {len(rows)} within their goal; intervals holding >= 2 "
          f"independent runs: {len(rows) - len(short)} of {len(rows)}; load average at end "
          f"{summary['load_at_end']:.2f}", flush=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
