"""schema_conformance.py - gate 51 (and 52's bigger sweep): JSON Schema
conformance of the grammar engine, judged by an independent validator
(python3-jsonschema, Draft 2020-12, with format checking).

  schema_conformance.py GRAMMAR_CHECK N_SCHEMAS OUTPUTS_PER_SCHEMA SEED [BUDGET]

BUDGET (default 900) is the ids each output may take, end id included: the
end budget must make every output complete within it. With
K3_GRAMMAR_VOCAB=DIR in the environment the walks use that tokenizer's
vocabulary (the release's 163,840 ids) instead of grammar_check's small one.

Makes N_SCHEMAS schemas of its own (a seeded generator covering every
supported keyword, nesting, local $ref recursion and unions), and for each:
  positive: grammar_check gen writes OUTPUTS random walks through the
    schema's grammar (seeded, under the end budget); each must be complete,
    parse as JSON and validate.
  negative: each output mutated (a byte deleted, inserted or changed);
    every mutant the validator rejects must be rejected by the matcher
    (grammar_check check), since the grammar may only accept valid JSON.
Then the refusals: schemas with unsupported keywords must fail in strict
mode with exit 2 and a message naming the keyword and its JSON pointer.
Prints a summary; exits 1 on any failure (each named)."""
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from datetime import date, datetime, time

import jsonschema

BIN, NSCHEMA, NOUT, SEED = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
BUDGET = sys.argv[5] if len(sys.argv) > 5 else "900"
rng = random.Random(SEED)
failures = []

PATTERNS = ["^[a-z]{2,5}$", "^[A-Z][a-z]*-[0-9]{1,3}$", "^(ab|cd)+$", "^\\d{3}-\\d{4}$",
            "^[^\"\\\\]{0,6}$", "x", "^a.c$", "^\\w+@\\w+\\.com$", "^(?:yes|no)$",
            "^[\\u00e9\\u20ac]{1,3}$", "^\"quoted\"$", "^back\\\\slash$", "^tab\\t$"]
FORMATS = ["date", "time", "date-time", "uuid", "email", "ipv4"]
WORDS = ["id", "name", "a b", "é", "x\"y", "k\\z", "count", "items", "meta", "n1"]


def scalar(depth):
    k = rng.randrange(12)
    if k == 0:
        return {"type": "string"}
    if k == 1:
        lo = rng.randrange(4)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randrange(6)}
    if k == 2:
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    if k == 3:
        return {"type": "string", "format": rng.choice(FORMATS)}
    if k == 4:
        s = {"type": "integer"}
        if rng.random() < 0.7:
            s["minimum"] = rng.randrange(-300, 300)
        if rng.random() < 0.7:
            s["maximum"] = s.get("minimum", -300) + rng.randrange(0, 2000)
        if rng.random() < 0.3:
            s["exclusiveMinimum"] = s.pop("minimum", 5)
        if rng.random() < 0.3:
            s["exclusiveMaximum"] = s.pop("maximum", 10**6)
        lo = max(s.get("minimum", -10**9), s.get("exclusiveMinimum", -10**9) + 1)
        hi = min(s.get("maximum", 10**9), s.get("exclusiveMaximum", 10**9) - 1)
        if lo > hi:  # keep it satisfiable: the generator tests the engine, not refusals
            s.pop("maximum", None)
            s.pop("exclusiveMaximum", None)
        return s
    if k == 5:
        s = {"type": "number"}
        if rng.random() < 0.6:
            s["minimum"] = rng.choice([0, 1, 2.5, 10])
            if rng.random() < 0.5:
                s["maximum"] = s["minimum"] + rng.choice([1, 3.5, 100])
        return s
    if k == 6:
        return {"type": "boolean"}
    if k == 7:
        return {"type": "null"}
    if k == 8:
        vals = rng.sample(["red", "green", 1, 2.5, None, True, "a\"b", "é", [1, 2], {"k": 1}],
                          rng.randrange(1, 5))
        return {"enum": vals}
    if k == 9:
        return {"const": rng.choice(["fixed", 42, None, False, {"a": [1]}])}
    if k == 10:
        return {"type": rng.sample(["string", "integer", "null", "boolean"], 2)}
    return {"type": "string", "nullable": True} if rng.random() < 0.5 else \
        {"type": "integer", "minimum": 0, "maximum": 9}


