"""serve_post.py - one request to k3 serve for the gates' Python clients
(parallel_check.py, prefix_check.py)."""
import json
import urllib.error
import urllib.request


def post(base, path, body):
    """(status, parsed body) of a whole answer; a stream's events joined."""
    req = urllib.request.Request(base + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            raw = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())
    if not body.get("stream"):
        return status, json.loads(raw)
    events = [json.loads(line[6:]) for line in raw.split("\n")
              if line.startswith("data: ") and line != "data: [DONE]"]
    return status, events
