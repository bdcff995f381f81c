#!/usr/bin/env bash
# Fuzzes autopar's readers of untrusted files with libFuzzer (docs/fuzzing.md):
# builds the fuzz targets of fuzz/ with clang-22, AddressSanitizer and
# libFuzzer in their own build directory, seeds a corpus for each from the
# ONNX conformance models and the repository's inputs, and runs each target
# for a set time. Crashing, leaking or hanging inputs are saved under
# BUILD_DIR/fuzz-crashes/; the script exits 1 if there are any.
#
# Usage: scripts/fuzz.sh [-t SECONDS] [-b BUILD_DIR] [-j JOBS] [TARGET...]
#   -t SECONDS    time per target (default 60)
#   -b BUILD_DIR  build directory (default build-fuzz, never build/)
#   -j JOBS       ninja jobs (default 2)
#   TARGET        onnx npy manifest cluster train-config checkpoint (default: all)
# Extra libFuzzer flags: FUZZ_FLAGS="-max_len=4096 -jobs=2" scripts/fuzz.sh.
# The corpora (BUILD_DIR/fuzz-corpus/TARGET) persist, so a second run goes on
# from what the first found. Replay one input: BUILD_DIR/fuzz/autopar-fuzz-TARGET FILE
# (AUTOPAR_FUZZ_VERBOSE=1 prints the importer's diagnostics).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

seconds=60
build="$root/build-fuzz"
jobs=2
while getopts "t:b:j:h" opt; do
  case "$opt" in
    t) seconds="$OPTARG" ;;
    b) build="$(realpath -m "$OPTARG")" ;;
    j) jobs="$OPTARG" ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
all_targets=(onnx npy manifest cluster train-config checkpoint)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] ||
    { echo "fuzz: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done
if [ "$build" = "$root/build" ]; then
  echo "fuzz: build/ is the normal build; use another directory (-b)" >&2
  exit 2
fi

cc=/usr/bin/clang-22
cxx=/usr/bin/clang++-22
testdata=/usr/share/libonnx-testdata/data
if [ ! -x "$cxx" ] || ! ls /usr/lib/llvm-22/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a \
    >/dev/null 2>&1 || [ ! -d "$testdata" ]; then
  "$root/scripts/setup.sh" # Installs clang-22, libclang-rt-22-dev, the test data.
fi

if [ ! -f "$build/build.ninja" ]; then
  # -O1 -g without NDEBUG: assertions in autopar's and LLVM's headers are
  # live, so that a bad cast or an index out of range is caught where it
  # happens rather than as a later segfault.
  cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DAUTOPAR_FUZZ=ON -DAUTOPAR_ENABLE_CUDA=OFF \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build" -j "$jobs" $(printf 'autopar-fuzz-%s ' "${targets[@]}")

# Seeds: a fresh copy each run in BUILD_DIR/fuzz-seeds/TARGET (libFuzzer
# reads them with the corpus and adds only what covers something new).
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds"
# Debian's python3, which has the numpy setup.sh installs (a python3 earlier on
# PATH, e.g. pyenv's, may not).
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" - "$root" "$seeds" "$testdata" <<'EOF'
import hashlib, json, pathlib, re, subprocess, sys

root, seeds, testdata = (pathlib.Path(p) for p in sys.argv[1:])

def put(target, data, suffix):
    d = seeds / target
    d.mkdir(parents=True, exist_ok=True)
    (d / (hashlib.sha1(data).hexdigest()[:16] + suffix)).write_bytes(data)

# ONNX: the conformance models (node tests, small), the repository's models.
for p in sorted(testdata.glob("**/model.onnx")):
    if p.stat().st_size <= 256 * 1024:
        put("onnx", p.read_bytes(), ".onnx")
tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                         text=True).stdout.split()
for name in tracked:
    p = root / name
    if name.endswith(".onnx") and p.is_file() and p.stat().st_size <= 256 * 1024:
        put("onnx", p.read_bytes(), ".onnx")

# JSON: every JSON object in the docs' ```json blocks, the tests' raw strings
# and the repository's .json files goes to every JSON reader (a manifest
# example mutates into a bad cluster file as well as anything).
texts = []
for name in tracked:
    p = root / name
    if not p.is_file():
        continue
    if name.endswith(".md"):
        texts += re.findall(r"```json\n(.*?)```", p.read_text(errors="replace"), re.S)
    elif name.endswith(".cpp") and name.startswith(("unittests/", "test/")):
        texts += re.findall(r'R"\((.*?)\)"', p.read_text(errors="replace"), re.S)
    elif name.endswith(".json") and "node_modules" not in name and \
            p.stat().st_size <= 64 * 1024 and not name.endswith("package-lock.json"):
        texts.append(p.read_text(errors="replace"))
