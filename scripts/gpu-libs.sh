# Sourced by the scripts that run GPU binaries: puts NVRTC, NCCL and cuBLAS (from the
# CUDA toolkit, the system, or torch's wheels) on LD_LIBRARY_PATH, and links
# libnccl.so, the name cudarc loads, to the libnccl.so.2 found there.
LIBS=$(python3 - <<'PY'
import glob, os, site
dirs = set()
for base in site.getsitepackages() + ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"]:
    for pat in ("nvidia/*/lib/libnccl.so*", "nvidia/*/lib/libnvrtc.so*", "nvidia/*/lib/libcublas.so*", "libnccl.so*", "libnvrtc.so*", "libcublas.so*"):
        for f in glob.glob(os.path.join(base, pat)):
            dirs.add(os.path.dirname(f))
print(":".join(sorted(dirs)))
PY
)
mkdir -p /tmp/symm-nccl
for d in ${LIBS//:/ }; do
  [ -e "$d/libnccl.so.2" ] && ln -sf "$d/libnccl.so.2" /tmp/symm-nccl/libnccl.so
done
export LD_LIBRARY_PATH="/tmp/symm-nccl:$LIBS:${LD_LIBRARY_PATH:-}"
