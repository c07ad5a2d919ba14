#!/usr/bin/env python3
"""Prints the modules a fuzz target links: the modules its source imports and everything they depend on, from
`swift package describe --type json` (read on standard input). Usage: modules.py TARGET.swift < describe.json

Linking only these (and not every library module) keeps libFuzzer's coverage map to the code the target can reach:
libFuzzer clears and scans the whole map after every input, and the map of all modules (about 130,000 counters)
was most of the time per input for the fast targets. Products of other packages map to their modules below."""
import json
import re
import sys

PRODUCTS = {"ArgumentParser": ["ArgumentParser", "ArgumentParserToolInfo"]}

describe = json.load(sys.stdin)
deps = {t["name"]: (t.get("target_dependencies") or []) + (t.get("product_dependencies") or [])
        for t in describe["targets"]}
with open(sys.argv[1]) as f:
    wanted = re.findall(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*import\s+(\w+)", f.read(), re.M)
seen = set()
while wanted:
    name = wanted.pop()
    for module in PRODUCTS.get(name, [name]):
        if module not in seen:
            seen.add(module)
            wanted.extend(deps.get(module, []))
print("\n".join(sorted(seen)))
