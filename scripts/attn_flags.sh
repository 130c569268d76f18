# Sourced by the run scripts: p_flag VARIANT P prints "-p P" for a variant with re-weighting and
# nothing for one without (its binaries refuse -p), so one command line serves every variant.
p_flag() {
    case "$1" in
        lssar|softmax_rw|sigmoid_l1_rw|relu_l1_rw) echo "-p $2" ;;
    esac
}
