# Sourced by the run scripts: p_flag VARIANT P prints "-p P" for a variant with re-weighting and
# nothing for one without (its binaries refuse -p), so one command line serves every variant. The
# variants with re-weighting come from the manifest (scripts/manifest.py).
ATTN_REWEIGHTING=" $(/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/manifest.py" names reweight=true | tr '\n' ' ')"
p_flag() {
    case "$ATTN_REWEIGHTING" in
        *" $1 "*) echo "-p $2" ;;
    esac
}
