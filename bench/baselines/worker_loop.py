"""worker_loop.py - the command loop a peer runner (torch_runner.py, ort_runner.py)
runs once its framework is ready: the commands given on its command line, then,
with --serve, one JSON command per stdin line until {"cmd": "quit"}; one JSON
answer per line on stdout. Standard library only."""
import json
import sys


def run(handle, commands, serve):
    """handle(dict) -> dict with "ok"; returns the process status: 1 when a command-line
    command failed, else 0."""
    bad = 0
    for c in commands:
        r = handle(json.loads(c))
        bad += not r["ok"]
        print(json.dumps(r), flush=True)
    if serve:
        for line in sys.stdin:
            if not line.strip():
                continue
            c = json.loads(line)
            if c.get("cmd") == "quit":
                break
            print(json.dumps(handle(c)), flush=True)
    return 1 if bad else 0