json_targets = ("manifest", "cluster", "train-config", "checkpoint")
words = set()
def collect(value):
    if isinstance(value, dict):
        for k, v in value.items():
            words.add(k)
            collect(v)
    elif isinstance(value, list):
        for v in value:
            collect(v)
    elif isinstance(value, str) and len(value) <= 40:
        words.add(value)
for text in texts:
    try:
        value = json.loads(text)
    except ValueError:
        continue
    if isinstance(value, dict):
        collect(value)
        for target in json_targets:
            put(target, text.encode(), ".json")
# A libFuzzer dictionary of the keys and short strings the seeds use.
entries = [json.dumps(json.dumps(w)) for w in sorted(words) if w.isascii() and w.isprintable()]
entries += ['"null"', '"true"', '"false"', '"-1"', '"1e300"', '"9223372036854775807"',
            '"18446744073709551616"', '"[]"', '"{}"']
for target in json_targets:
    (seeds / (target + ".dict")).write_text("\n".join(entries) + "\n")
(seeds / "npy.dict").write_text("\n".join(
    ['"\\x93NUMPY"', "\"'descr'\"", "\"'fortran_order'\"", "\"'shape'\"", '"True"', '"False"',
     "\"'<f4'\"", "\"'|b1'\"", "\"'>i8'\"", '"(2, 3)"', '"()"', '"-1"', '"99999999999"']) + "\n")

# .npy: the repository's, and one of each dtype and header version numpy writes.
for name in tracked:
    if name.endswith(".npy") and (root / name).stat().st_size <= 64 * 1024:
        put("npy", (root / name).read_bytes(), ".npy")
try:
    import io
    import numpy as np
    arrays = [np.arange(6, dtype=t).reshape(2, 3) for t in
              ("<f4", "<f8", "<f2", "<i8", "<i4", "<i2", "i1", "<u8", "<u4", "<u2", "u1")]
    arrays += [np.array([True, False]), np.float32(3.5), np.zeros((0, 4), "<f4"),
               np.arange(4, dtype=">f4"), np.asfortranarray(np.ones((2, 2), "<f4"))]
    for a in arrays:
        for version in ((1, 0), (2, 0), (3, 0)):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(a), version=version)
            put("npy", buf.getvalue(), ".npy")
except ImportError:
    print("fuzz: numpy not found; .npy seeds only from the repository")
EOF

corpus="$build/fuzz-corpus"
crashes="$build/fuzz-crashes"
logs="$build/fuzz-logs"
mkdir -p "$crashes" "$logs"
# Leaks are bugs too; stack-use-after-return catches more; an allocation
# above the rss limit is reported (a reader must check sizes before
# allocating, not die of std::bad_alloc).
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "$corpus/$t" "$seeds/$t"
  before=$(ls "$crashes" | grep -c "^$t-" || true)
  extra=()
  [ -f "$seeds/$t.dict" ] && extra+=("-dict=$seeds/$t.dict")
  echo "fuzz: $t for ${seconds}s ($(ls "$seeds/$t" | wc -l) seeds, $(ls "$corpus/$t" | wc -l) in the corpus)"
  # The checkpoint target writes its valid metadata into the seeds.
  set +e
  AUTOPAR_FUZZ_SEED_DIR="$seeds/$t" "$build/fuzz/autopar-fuzz-$t" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=262144 \
    -print_final_stats=1 -artifact_prefix="$crashes/$t-" "${extra[@]}" \
    ${FUZZ_FLAGS:-} "$corpus/$t" "$seeds/$t" >"$logs/$t.log" 2>&1
  rc=$?
  set -e
  after=$(ls "$crashes" | grep -c "^$t-" || true)
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)" \
    "$logs/$t.log" | sed "s/^/fuzz: $t: /" || true
  if [ "$rc" != 0 ] || [ "$after" != "$before" ]; then
    echo "fuzz: $t FOUND A PROBLEM (exit $rc); log: $logs/$t.log"
    grep -E "^==[0-9]+==ERROR|^SUMMARY|artifact_prefix|Test unit written" "$logs/$t.log" |
      head -5 | sed "s/^/fuzz: $t:   /"
    status=1
  fi
done
if [ "$status" = 0 ]; then
  echo "fuzz: no crash, leak or timeout"
else
  echo "fuzz: inputs that fail are in $crashes; replay one with $build/fuzz/autopar-fuzz-TARGET FILE"
fi
exit "$status"