def schema(depth=0):
    if depth > 3:
        return scalar(depth)
    k = rng.randrange(10)
    if k <= 3:
        return scalar(depth)
    if k == 4 or k == 5:
        names = rng.sample(WORDS, rng.randrange(0, 5))
        props = {n: schema(depth + 1) for n in names}
        s = {"type": "object", "properties": props}
        req = [n for n in names if rng.random() < 0.5]
        if req:
            s["required"] = req
        r = rng.random()
        if r < 0.4:
            s["additionalProperties"] = False
        elif r < 0.5 and not props:
            s["additionalProperties"] = scalar(depth + 1)
            del s["properties"]
        return s
    if k == 6:
        s = {"type": "array"}
        if rng.random() < 0.4:
            s["prefixItems"] = [schema(depth + 1) for _ in range(rng.randrange(1, 3))]
            if rng.random() < 0.5:
                s["items"] = False
            else:
                s["items"] = scalar(depth + 1)
        else:
            s["items"] = schema(depth + 1)
        if rng.random() < 0.5:
            s["minItems"] = rng.randrange(0, 3)
        if rng.random() < 0.5:
            s["maxItems"] = s.get("minItems", 0) + rng.randrange(0, 4)
        if "prefixItems" in s and s.get("items") is False:
            s["minItems"] = min(s.get("minItems", 0), len(s["prefixItems"]))
        return s
    if k == 7:
        # disjoint branches (different types), so oneOf is exact too
        types = rng.sample(["string", "integer", "boolean", "null", "array", "object"], 3)
        branches = []
        for t in types:
            b = {"type": t}
            if t == "object":
                b = {"type": "object", "properties": {"v": scalar(depth + 1)},
                     "required": ["v"], "additionalProperties": False}
            if t == "array":
                b = {"type": "array", "items": {"type": "integer"}, "maxItems": 3}
            branches.append(b)
        return {rng.choice(["anyOf", "oneOf"]): branches}
    if k == 8:
        return {"allOf": [
            {"type": "object", "properties": {"a": scalar(depth + 1)}, "required": ["a"]},
            {"properties": {"b": scalar(depth + 1)}},
        ]}
    return {"$ref": "#/$defs/node"}


