"""The memory loop and the agent-state API moved to packages whose names say what they are;
code written against the old import paths still gets the very same modules and classes."""

from __future__ import annotations

import subprocess
import sys


def test_the_old_import_paths_are_the_new_modules() -> None:
    code = (
        "import synapsedb.agents.hooks as old_hooks\n"
        "from synapsedb.agents import AgentMemoryAPI as OldAPI, MemoryStoreException\n"
        "from synapsedb.agentic import MemoryLoop as OldLoop\n"
        "from synapsedb.agentic.jobs import holder\n"
        "import synapsedb.agent_state as state, synapsedb.agent_state.hooks as hooks\n"
        "import synapsedb.memory_loop as loop, synapsedb.memory_loop.jobs as jobs\n"
        "import synapsedb.errors as errors\n"
        "assert old_hooks is hooks and OldAPI is state.AgentMemoryAPI\n"
        "assert OldLoop is loop.MemoryLoop and holder is jobs.holder\n"
        "assert MemoryStoreException is errors.MemoryStoreError\n"
        "print('same')\n"
    )
    # a fresh interpreter: the old names imported first, before anything loaded the new ones
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "same"
