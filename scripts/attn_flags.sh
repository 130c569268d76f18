# Sourced by the run scripts: p_flag VARIANT P prints "-p P" for a variant with re-weighting and
# nothing for one without (its binaries refuse -p), so one command line serves every variant. The
# variants with re-weighting come from the manifest (tools/print_manifest.cpp: one line per
# variant), read here with grep and sed alone so that a machine with the prebuilt binaries and no
# compiler or Python reads it too: LSSAR_MANIFEST (scripts/gpu_check.sh sets it to the prebuilt
# folder's copy), else build/manifest.json, made if missing.
attn_manifest=${LSSAR_MANIFEST:-$(dirname "${BASH_SOURCE[0]}")/../build/manifest.json}
if [ -z "${LSSAR_MANIFEST:-}" ]; then
    make -s -C "$(dirname "${BASH_SOURCE[0]}")/.." build/manifest.json >/dev/null || {
        echo "attn_flags.sh: make build/manifest.json failed" >&2; exit 1; }
fi
[ -s "$attn_manifest" ] || { echo "attn_flags.sh: no manifest at $attn_manifest" >&2; exit 1; }
ATTN_REWEIGHTING=" $(grep '"kind":.*"reweight": true' "$attn_manifest" | sed 's/.*"name": "\([a-z0-9_]*\)".*/\1/' | tr '\n' ' ')"
p_flag() {
    case "$ATTN_REWEIGHTING" in
        *" $1 "*) echo "-p $2" ;;
    esac
}
