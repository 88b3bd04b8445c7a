#!/usr/bin/env python3
"""Prints the module graphs of the workspace's crates, folder by folder, and
their cycles. The check itself (one implementation) is the test
symm-runtime/tests/module_graph.rs, which `cargo test` runs; this only runs
its printer, `print_module_graphs`, which also covers crates not yet held to
the rule (`PENDING` there).

    python3 scripts/module-graph.py [--dot]
"""
import os, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
env = dict(os.environ, SYMM_MODULE_GRAPH="dot" if "--dot" in sys.argv[1:] else "text")
sys.exit(subprocess.call(
    ["cargo", "test", "-q", "-p", "symm-runtime", "--test", "module_graph", "--",
     "--ignored", "--exact", "print_module_graphs", "--nocapture"],
    cwd=root, env=env))
