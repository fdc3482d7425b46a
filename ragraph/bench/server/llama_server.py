"""llama.cpp's own C++ server, `llama-server`: built once from the llama.cpp sources vendored in
the llama-cpp-python sdist this venv runs, and cached per version as pip caches the wheel.

`llama-server` is what people put in front of a GGUF (continuous batching over `-np` slots,
prompt caching; the engine under Ollama and LM Studio). No registry package ships a maintained
build of it, so it is compiled here: `python -m ragraph.bench.server.llama_server build` (what
`make llama-server` runs) downloads the sdist with pip, builds the one target with cmake (from
PATH, else PyPI's) and a C++ compiler, and keeps the binary under `$RAGRAPH_CACHE/bin` (default ~/.cache/ragraph/bin). A second build of
the same version on the same kind of CPU finds it there and returns at once.

    python -m ragraph.bench.server.llama_server build     # build unless cached; print the path
    python -m ragraph.bench.server.llama_server path      # print the cached path, exit 1 if none
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# Set to a llama-server binary to use it instead of the cached build.
BINARY_ENV = "RAGRAPH_LLAMA_SERVER"
# The server and nothing else: no tests, examples or other tools; no web UI (the prebuilt one
# is a download from Hugging Face, which CI cannot reach); no OpenSSL (loopback HTTP only);
# static llama/ggml libraries, so the one binary is all there is to cache.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)


@dataclass(frozen=True)
class Build:
    """Which llama-server a build makes: the llama-cpp-python version whose vendored llama.cpp
    it compiles, for this CPU. ggml compiles for the host's instruction set (GGML_NATIVE, as pip
    does when it builds the wheel), so the cache key includes the CPU's flags: a binary built
    on a CPU with AVX-512 must not be found on one without."""

    version: str
    cpu: str

    @classmethod
    def here(cls) -> Build:
        return cls(metadata.version("llama_cpp_python"), cpu_key())

    def path(self, cache: Path | None = None) -> Path:
        return (cache or bin_dir()) / f"llama-server-{self.version}-{self.cpu}"


def bin_dir() -> Path:
    from ragraph.runtime.retrieval.build.corpus import cache_root  # noqa: PLC0415

    return cache_root() / "bin"


def cpu_key(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The machine type and a short hash of the CPU's feature flags."""
    flags = ""
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    return f"{platform.machine()}-{hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def find() -> Path | None:
    """The llama-server to run: `$RAGRAPH_LLAMA_SERVER`, else this version's cached build."""
    env = os.environ.get(BINARY_ENV)
    if env:
        return Path(env)
    try:
        path = Build.here().path()
    except metadata.PackageNotFoundError:  # no llama-cpp-python: nothing was built for it
        return None
    return path if path.is_file() else None


def build(jobs: int | None = None, log=sys.stderr) -> Path:  # noqa: ANN001 - a text stream
    """The cached binary, built first when missing."""
    target = Build.here()
    out = target.path()
    if out.is_file():
        print(f"llama-server {target.version}: cached at {out}", file=log)
        return out
    jobs = jobs or int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or os.cpu_count() or 1)
    print(f"llama-server {target.version}: not built for this CPU yet; compiling it once from "
          f"llama.cpp's sources ({jobs} jobs; minutes on 2 cores), then cached at {out}",
          file=log, flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llama-server-build-") as scratch:
        source = _vendored_sources(target.version, Path(scratch), log)
        binary = _compile(_cmake(Path(scratch), log), source, Path(scratch) / "build", jobs, log)
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        shutil.copy2(binary, partial)
        os.replace(partial, out)  # a build cut short leaves no half-written binary behind
    print(f"llama-server {target.version}: built in {time.monotonic() - started:.0f} s "
          f"({jobs} jobs), cached at {out}", file=log)
    return out


def _vendored_sources(version: str, scratch: Path, log) -> Path:  # noqa: ANN001
    """llama.cpp as vendored in the llama-cpp-python sdist of `version` (pip downloads it)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--no-binary", ":all:", f"llama-cpp-python=={version}", "-d", str(scratch)],
                   check=True, stdout=log, stderr=log)
    sdist = next(scratch.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        tar.extractall(scratch, filter="data")
    source = scratch / sdist.name.removesuffix(".tar.gz") / "vendor" / "llama.cpp"
    if not (source / "tools" / "server").is_dir():
        raise SystemExit(f"llama-server: {sdist.name} has no vendored llama.cpp server sources")
    return source


def _cmake(scratch: Path, log) -> str:  # noqa: ANN001
    """cmake from PATH, else from PyPI's `cmake` wheel, unpacked into the scratch folder only
    (as pip's build isolation gets it to compile llama-cpp-python)."""
    found = shutil.which("cmake")
    if found:
        return found
    tools = scratch / "tools"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(tools),
                    "cmake"], check=True, stdout=log, stderr=log)
    return str(tools / "cmake" / "data" / "bin" / "cmake")


def _compile(cmake: str, source: Path, build_dir: Path, jobs: int, log) -> Path:  # noqa: ANN001
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run([cmake, "-S", str(source), "-B", str(build_dir), *generator, *CMAKE_FLAGS],
                   check=True, stdout=log, stderr=log)
    subprocess.run([cmake, "--build", str(build_dir), "--target", "llama-server", "-j",
                    str(jobs)], check=True, stdout=log, stderr=log)
    return build_dir / "bin" / "llama-server"


def main(argv: list[str]) -> int:
    if argv == ["build"]:
        print(build())
        return 0
    if argv == ["path"]:
        found = find()
        if found is None:
            print("llama-server: not built for this version and CPU (make llama-server)",
                  file=sys.stderr)
            return 1
        print(found)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
