"""libgomp reads GOMP_SPINCOUNT once, when llama_cpp loads it: the embedded engine's bounded spin
must be in the environment before the first `import llama_cpp` of the process, whichever of the
package's modules (or the LangGraph app's client) is imported first."""

import subprocess
import sys

import pytest

from tests.real import need_module

need_module("llama_cpp")

PROBE = """
import importlib.abc, os, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" and not seen:
            seen.append(os.environ.get("GOMP_SPINCOUNT"))
        return None
sys.meta_path.insert(0, Watch())
import {module}
print(seen[0] if seen else "not imported")
"""


@pytest.mark.parametrize("module", ["ragraph.runtime.llm.llamacpp.engine",
                                    "ragraph.runtime.llm.llamacpp.chat",
                                    "ragraph.runtime.executors.app_clients"])
def test_the_spin_bound_is_set_before_llama_cpp_loads(module):
    env = {k: v for k, v in __import__("os").environ.items() if k != "GOMP_SPINCOUNT"}
    code = PROBE.format(module=module)
    if module.endswith("app_clients"):
        code = code.replace(f"import {module}\n", f"import {module}\n"
                            "from ragraph.runtime.executors.app_clients import LlamaCppApp\n"
                            "try:\n    LlamaCppApp('/nonexistent.gguf', 1, 64)\n"
                            "except Exception:\n    pass\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    assert out[-1] == "10000"
