"""Builds attn._attn, the CPython extension over libattn.

The extension links the static library build/libattn.a (compiled with -fPIC) and the CLI's own
objects (its option resolution and training commands, without main.o), so a wheel needs only the
Debian libraries libattn uses at run time (tools/install_deps.sh installs them). Both come from
the repository's Makefile: this script runs `make` in the repository root first (quick when
everything is built), so `pip install ./python` works from a clean clone after
`sh tools/install_deps.sh` (or `make test` / `make demo`, which run it).

Environment:
  ATTN_BUILD   the Makefile's build directory to link (default: build); its CC/flags as make has
  ATTN_NO_MAKE set to 1 to skip running make (the objects must exist)
On CPython >= 3.11 the module is built against the limited API (one abi3 wheel for 3.11+)."""
import os
import subprocess
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD_DIR = os.path.join(ROOT, os.environ.get("ATTN_BUILD", "build"))  # absolute stays absolute
BUILD = os.path.relpath(BUILD_DIR, ROOT)  # the Makefile's BUILD (its targets are relative)

if not os.path.exists(os.path.join(ROOT, "Makefile")) or not os.path.isdir(os.path.join(ROOT, "src")):
    sys.exit("attn: build the Python package from the attn repository (pip install ./python): "
             "it links the library that the repository's Makefile builds")

# Not main.c (the extension is the entry point) nor cmd_serve.c (the HTTP server: src/serve/ and
# libmicrohttpd, which only the attn binary links).
cli_srcs = sorted(f for f in os.listdir(os.path.join(ROOT, "src", "cli"))
                  if f.endswith(".c") and f not in ("main.c", "cmd_serve.c"))
cli_objs = [os.path.join(BUILD_DIR, "obj", "src", "cli", f[:-2] + ".o") for f in cli_srcs]
lib = os.path.join(BUILD_DIR, "libattn.a")

if os.environ.get("ATTN_NO_MAKE", "0") != "1":
    jobs = os.environ.get("ATTN_MAKE_JOBS", str(min(os.cpu_count() or 1, 4)))
    rel = [os.path.relpath(p, ROOT) for p in [lib] + cli_objs]
    cmd = ["make", "-C", ROOT, "-j" + jobs, "BUILD=" + BUILD] + rel
    print("attn: " + " ".join(cmd), flush=True)
    subprocess.check_call(cmd)

for p in [lib] + cli_objs:
    if not os.path.exists(p):
        sys.exit("attn: %s is missing: run make in %s first" % (p, ROOT))

# MPI's link flags when libattn was built with it (src/dist/; empty without): the Makefile's.
mpi_libs = subprocess.run(["make", "-s", "-C", ROOT, "--no-print-directory", "BUILD=" + BUILD,
                           "print-mpi-libs"], check=True, capture_output=True,
                          text=True).stdout.split()

limited = sys.version_info >= (3, 11)
macros = [("Py_LIMITED_API", "0x030B0000")] if limited else []

ext = Extension(
    "attn._attn",
    sources=["src/_attn.c"],
    include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "src", "cli")],
    define_macros=macros + [("_POSIX_C_SOURCE", "200809L"), ("_DEFAULT_SOURCE", None)],
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
    extra_objects=cli_objs + [lib],
    # relink when the library changes (setuptools reuses python/build/ otherwise: a stale module)
    depends=cli_objs + [lib],
    libraries=["jansson", "utf8proc", "pcre2-8", "png16", "freetype", "sentencepiece",
               "stdc++", "m", "pthread"],
    # libgomp (the kernels' OpenMP); libattn's own symbols stay inside the module
    extra_link_args=["-fopenmp", "-Wl,--exclude-libs,ALL"] + mpi_libs,
    py_limited_api=limited,
)

options = {"bdist_wheel": {"py_limited_api": "cp311"}} if limited else {}
setup(ext_modules=[ext], options=options)