def document():
    s = schema()
    r = rng.random()
    if r < 0.25 or "$ref" in json.dumps(s):
        # a recursive tree through $defs
        node = {"type": "object", "properties": {
            "value": scalar(1),
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["value"], "additionalProperties": False}
        if "$ref" in json.dumps(s):
            return {"$defs": {"node": node}, **s}
        return {"$defs": {"node": node}, "$ref": "#/$defs/node",
                "description": "a tree", "title": "t"}
    return s


def format_ok(schema_doc, value):
    """Formats the validator may not check (date-time needs an optional
    package): checked here by the standard library."""
    ok = True

    def walk(s, v):
        nonlocal ok
        if not isinstance(s, dict):
            return
        if "$ref" in s:
            walk(schema_doc["$defs"]["node"], v)
        if s.get("format") == "date-time" and isinstance(v, str):
            try:
                datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                ok = False
        if s.get("format") == "time" and isinstance(v, str):
            try:
                time.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                ok = False
        if s.get("format") == "date" and isinstance(v, str):
            try:
                date.fromisoformat(v)
            except ValueError:
                ok = False
        for key in ("anyOf", "oneOf", "allOf"):
            for b in s.get(key, []):
                walk(b, v)
        if isinstance(v, dict):
            for k, sub in s.get("properties", {}).items():
                if k in v:
                    walk(sub, v[k])
        if isinstance(v, list):
            pre = s.get("prefixItems", [])
            for i, x in enumerate(v):
                walk(pre[i] if i < len(pre) else s.get("items"), x)
    walk(schema_doc, value)
    return ok


def valid(validator, schema_doc, text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return validator.is_valid(v) and format_ok(schema_doc, v)


def run(args, stdin=None):
    p = subprocess.run([BIN] + args, input=stdin, capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode("utf-8", "surrogateescape"), p.stderr.decode()


tmp = tempfile.mkdtemp(prefix="k3-schema-")
n_out = n_neg = n_neg_valid = 0
keywords = set()
for i in range(NSCHEMA):
    doc = document()
    keywords.update(re.findall(r'"(\$?[a-zA-Z]+)":', json.dumps(doc)))
    path = os.path.join(tmp, "s%d.json" % i)
    with open(path, "w") as f:
        json.dump(doc, f)
    validator = jsonschema.Draft202012Validator(doc, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    rc, out, err = run(["gen", path, str(NOUT), str(SEED * 1000 + i), BUDGET, "strict"])
    if rc != 0:
        failures.append("schema %d: grammar_check rc %d: %s %s\n  %s" % (i, rc, out.strip(),
                                                                       err.strip(), json.dumps(doc)))
        continue
    lines = out.split("\n")[:-1]
    mutants = []
    for line in lines:
        n_out += 1
        if line == "INCOMPLETE" or not valid(validator, doc, line):
            failures.append("schema %d: output not valid: %r\n  schema %s" % (i, line, json.dumps(doc)))
            continue
        for _ in range(6):
            b = bytearray(line.encode("utf-8", "surrogateescape"))
            pos = rng.randrange(len(b) + 1)
            op = rng.randrange(3)
            if op == 0 and pos < len(b):
                del b[pos]
            elif op == 1:
                b[pos:pos] = rng.choice([b'"', b"1", b"a", b",", b"}", b"]", b" ", b"-", b"."])
            elif pos < len(b):
                b[pos] = rng.choice(b'"1a,}] -.0x')
            if b"\n" not in b:
                mutants.append(bytes(b))
    if mutants:
        rc, out, err = run(["check", path], stdin=b"\n".join(mutants) + b"\n")
        verdicts = out.split()
        for m, v in zip(mutants, verdicts):
            text = m.decode("utf-8", "surrogateescape")
            try:
                is_valid = valid(validator, doc, m.decode("utf-8"))
            except UnicodeDecodeError:
                is_valid = False
            n_neg += not is_valid
            n_neg_valid += is_valid
            if not is_valid and v != "0":
                failures.append("schema %d: matcher accepts an invalid text %r\n  schema %s" %
                                (i, text, json.dumps(doc)))

# refusals: strict names the keyword and its pointer; not strict warns
REFUSED = [
    ({"type": "object", "properties": {"a": {"type": "object", "patternProperties": {}}}},
     "patternProperties", "/properties/a/patternProperties"),
    ({"type": "integer", "multipleOf": 3}, "multipleOf", "/multipleOf"),
    ({"type": "array", "uniqueItems": True}, "uniqueItems", "/uniqueItems"),
    ({"type": "string", "format": "hostname"}, "format", "/format"),
    ({"type": "string", "pattern": "^(?=a)b$"}, "pattern", "/pattern"),
    ({"anyOf": [{"type": "string", "contains": {}}]}, "contains", "/anyOf/0/contains"),
    ({"$defs": {"x": {"not": {}}}, "$ref": "#/$defs/x"}, "not", "/not"),
]
for k, (doc, kw, ptr) in enumerate(REFUSED):
    path = os.path.join(tmp, "r%d.json" % k)
    with open(path, "w") as f:
        json.dump(doc, f)
    rc, out, err = run(["gen", path, "1", "1", "200", "strict"])
    want = "unsupported keyword '%s' at %s" % (kw, ptr)
    if rc != 2 or want not in out:
        failures.append("strict refusal of %s: rc %d, %r (want %r)" % (kw, rc, out.strip(), want))
    rc, out, err = run(["gen", path, "1", "1", "200"])
    if rc != 0 or want not in err:
        failures.append("non-strict warning for %s: rc %d, stderr %r" % (kw, rc, err.strip()))

print("schema conformance (jsonschema %s, %s, budget %s ids, vocabulary %s): %d schemas, %d outputs validated, "
      "%d invalid mutants all refused (%d valid mutants not judged), %d refusals checked; "
      "keywords covered: %s" % (
          getattr(jsonschema, "__version__", "?"), jsonschema.__file__, BUDGET,
          os.environ.get("K3_GRAMMAR_VOCAB") or "synthetic", NSCHEMA, n_out, n_neg,
          n_neg_valid, len(REFUSED), " ".join(sorted(keywords))))
for f in failures[:20]:
    print("FAIL:", f)
if failures:
    print("%d failures" % len(failures))
    sys.exit(1)
